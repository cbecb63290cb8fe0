"""Algebraic rewrites a bit-exact compiler may not make: each computes the same value in exact
arithmetic (not the same rounding), is taken when the cost model predicts the whole program
cheaper or when it removes work at an equal prediction (an operation fewer, a division made a
multiplication: the roofline sees a fused kernel's bytes, not its instructions), and is judged only
by the final verification (``solve`` keeps the program as written as its last candidate).

Rules (``rule`` in the record; every intermediate value a rule removes must be used only there and
be no result of the program; every value is floating point, of one dtype):

- ``scalar_chain``: ``(x * a) * b -> x * (a b)`` (and ``/`` by a constant as ``*`` its reciprocal
  inside the chain); the product of the constants is computed in float64, rounded once.
- ``reciprocal``: ``x / c -> x * (1 / c)`` for a finite nonzero constant whose reciprocal is a normal
  float32 (one more rounding, of ``1 / c``: at most about one ulp).
- ``collect``: ``x * a + y * a -> (x + y) * a`` (``-`` too), one multiplication fewer.
- ``scalar_matmul``: a constant factor on a matmul's operand or on its output, ``(a A) @ B = A @ (a B)
  = a (A @ B)``, moved to whichever of the three is predicted cheapest (a weight: the product is
  folded out of the call by :mod:`.hoist`). No bias (it would be scaled too) and no activation.
- ``log_exp``: ``log(exp(x)) -> x``.
- ``exp_product``: ``exp(a) * exp(b) -> exp(a + b)``: one ``exp`` fewer. The relative error becomes
  about ``|a + b| u`` (the rounding of the sum), which is the element's own sensitivity (the check's
  element scale) rather than a deviation.
- ``log_product``: ``log(exp(x) * y) -> x + log(y)``, one ``exp`` and a multiplication fewer.
  ``log(a * b) -> log(a) + log(b)`` in general is not made: it is wrong (NaN) for two negative factors.

  The three exp/log rules are made only where :func:`bounds` (an interval analysis from ``tanh``,
  ``sigmoid``, ``clamp``, constants, through affine steps) shows that no ``exp`` involved overflows or
  leaves the normal numbers of the dtype (:data:`EXP_SAFE`; for ``log_product``, ``y`` bounded
  away from 0 with ``exp(x) y`` in that range too): elsewhere the program as written has ``-inf``
  (``log`` of an underflowed ``exp``) or NaN (``inf * 0``) where the rewritten one has a number,
  and the check compares those patterns with the reference's.
- ``online_softmax`` (:mod:`.lower_softmax_attention`): the user's own
  ``softmax(q @ k^T * scale [masked]) @ v`` lowered to the library's flash attention; its exp2
  rounding is declared (``declares`` in the record, :mod:`.precision`'s rule ``online_softmax``).

Each record: ``rewrite`` ("algebra"), ``rule``, ``at``, ``shapes``, ``before_ms``/``after_ms``
(predicted, :func:`warpsmith.cost.program.program_ms` under greedy fusion, what :mod:`.hoist` would fold free),
``removes`` (the work removed), ``taken``.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from .decisions import decided
from .ir import FLOATS, Graph, Node
from .lower import _redirect
from ..cost.program import program_ms

_aten = torch.ops.aten
_TARGET = {"mul": _aten.mul.Tensor, "add": _aten.add.Tensor, "sub": _aten.sub.Tensor, "exp": _aten.exp.default,
           "log": _aten.log.default}
_F32_TINY = torch.finfo(torch.float32).tiny
_F32_MAX = torch.finfo(torch.float32).max


def reciprocal(c: float) -> float:
    """``1 / c`` (float64) for the ``reciprocal`` and ``scalar_chain`` rules."""
    return 1.0 / c


def log_product(x: Node, logy: Node, name: str, shape: tuple, dtype: Any, line: str) -> Node:
    """The node computing ``log(exp(x) * y)`` from ``x`` and ``log(y)``: their sum."""
    return _pw(name, "add", [x, logy], shape, dtype, line)


def _pw(name: str, op: str, args: list, shape: tuple, dtype: Any, line: str) -> Node:
    attrs = {"alpha": 1} if op in ("add", "sub") else {}
    return Node(name, "pointwise", op, list(args), tuple(shape), dtype, attrs, target=_TARGET.get(op),
                aten_args=list(args), line=line)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _float_node(n: Any) -> bool:
    return isinstance(n, Node) and n.dtype in FLOATS and n.shape is not None


def _factor(n: Node) -> tuple[Node, float] | None:
    """``n = x * c``, ``c * x`` or ``x / c`` (c a finite constant, same dtype as x): (x, the factor)."""
    if n.kind != "pointwise" or n.op not in ("mul", "div") or len(n.args) != 2 or not _float_node(n):
        return None
    a, b = n.args
    if n.op == "div":
        if _float_node(a) and _num(b) and b != 0 and a.dtype == n.dtype:
            return a, reciprocal(float(b))
        return None
    if _float_node(a) and _num(b) and a.dtype == n.dtype:
        return a, float(b)
    if _float_node(b) and _num(a) and b.dtype == n.dtype:
        return b, float(a)
    return None


def _normal_f32(c: float) -> bool:
    return math.isfinite(c) and (c == 0 or _F32_TINY <= abs(c) <= _F32_MAX)


class _Site:
    """One rewrite in progress: old nodes out, new ones in at the last old one's place, ``old`` -> ``new``.
    :meth:`undo` puts back the node list and the arguments of every node that read ``old``."""

    def __init__(self, g: Graph, gone: list[Node], new: list[Node], old: Node, now: Node) -> None:
        self.g, self.gone, self.new, self.old, self.now = g, gone, new, old, now
        self.saved = (list(g.nodes), list(g.outputs), list(g.mutations))
        self.args: list[tuple[Node, Any, Any, Any, Any]] = []

    def apply(self) -> None:
        g = self.g
        self.args = [(n, n.args, n.kwargs, n.aten_args, n.aten_kwargs) for n in g.nodes]
        i = g.nodes.index(self.old)
        ids = {id(n) for n in self.gone}
        g.nodes = [n for n in g.nodes[:i] if id(n) not in ids] + self.new + \
            [n for n in g.nodes[i + 1:] if id(n) not in ids]
        if self.now is not self.old:
            _redirect(g, self.old, self.now)
            g.outputs = [self.now if o is self.old else o for o in g.outputs]

    def undo(self) -> None:
        for n, args, kwargs, aten_args, aten_kwargs in self.args:
            n.args, n.kwargs, n.aten_args, n.aten_kwargs = args, kwargs, aten_args, aten_kwargs
        self.g.nodes, self.g.outputs, self.g.mutations = self.saved


_MEMO: dict[int, float] = {}  # id(graph) -> its predicted time as it stands, during algebra()


def _cost(g: Graph, target: Any) -> float:
    from .fuse import partition
    from .hoist import foldable

    return program_ms(g, partition(g), target, free=foldable(g))


def _try(g: Graph, target: Any, rule: str, at: Node, shapes: list, removes: str | None,
         build: Callable[[], _Site | list[_Site]]) -> dict[str, Any]:
    """Apply the site(s) ``build`` makes, keep them when predicted cheaper (or equal and ``removes``
    work), else undo; the record."""
    before = _MEMO.get(id(g))
    before = _cost(g, target) if before is None else before
    sites = build()
    sites = sites if isinstance(sites, list) else [sites]
    for s in sites:
        s.apply()
    after = _cost(g, target)
    taken = decided("algebra", at.name, after < before or (removes is not None and after <= before), rule)
    _MEMO[id(g)] = after if taken else before  # the program's prediction now (one prediction a site)
    rec = {"rewrite": "algebra", "rule": rule, "at": at.name, "shapes": shapes, "before_ms": before,
           "after_ms": after, "removes": removes, "taken": taken}
    if not taken:
        for s in reversed(sites):
            s.undo()
        rec["why_not"] = "predicted slower"
    return rec


def _private(g: Graph, n: Node, users: dict[str, list[Node]], results: set[str]) -> bool:
    """``n`` is used once and is no result: a rule may remove it."""
    return len(users[n.name]) == 1 and n.name not in results


# ---- the rules ---------------------------------------------------------------------------------------
def _scalar_chain(g: Graph, n: Node, users: Any, results: set[str], target: Any) -> dict[str, Any] | None:
    f = _factor(n)
    if f is None:
        return None
    p, b = f
    inner = _factor(p) if p.kind == "pointwise" else None
    if inner is None or not _private(g, p, users, results):
        return None
    x, a = inner
    c = a * b
    if not _normal_f32(c) or c == 0:
        return None
    new = _pw(n.name, "mul", [x, c], n.shape, n.dtype, n.line)
    return _try(g, target, "scalar_chain", n, [list(x.shape)], "one multiplication",
                lambda: _Site(g, [p, n], [new], n, new))


def _reciprocal(g: Graph, n: Node, users: Any, results: set[str], target: Any) -> dict[str, Any] | None:
    if n.kind != "pointwise" or n.op != "div" or len(n.args) != 2 or not _float_node(n):
        return None
    x, c = n.args
    if not (_float_node(x) and x.dtype == n.dtype and _num(c) and c != 0):
        return None
    r = reciprocal(float(c))
    if not _normal_f32(r) or r == 0:
        return None
    new = _pw(n.name, "mul", [x, r], n.shape, n.dtype, n.line)
    return _try(g, target, "reciprocal", n, [list(x.shape)], "a division (a multiplication instead)",
                lambda: _Site(g, [n], [new], n, new))


def _collect(g: Graph, n: Node, users: Any, results: set[str], target: Any) -> dict[str, Any] | None:
    if n.kind != "pointwise" or n.op not in ("add", "sub") or n.attrs.get("alpha", 1) != 1 or len(n.args) != 2 \
            or not _float_node(n) or not all(isinstance(a, Node) and a.kind == "pointwise" for a in n.args):
        return None
    l, r = n.args
    fl, fr = _factor(l), _factor(r)
    if fl is None or fr is None or l is r or fl[1] != fr[1] or l.op != "mul" or r.op != "mul":
        return None
    if not (_private(g, l, users, results) and _private(g, r, users, results)):
        return None
    (x, a), (y, _) = fl, fr
    s = _pw(f"{n.name}_collected", n.op, [x, y], n.shape, n.dtype, n.line)
    new = _pw(n.name, "mul", [s, a], n.shape, n.dtype, n.line)
    return _try(g, target, "collect", n, [list(x.shape), list(y.shape)], "one multiplication",
                lambda: _Site(g, [l, r, n], [s, new], n, new))


def _unary(n: Any, op: str) -> Node | None:
    """The operand of ``n`` when ``n`` is the pointwise ``op`` of one float node of its dtype."""
    if isinstance(n, Node) and n.kind == "pointwise" and n.op == op and len(n.args) == 1 and _float_node(n) \
            and _float_node(n.args[0]) and n.args[0].dtype == n.dtype:
        return n.args[0]
    return None


# exp of an argument in this range neither overflows nor leaves the normal numbers of the dtype (the
# program as written then has no inf, NaN or zero the rewritten one lacks: the check matches patterns)
EXP_SAFE = {torch.float32: (-80.0, 80.0), torch.bfloat16: (-80.0, 80.0), torch.float16: (-9.0, 11.0)}


def bounds(n: Any, memo: dict[int, Any] | None = None) -> tuple[float, float] | None:
    """An interval holding every value of ``n`` (NaN aside: it propagates through both sides of a rule),
    from the ops that bound their results (``tanh``, ``sigmoid``, ``clamp`` with both bounds, constants)
    through affine steps; None when unknown."""
    memo = {} if memo is None else memo
    if not isinstance(n, Node):
        return (float(n), float(n)) if _num(n) else None
    if id(n) in memo:
        return memo[id(n)]
    memo[id(n)] = None
    r: tuple[float, float] | None = None
    a = [bounds(x, memo) for x in n.args] if n.kind == "pointwise" else []
    if n.kind == "pointwise":
        op, at = n.op, n.attrs
        if op == "full" and _num(at.get("value")):
            r = (float(at["value"]), float(at["value"]))
        elif op == "tanh":
            r = (-1.0, 1.0)
        elif op == "sigmoid":
            r = (0.0, 1.0)
        elif op == "clamp" and _num(at.get("min")) and _num(at.get("max")):
            r = (float(at["min"]), float(at["max"]))
        elif op in ("identity", "cast") and a and a[0] is not None and n.dtype in FLOATS:
            r = a[0]
        elif op == "neg" and a[0] is not None:
            r = (-a[0][1], -a[0][0])
        elif op == "relu" and a[0] is not None:
            r = (max(a[0][0], 0.0), max(a[0][1], 0.0))
        elif op in ("add", "sub") and len(a) == 2 and None not in a and at.get("alpha", 1) == 1:
            r = (a[0][0] + a[1][0], a[0][1] + a[1][1]) if op == "add" else (a[0][0] - a[1][1], a[0][1] - a[1][0])
        elif op == "mul" and len(a) == 2 and None not in a:
            c = [x * y for x in a[0] for y in a[1]]
            r = (min(c), max(c))
        elif op == "div" and len(a) == 2 and a[0] is not None and a[1] is not None and a[1][0] == a[1][1] != 0:
            c = [x / a[1][0] for x in a[0]]
            r = (min(c), max(c))
    if r is not None and not all(math.isfinite(v) for v in r):
        r = None
    memo[id(n)] = r
    return r


def _exp_safe(x: Any, dtype: Any, widen: tuple[float, float] = (0.0, 0.0)) -> bool:
    """``exp`` of ``x`` (shifted by ``widen``) stays within :data:`EXP_SAFE` for ``dtype``."""
    b, (lo, hi) = bounds(x), EXP_SAFE.get(dtype, (-80.0, 80.0))
    return b is not None and lo <= b[0] + widen[0] and b[1] + widen[1] <= hi


def _log_exp(g: Graph, n: Node, users: Any, results: set[str], target: Any) -> dict[str, Any] | None:
    e = _unary(n, "log")
    x = _unary(e, "exp") if e is not None else None
    if x is None or n.name in results or tuple(x.shape) != tuple(n.shape) or not _exp_safe(x, e.dtype):
        return None
    gone = [e, n] if _private(g, e, users, results) else [n]
    return _try(g, target, "log_exp", n, [list(x.shape)], "a log and an exp",
                lambda: _Site(g, gone, [], n, x))


def _exp_product(g: Graph, n: Node, users: Any, results: set[str], target: Any) -> dict[str, Any] | None:
    if n.kind != "pointwise" or n.op != "mul" or len(n.args) != 2 or not _float_node(n):
        return None
    e1, e2 = n.args
    a, b = _unary(e1, "exp"), _unary(e2, "exp")
    if a is None or b is None or e1 is e2 or e1.dtype != n.dtype or e2.dtype != n.dtype \
            or not _exp_safe(a, n.dtype) or not _exp_safe(b, n.dtype):
        return None
    if not (_private(g, e1, users, results) and _private(g, e2, users, results)):
        return None
    s = _pw(f"{n.name}_exponent", "add", [a, b], n.shape, n.dtype, n.line)
    new = _pw(n.name, "exp", [s], n.shape, n.dtype, n.line)
    return _try(g, target, "exp_product", n, [list(a.shape), list(b.shape)], "an exp (an add for a mul)",
                lambda: _Site(g, [e1, e2, n], [s, new], n, new))


def _log_product(g: Graph, n: Node, users: Any, results: set[str], target: Any) -> dict[str, Any] | None:
    m = _unary(n, "log")
    if m is None or m.kind != "pointwise" or m.op != "mul" or len(m.args) != 2 or m.dtype != n.dtype \
            or not _private(g, m, users, results):
        return None
    for e, y in (m.args, m.args[::-1]):
        x = _unary(e, "exp")
        yb = bounds(y) if x is not None and _float_node(y) else None
        if x is not None and yb is not None and yb[0] > 0 and y.dtype == n.dtype and e is not y \
                and _private(g, e, users, results) and _exp_safe(x, n.dtype, (math.log(yb[0]), math.log(yb[1]))) \
                and _exp_safe(x, n.dtype):
            break
    else:
        return None
    logy = _pw(f"{n.name}_logy", "log", [y], y.shape, n.dtype, n.line)
    new = log_product(x, logy, n.name, n.shape, n.dtype, n.line)
    return _try(g, target, "log_product", n, [list(x.shape), list(y.shape)], "an exp and a multiplication",
                lambda: _Site(g, [e, m, n], [logy, new], n, new))


def _plain_matmul(m: Any) -> bool:
    return isinstance(m, Node) and m.kind == "library" and m.op == "matmul" and m.attrs.get("activation") == "none" \
        and m.args[2] is None and m.attrs.get("form") in ("mm", "nd", "bmm")


def _scalar_matmul(g: Graph, n: Node, users: Any, results: set[str], target: Any) -> dict[str, Any] | None:
    """``n`` a matmul with a constant factor on an operand, or a constant factor whose operand is a
    matmul: the factor moved to the cheapest of the three places."""
    if _plain_matmul(n):
        m, out = n, None
        for i in (0, 1):
            a = n.args[i]
            f = _factor(a) if isinstance(a, Node) and a.kind == "pointwise" else None
            if f is not None and _private(g, a, users, results):
                src, c, at = i, f[1], a
                break
        else:
            return None
    else:
        f = _factor(n)
        if f is None or not _plain_matmul(f[0]) or not _private(g, f[0], users, results) or f[0].dtype != n.dtype:
            return None
        m, out, src, c, at = f[0], n, 2, f[1], n
    if not _normal_f32(c) or c == 0:
        return None
    sizes = [math.prod(m.args[0].shape) if src != 0 else math.prod(at.shape),
             math.prod(m.args[1].shape) if src != 1 else math.prod(at.shape), math.prod(m.shape)]
    dst = min(range(3), key=lambda i: (sizes[i], i != src))
    if dst == src:
        return None
    ops = [m.args[0], m.args[1]]
    if src < 2:
        ops[src] = at.args[0] if isinstance(at.args[0], Node) else at.args[1]
    new: list[Node] = []
    if dst < 2:
        scaled = _pw(f"{m.name}_scaled{dst}", "mul", [ops[dst], c], ops[dst].shape, ops[dst].dtype, m.line)
        ops[dst] = scaled
        new.append(scaled)
    mm = Node(m.name if src == 2 else f"{m.name}_unscaled", "library", "matmul", [ops[0], ops[1], None], m.shape,
              m.dtype, dict(m.attrs), line=m.line)
    new.append(mm)
    final = mm
    if dst == 2:
        final = _pw(f"{m.name}_scaledout", "mul", [mm, c], m.shape, m.dtype, m.line)
        new.append(final)
    old = out if src == 2 else m
    gone = [m, out] if src == 2 else [at, m]
    if src < 2:
        final.name = m.name  # the product keeps its name (its users and the report read it)
        if final is not mm:
            mm.name = f"{m.name}_unscaled"
    where = ["the first operand", "the second operand", "the product"]
    rec = _try(g, target, "scalar_matmul", old, [list(x.shape) for x in m.args[:2]], None,
               lambda: _Site(g, gone, new, old, final))
    rec["moved"] = f"{where[src]} -> {where[dst]}"
    return rec


MAX_SITES = 64  # sites tried per program (each costs two predictions of the whole program)
RULES = [_scalar_chain, _reciprocal, _collect, _log_exp, _exp_product, _log_product, _scalar_matmul]


def algebra(graph: Graph, target: Any) -> list[dict[str, Any]]:
    """The user's softmax-then-matmul as online softmax, then every other rule of this module (module
    docstring) at every site of ``graph`` (in place); one record per site tried."""
    from .lower_softmax_attention import online_softmax

    _MEMO.pop(id(graph), None)
    records: list[dict[str, Any]] = online_softmax(graph, target)
    for rule in RULES:
        users, results = graph.users(), {r.name for r in graph.results()}
        for n in list(graph.nodes):
            if len(records) >= MAX_SITES:
                _MEMO.pop(id(graph), None)
                return records
            if n not in graph.nodes:
                continue
            rec = rule(graph, n, users, results, target)
            if rec is not None:
                records.append(rec)
                if rec["taken"]:  # the graph changed: who uses what, again
                    users, results = graph.users(), {r.name for r in graph.results()}
    _MEMO.pop(id(graph), None)
    return records
