"""Rewrites a bit-exact compiler may not make: each changes the rounding of the result (not its
value in exact arithmetic) and is taken only when the cost model (:func:`warpsmith.cost.program.program_ms`,
greedy fusion, the whole program per call, what :mod:`.hoist` would fold out of it free) predicts
it cheaper. Every program they produce is verified at
the end (``solve`` runs ``warpsmith check``), and ``solve`` keeps a program without them as its last
candidate (:func:`.solve.solve`).

- **Reassociation** of matmul chains: ``(A @ B) @ C`` and ``A @ (B @ C)`` compute the same product
  in a different order with different FLOPs; each chain is rewritten to the cheaper association.
- **Reduction folded into a GEMM**: a sum (or mean) over the output features of a GEMM, through
  any chain of multiplications and divisions by constants, is the GEMM of the summed weight:
  ``sum_n (x W^T + b)[m, n] = x (sum_n W[n, :])^T + sum_n b[n]``. The (M, N) product becomes an
  (M, 1) one; the weight's sum is a reduction over the weight alone, which :mod:`.hoist` computes
  once rather than at each call when the weight is a parameter.

- **Algebra** (:mod:`.algebra`): scalars distributed and collected, division by a constant as
  multiplication, a constant factor moved through a matmul, exp/log identities, and the user's own
  softmax-then-matmul as online softmax (:mod:`.lower_softmax_attention`).

Approximate functions and lower-precision storage, which need a declared deviation, are
:mod:`.precision`'s (after the partition is chosen).

Each rewrite returns one record per site: ``rewrite``, ``at``, ``shapes``, ``before_ms`` and
``after_ms`` (predicted), ``taken``.
"""
from __future__ import annotations

from typing import Any

import torch

from .decisions import decided
from .ir import Graph, Node
from .lower import _redirect
from ..cost.program import node_ms, program_ms


def rewrite(graph: Graph, target: Any) -> list[dict[str, Any]]:
    """Every rewrite of this module, in order, on ``graph`` (in place); their records."""
    from .algebra import algebra

    return reassociate(graph, target) + fold_reductions(graph, target) + algebra(graph, target)


def describe(r: dict[str, Any]) -> str:
    """One line for a rewrite record (``--explain``, the CLI)."""
    what = {"reassociate": "(AB)C -> A(BC)", "fold_reduction": f"{r.get('reduction', 'sum')} over a GEMM's "
            "features -> GEMM of the summed weight",
            "storage": f"float32 between kernels -> {r.get('dtype')} (declared deviation)",
            "algebra": f"{r.get('rule')}: {_ALGEBRA.get(r.get('rule'), '')}"
            + (f", removes {r['removes']}" if r.get("removes") else "") + (f", {r['moved']}" if r.get("moved") else ""),
            "approximate": f"{r.get('rule')}: {_APPROX.get(r.get('rule'), '')} (declared deviation)",
            "view_through": f"{r.get('view')} sunk below {r.get('producers')} pointwise producer(s)",
            "split_reduction": f"{r.get('reduction')} split into {r.get('parts')} float32 partials + a combine",
            }.get(r["rewrite"], r["rewrite"])
    why = f" ({r['why_not']})" if r.get("why_not") else ""
    return (f"rewrite {r['rewrite']} at {r['at']} {r['shapes']}: {what}: {r['before_ms'] * 1e3:.4g} us -> "
            f"{r['after_ms'] * 1e3:.4g} us predicted -> {'taken' if r['taken'] else 'kept as written'}{why}")


_ALGEBRA = {"scalar_chain": "(x * a) * b -> x * (a b)", "reciprocal": "x / c -> x * (1 / c)",
            "collect": "x * a + y * a -> (x + y) * a", "scalar_matmul": "a constant factor moved through a matmul",
            "log_exp": "log(exp(x)) -> x", "exp_product": "exp(a) * exp(b) -> exp(a + b)",
            "log_product": "log(exp(x) * y) -> x + log(y)",
            "online_softmax": "softmax(q @ k^T * scale) @ v -> library flash attention (online softmax)"}
