"""Softmax-then-matmul as online softmax: the user's own ``softmax(q @ k^T * scale [masked]) @ v``
lowered to the library's flash attention (``ops/attention``, as :mod:`.lower_attention` lowers SDPA),
so the (L, S) scores and probabilities are never written. A rewrite a bit-exact compiler may not make
(the online softmax rescales partial sums: another rounding), recorded by :mod:`.algebra` with rule
``online_softmax`` and judged by the final verification.

What is matched, after lowering (the matmuls are library ``bmm``/``mm``/``nd`` matmuls between
views, the softmax a library softmax over the last dim, not ``log``):

- **scores**: a matmul of ``q`` and ``k^T`` through views, then any of: views, multiplications or
  divisions by a positive constant (the scale; a factor on ``q`` or ``k`` counts too), one
  ``masked_fill(scores, mask, value)`` with ``mask`` a compile-time constant
  (:func:`.lower_attention.evaluate`) and ``value`` ``-inf`` (or finite at most -1e8 after the scale:
  ``exp`` of it is 0 next to any visible score); every value in between used only there;
- **output**: the softmax's only use is a matmul with ``v`` (through views), whose result, through
  views, is (B, H, L, Ev).

``q`` (B, H, L, E), ``k`` (B, H, S, E) and ``v`` (B, H, S, Ev) are nodes reached through views; the
structure alone does not say which axis a view chain moved, so every match is **proved on probes**
before it is used (:func:`verified`): the matched subgraph and the attention it would become are both
evaluated in float64 on random q, k, v, and must agree to 1e-9. A mask whose hidden set is a band
becomes the kernel's window arguments (``lower_attention.band`` of the visible set); any other mask
an additive bias ``where(mask, -inf, 0)`` the kernel reads.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from .decisions import decided
from .ir import FLOATS, Graph, Node

MASKED_AT_MOST = -1e8  # a finite masked value, after the scale, that exp turns into 0 beside the visible scores


class _NoMatch(Exception):
    pass


def _lib_mm(n: Any) -> bool:
    return isinstance(n, Node) and n.kind == "library" and n.op == "matmul" and n.args[2] is None \
        and n.attrs.get("activation") == "none" and n.attrs.get("form") in ("bmm", "mm", "nd")


def _views_back(n: Any) -> list[Node]:
    """``n`` and the nodes reached back from it through views and positive constant factors, nearest
    first (none of them is removed: what becomes dead goes with ``Graph.remove_dead``)."""
    out = [n]
    while isinstance(n, Node) and (n.kind == "view" or _const_factor(n) is not None):
        src = n.args[0] if n.kind == "view" else _const_factor(n)[0]
        if not isinstance(src, Node):
            break
        out.append(src)
        n = src
    return [x for x in out if isinstance(x, Node)]


def _const_factor(n: Node) -> tuple[Node, float] | None:
    if n.kind != "pointwise" or n.op not in ("mul", "div") or len(n.args) != 2:
        return None
    a, b = n.args
    num = lambda c: isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) and c > 0  # noqa: E731
    if n.op == "div":
        return (a, 1.0 / float(b)) if isinstance(a, Node) and num(b) else None
    if isinstance(a, Node) and num(b):
        return a, float(b)
    if isinstance(b, Node) and num(a):
        return b, float(a)
    return None


def _views_forward(n: Node, users: dict[str, list[Node]], results: set[str]) -> list[Node]:
    """The chain of views from ``n`` down while each value has one use (and is no result): ``n`` first."""
    out = [n]
    while len(users[n.name]) == 1 and n.name not in results and users[n.name][0].kind == "view":
        n = users[n.name][0]
        out.append(n)
    return out


def match(g: Graph, sm: Node) -> dict[str, Any] | None:
    """The pieces of the pattern (module docstring) ending at the softmax ``sm``, before the probes."""
    if not (sm.kind == "library" and sm.op == "softmax" and not sm.attrs.get("log") and sm.dtype in FLOATS
            and sm.shape is not None and len(sm.shape) == 4):
        return None
    users, results = g.users(), {r.name for r in g.results()}
    private = lambda x: len(users[x.name]) == 1 and x.name not in results  # noqa: E731
    if not private(sm):
        return None
    # after the softmax: views, the matmul with v, views to (B, H, L, Ev)
    down = _views_forward(sm, users, results)
    last = down[-1]
    if not private(last) or not _lib_mm(users[last.name][0]) or users[last.name][0].args[0] is not last:
        return None
    mm2 = users[last.name][0]
    up = _views_forward(mm2, users, results)
    out = up[-1]
    if out.shape is None or len(out.shape) != 4 or out.dtype != sm.dtype:
        return None
    # before the softmax: views, constant factors and one masked_fill, back to the scores' matmul
    chain, scale, mask, fill = [], 1.0, None, None
    x = sm.args[0]
    while True:
        if not isinstance(x, Node) or not private(x):
            return None
        if _lib_mm(x):
            break
        chain.append(x)
        f = _const_factor(x)
        if x.kind == "view":
            x = x.args[0]
        elif f is not None:
            scale *= f[1]
            x = f[0]
        elif x.kind == "pointwise" and x.op == "masked_fill" and mask is None and isinstance(x.args[1], Node) \
                and isinstance(x.args[2], (int, float)) and not isinstance(x.args[2], bool):
            mask, fill = x.args[1], (float(x.args[2]), scale)
            x = x.args[0]
        else:
            return None
    mm1 = x
    if fill is not None and not (fill[0] == -math.inf or fill[0] * fill[1] <= MASKED_AT_MOST):
        return None
    qs, ks, vs = _views_back(mm1.args[0]), _views_back(mm1.args[1]), _views_back(mm2.args[1])
    gone = [mm1, *chain, *down, mm2, *up]
    return {"sm": sm, "mm1": mm1, "mm2": mm2, "out": out, "mask": mask, "scale": scale, "chain": chain,
            "q": qs, "k": ks, "v": vs, "gone": gone}


def _candidates(nodes: list[Node], shape_ok: Any) -> list[Node]:
    """Deepest first: the nodes of a view chain that could be the 4-D operand."""
    return [n for n in reversed(nodes) if n.shape is not None and len(n.shape) == 4 and n.dtype in FLOATS
            and shape_ok(n.shape)]


def _factors(chain: list[Node], stop: Node) -> float:
    """The product of the constant factors met from the head of ``chain`` down to ``stop``."""
    c = 1.0
    for n in chain:
        if n is stop:
            break
        f = _const_factor(n)
        if f is not None:
            c *= f[1]
    return c


# ---- the probes --------------------------------------------------------------------------------------
def _eval(n: Node, env: dict[int, torch.Tensor]) -> torch.Tensor:
    from .lower_attention import evaluate

    if id(n) in env:
        return env[id(n)]
    f = _const_factor(n) if n.kind == "pointwise" else None
    if n.kind == "view":
        args = [_eval(a, env) if isinstance(a, Node) else a for a in (n.aten_args or n.args)]
        kwargs = {k: v for k, v in (n.aten_kwargs or {}).items() if k not in ("device", "dtype", "memory_format")}
        v = n.target(*args, **kwargs)
    elif _lib_mm(n):
        v = torch.matmul(_eval(n.args[0], env), _eval(n.args[1], env))
    elif n.kind == "library" and n.op == "softmax" and not n.attrs.get("log"):
        v = torch.softmax(_eval(n.args[0], env), dim=-1)
    elif f is not None:
        v = _eval(f[0], env) * f[1]
    elif n.kind == "pointwise" and n.op == "masked_fill":
        v = _eval(n.args[0], env).masked_fill(evaluate(n.args[1]).bool(), float(n.args[2]))
    else:
        raise ValueError(f"{n.name}: {n.kind} {n.op} is not part of the pattern")
    env[id(n)] = v
    return v


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
              visible: torch.Tensor | None) -> torch.Tensor:
    """What the library attention computes, in the probes' dtype."""
    s = q @ k.transpose(-2, -1) * scale
    if visible is not None:
        s = s.masked_fill(~visible, -math.inf)
    return torch.softmax(s, dim=-1) @ v