_APPROX = {"exp2": "exp(x) -> exp2(x * log2(e))", "fast_div": "x / y -> approximate division",
           "rsqrt": "1 / sqrt(x) -> rsqrt(x)"}


# ---- reassociation ----------------------------------------------------------------------------------
def _plain_mm(n: Any, activation: bool = False) -> bool:
    """A 2-D library matmul with no bias (and no activation unless ``activation``)."""
    return isinstance(n, Node) and n.kind == "library" and n.op == "matmul" and n.attrs.get("form") == "mm" \
        and (activation or n.attrs.get("activation") == "none") and n.args[2] is None


def reassociate(graph: Graph, target: Any) -> list[dict[str, Any]]:
    """Rewrite each ``(A @ B) @ C`` chain (2-D, no bias, the inner product used only there and with
    no activation; the outer one's activation stays on the outer product) to the cheaper
    association; returns one record per chain with both predictions (``left_ms``: as written)."""
    records = []
    for n in list(graph.nodes):
        if not _plain_mm(n, activation=True) or not _plain_mm(n.args[0]):
            continue
        p = n.args[0]
        if p in graph.outputs or len(graph.users()[p.name]) != 1:
            continue
        a, b, c = p.args[0], p.args[1], n.args[1]
        inner = Node(f"{n.name}_bc", "library", "matmul", [b, c, None], (b.shape[0], c.shape[1]), n.dtype,
                     {"form": "mm", "activation": "none"}, line=n.line)
        outer = Node(n.name, "library", "matmul", [a, inner, None], n.shape, n.dtype, dict(n.attrs), line=n.line)
        left = node_ms(p, target) + node_ms(n, target)
        right = node_ms(inner, target) + node_ms(outer, target)
        rec = {"rewrite": "reassociate", "at": n.name, "left_ms": left, "right_ms": right, "before_ms": left,
               "after_ms": right, "shapes": [list(a.shape), list(b.shape), list(c.shape)],
               "taken": decided("reassociate", n.name, right < left)}
        if rec["taken"]:
            i = graph.nodes.index(p)
            graph.nodes[i] = inner
            graph.nodes[graph.nodes.index(n)] = outer
            _redirect(graph, n, outer)
            graph.outputs = [outer if o is n else o for o in graph.outputs]
        records.append(rec)
    return records


# ---- a reduction over a GEMM's features, folded into its weight -------------------------------------
_SCALAR_CHAIN = ("mul", "div")


def _scalar(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _chain_step(n: Node, prev: Node) -> bool:
    """``n`` multiplies or divides ``prev`` by a constant (what commutes with a sum)."""
    if n.kind != "pointwise" or n.op not in _SCALAR_CHAIN or len(n.args) != 2 or n.dtype != prev.dtype:
        return False
    if n.op == "div":
        return n.args[0] is prev and _scalar(n.args[1])
    return (n.args[0] is prev and _scalar(n.args[1])) or (n.args[1] is prev and _scalar(n.args[0]))


def _site(graph: Graph, r: Node) -> tuple[Node, list[Node]] | None:
    """The GEMM and the constant chain under reduction ``r`` when the rewrite applies."""
    if r.kind != "reduction" or r.op not in ("sum", "mean") or len(r.args) != 1 or not isinstance(r.args[0], Node):
        return None
    src = r.args[0]
    if src.shape is None or len(src.shape) < 1 or r.attrs.get("dims") != (len(src.shape) - 1,) or \
            r.dtype != src.dtype or set(r.attrs) - {"dims", "keepdim"}:
        return None
    users, results = graph.users(), {n.name for n in graph.results()}
    chain: list[Node] = []
    m = src
    while m.kind == "pointwise":
        if len(m.args) != 2:
            return None
        prev = next((a for a in m.args if isinstance(a, Node)), None)
        if prev is None or not _chain_step(m, prev):
            return None
        chain.insert(0, m)
        m = prev
    if not (m.kind == "library" and m.op == "matmul" and m.attrs.get("form") in ("mm", "linear", "nd")
            and m.attrs.get("activation") == "none"):
        return None
    if m.shape[-1] < 2 or any(len(users[x.name]) != 1 or x.name in results for x in [m] + chain):
        return None
    return m, chain


def _sum_node(name: str, x: Node, dim: int, line: str) -> Node:
    shape = tuple(1 if i == dim else s for i, s in enumerate(x.shape))
    return Node(name, "reduction", "sum", [x], shape, x.dtype, {"dims": (dim,), "keepdim": True},
                target=torch.ops.aten.sum.dim_IntList, aten_args=[x, [dim], True], line=line)


def _fold_one(graph: Graph, r: Node, m: Node, chain: list[Node]) -> Node:
    """Apply the rewrite at ``r`` (see the module docstring); returns the node now computing ``r``."""
    x, w, b = m.args
    line = r.line or m.line
    form = m.attrs["form"]
    # the summed weight: W (N, K) over its rows for linear; B (K, N) over its columns for mm / nd
    wsum = _sum_node(f"{m.name}_wsum", w, 0 if form == "linear" else 1, line)
    new: list[Node] = [wsum]
    bsum = None
    if b is not None:
        bsum = _sum_node(f"{m.name}_bsum", b, len(b.shape) - 1, line)
        new.append(bsum)
    prev = Node(m.name, "library", "matmul", [x, wsum, bsum], m.shape[:-1] + (1,), m.dtype, dict(m.attrs), line=m.line)
    new.append(prev)
    for c in chain:
        args = [prev if a is not None and isinstance(a, Node) else a for a in c.args]
        aten = [prev if isinstance(a, Node) else a for a in (c.aten_args or c.args)]
        prev = Node(c.name, c.kind, c.op, args, prev.shape, c.dtype, dict(c.attrs), target=c.target,
                    aten_args=aten, aten_kwargs=dict(c.aten_kwargs or {}), line=c.line)
        new.append(prev)
    if r.op == "mean":
        n_feat = m.shape[-1]
        prev = Node(f"{r.name}_mean", "pointwise", "div", [prev, n_feat], prev.shape, r.dtype,
                    target=torch.ops.aten.div.Tensor, aten_args=[prev, n_feat], line=r.line)
        new.append(prev)
    if not r.attrs["keepdim"]:
        prev = Node(r.name, "view", "view", [prev, list(r.shape)], r.shape, r.dtype,
                    target=torch.ops.aten.view.default, aten_args=[prev, list(r.shape)], line=r.line)
        new.append(prev)
    i = graph.nodes.index(m)
    gone = {id(n) for n in [m, r] + chain}
    graph.nodes = [n for n in graph.nodes[:i] if id(n) not in gone] + new + \
        [n for n in graph.nodes[i:] if id(n) not in gone]
    _redirect(graph, r, prev)
    graph.outputs = [prev if o is r else o for o in graph.outputs]
    return prev


def fold_reductions(graph: Graph, target: Any) -> list[dict[str, Any]]:
    """Fold each sum or mean over a GEMM's output features into the GEMM's weight (the module
    docstring) where the whole program is predicted cheaper; one record per site."""
    from .fuse import partition
    from .hoist import foldable

    records = []
    for r in list(graph.nodes):
        if r not in graph.nodes:
            continue
        site = _site(graph, r)
        if site is None:
            continue
        m, chain = site
        before = program_ms(graph, partition(graph), target)
        saved = graph.snapshot()
        shapes = [list(a.shape) for a in m.args if isinstance(a, Node)]
        now = _fold_one(graph, r, m, chain)
        after = program_ms(graph, partition(graph), target, free=foldable(graph))
        rec = {"rewrite": "fold_reduction", "at": r.name, "reduction": r.op, "shapes": shapes,
               "before_ms": before, "after_ms": after, "taken": decided("fold_reduction", r.name, after < before)}
        if not rec["taken"]:  # undo: the old nodes come back and their users read r again
            graph.restore(saved)
        records.append(rec)
    return records