def verified(m: dict[str, Any], q: Node, k: Node, v: Node, scale: float, visible: torch.Tensor | None) -> bool:
    """The matched subgraph equals the attention of ``q``, ``k``, ``v`` (float64, random probes)."""
    gen = torch.Generator().manual_seed(0)
    probes = {id(x): torch.randn(x.shape, generator=gen, dtype=torch.float64) for x in (q, k, v)}
    try:
        got = _eval(m["out"], dict(probes))
    except Exception:  # noqa: BLE001 - a view or op the probes cannot run: no match
        return False
    want = reference(probes[id(q)], probes[id(k)], probes[id(v)], scale, visible)
    return tuple(got.shape) == tuple(want.shape) and bool(torch.allclose(got, want, rtol=1e-9, atol=1e-12))


def lowering(g: Graph, sm: Node) -> tuple[dict[str, Any], Node, list[Node]] | None:
    """The match at ``sm`` that the probes prove, its attention node and the new nodes before it."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from .lower_attention import band, evaluate

    m = match(g, sm)
    if m is None:
        return None
    B, H, L, S = sm.shape
    Ev = m["out"].shape[3]
    with unset_fake_temporarily():
        visible = None
        if m["mask"] is not None:
            try:
                visible = ~evaluate(m["mask"]).bool()
                visible = visible.expand(B, H, L, S)
            except Exception:  # noqa: BLE001 - not a compile-time mask
                return None
        for q in _candidates(m["q"], lambda s: s[:3] == (B, H, L)):
            E = q.shape[3]
            for k in _candidates(m["k"], lambda s: s == (B, H, S, E)):
                for v in _candidates(m["v"], lambda s: s[:3] == (B, H, S) and s[3] == Ev):
                    if len({q.dtype, k.dtype, v.dtype, sm.dtype}) != 1:
                        continue
                    scale = m["scale"] * _factors(m["q"], q) * _factors(m["k"], k)
                    if verified(m, q, k, v, scale, visible):
                        return m, *_attention(m, q, k, v, scale, visible)
    return None


def _attention(m: dict[str, Any], q: Node, k: Node, v: Node, scale: float,
               visible: torch.Tensor | None) -> tuple[Node, list[Node]]:
    from .lower_attention import band

    out, new = m["out"], []
    attrs: dict[str, Any] = {"causal": False, "scale": float(scale)}
    bias = None
    if visible is not None:
        B, H, L, S = visible.shape
        lohi = band(visible, (B, H, L, S))
        if lohi is not None:
            lo, hi = lohi
            attrs["window"] = (-lo if lo > -(L - 1) else None, hi if hi < S - 1 else None)
        else:
            mk = m["mask"]
            bias = Node(f"{out.name}_bias", "pointwise", "where", [mk, -math.inf, 0.0], tuple(mk.shape), q.dtype,
                        line=out.line)
            new.append(bias)
    node = Node(out.name, "library", "attention", [q, k, v] + ([bias] if bias is not None else []),
                tuple(out.shape), q.dtype, attrs, line=m["sm"].line or out.line)
    return node, new


def online_softmax(g: Graph, target: Any) -> list[dict[str, Any]]:
    """Lower every proved match (module docstring) where the whole program is predicted cheaper;
    one record per proved match."""
    from .algebra import _cost, _Site

    records = []
    for sm in list(g.nodes):
        if sm not in g.nodes:
            continue
        found = lowering(g, sm)
        if found is None:
            continue
        m, node, new = found
        before = _cost(g, target)
        site = _Site(g, m["gone"], new + [node], m["out"], node)
        site.apply()
        g.remove_dead()
        after = _cost(g, target)
        B, H, L, S = sm.shape
        rec = {"rewrite": "algebra", "rule": "online_softmax", "at": m["out"].name,
               "shapes": [list(x.shape) for x in node.args[:3]], "before_ms": before, "after_ms": after,
               "removes": f"the ({L}, {S}) scores and probabilities, written and read",
               "window": node.attrs.get("window"), "bias": len(node.args) > 3,
               "taken": decided("algebra", m["out"].name, after < before, "online_softmax"),
               "declares": {sm.name: "online_softmax"}}  # precision.approximate declares its deviation
        if not rec["taken"]:
            site.undo()
            rec["why_not"] = "predicted slower"
        records.append(rec)
    return records
