"""Canonical forms: composite reductions and a few patterns rewritten into what codegen runs.

Codegen's reductions are ``sum``, ``mean``, ``amax``, ``amin`` and ``prod`` over any dims; this
pass rewrites the others into them (intermediates in float32, so a value stored between two
kernels loses nothing):

- ``var`` / ``std``: ``m = mean(x, keepdim)``, ``sum((x - m)^2) / (N - correction)`` (two passes
  over the row, as torch's own two-pass variance), ``sqrt`` for std;
- ``logsumexp``: ``m = amax(x)``, ``m' = 0 where m is infinite``, ``log(sum(exp(x - m'))) + m'``
  (torch's own rule: an all ``-inf`` row gives ``-inf``, a NaN gives NaN);
- ``argmax`` / ``argmin`` (also the indices of ``max.dim`` / ``min.dim``): the first index where
  ``x`` equals the row's extreme, NaN counting as the extreme (torch's rule), found as the ``amin``
  of ``where(hit, index, N)`` over an ``iota`` of the reduced dims;
- ``flip(cumsum(flip(x, d), d), d)``: one reverse scan;
- views of generators (``arange(n).unsqueeze(0)``, ``zeros(..).expand(..)``): a generator of the
  view's shape, so it stays inline in the kernels that use it.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import torch

from .ir import Graph, Node, is_generator

F32 = torch.float32


def expand(g: Graph) -> list[str]:
    """Rewrite ``g`` in place; one note per rewrite."""
    notes: list[str] = []
    for rule in (_max_dim, _composite, _trivial_reduction, _reverse_scan, _generator_view):
        for n in list(g.nodes):
            if n in g.nodes:
                note = rule(g, n)
                if note:
                    notes.append(note)
    g.remove_dead()
    return notes


class _Builder:
    """New nodes placed before ``at``, named after it."""

    def __init__(self, g: Graph, at: Node):
        self.g, self.at, self.k, self.new = g, at, 0, []

    def node(self, kind: str, op: str, args: list, shape: tuple, dtype: Any, **attrs: Any) -> Node:
        self.k += 1
        n = Node(f"{self.at.name}_x{self.k}", kind, op, args, tuple(shape), dtype, attrs, line=self.at.line)
        self.new.append(n)
        return n

    def pw(self, op: str, args: list, shape: tuple, dtype: Any = F32, **attrs: Any) -> Node:
        return self.node("pointwise", op, args, shape, dtype, **attrs)

    def red(self, op: str, x: Node, dims: tuple, keep: bool, dtype: Any = F32) -> Node:
        return self.node("reduction", op, [x], _reduced(x.shape, dims, keep), dtype, dims=dims, keepdim=keep)

    def place(self, final: Node) -> None:
        """Insert the new nodes before ``at`` and let ``final`` take ``at``'s place and name."""
        from .lower import _replace

        i = self.g.nodes.index(self.at)
        self.g.nodes[i:i] = [n for n in self.new if n is not final]
        final.name = self.at.name
        _replace(self.g, self.at, final)


def _reduced(shape: tuple, dims: tuple, keep: bool) -> tuple:
    return tuple(1 if d in dims else s for d, s in enumerate(shape)) if keep else \
        tuple(s for d, s in enumerate(shape) if d not in dims)


def _count(shape: tuple, dims: tuple) -> int:
    return math.prod(shape[d] for d in dims)


def _composite(g: Graph, n: Node) -> str | None:
    if n.kind != "reduction" or n.op not in ("var", "std", "logsumexp", "argmax", "argmin"):
        return None
    x, dims, keep = n.args[0], n.attrs["dims"], n.attrs["keepdim"]
    b = _Builder(g, n)
    if n.op in ("var", "std"):
        m = b.red("mean", x, dims, True)
        d = b.pw("sub", [x, m], x.shape, alpha=1)
        s = b.red("sum", b.pw("mul", [d, d], x.shape), dims, keep)
        out = b.pw("div", [s, float(_count(x.shape, dims) - n.attrs["correction"])], s.shape, n.dtype)
        if n.op == "std":
            out.dtype = F32
            out = b.pw("sqrt", [out], s.shape, n.dtype)
    elif n.op == "logsumexp":
        def shift(form: bool) -> Node:
            m = b.red("amax", x, dims, form)
            return b.pw("where", [b.pw("isinf", [m], m.shape, torch.bool), 0.0, m], m.shape)
        e = b.pw("exp", [b.pw("sub", [x, shift(True)], x.shape, alpha=1)], x.shape)
        s = b.red("sum", e, dims, keep)
        out = b.pw("add", [b.pw("log", [s], s.shape), shift(keep)], s.shape, n.dtype, alpha=1)
    else:
        out = _arg_extreme(b, x, dims, keep, "amax" if n.op == "argmax" else "amin", n.dtype)
    b.place(out)
    return f"{n.name}: {n.op} over dims {list(dims)} -> {', '.join(sorted({m.op for m in b.new}))}"


def _trivial_reduction(g: Graph, n: Node) -> str | None:
    """Reduced dims of size 1 reduce nothing: with keepdim they are dropped from ``dims``, and a
    reduction over size-1 dims only is its input (viewed to the result's shape, cast to its dtype)."""
    if n.kind != "reduction" or n.op not in ("sum", "mean", "amax", "amin", "prod"):
        return None
    x, dims = n.args[0], n.attrs["dims"]
    ones = [d for d in dims if x.shape[d] == 1]
    if not ones:
        return None
    if len(ones) < len(dims):
        if not n.attrs["keepdim"]:
            return None
        n.attrs["dims"] = tuple(d for d in dims if x.shape[d] != 1)
        return f"{n.name}: size-1 dims {ones} dropped from the reduction"
    b = _Builder(g, n)
    src = x
    if tuple(x.shape) != tuple(n.shape):
        src = b.node("view", "view", [x, list(n.shape)], n.shape, x.dtype)
        src.target, src.aten_args = torch.ops.aten.view.default, [x, list(n.shape)]
    b.place(b.pw("identity" if x.dtype == n.dtype else "cast", [src], n.shape, n.dtype))
    return f"{n.name}: {n.op} over size-1 dims is its input"


def _arg_extreme(b: _Builder, x: Node, dims: tuple, keep: bool, extreme: str, dtype: Any) -> Node:
    """The first index (row-major over ``dims``) of the row's extreme, NaN first (torch's rule)."""
    m = b.red(extreme, x, dims, True, x.dtype)
    hit = b.pw("where", [b.pw("isnan", [m], m.shape, torch.bool), b.pw("isnan", [x], x.shape, torch.bool),
                         b.pw("eq", [x, m], x.shape, torch.bool)], x.shape, torch.bool)
    coef = [0] * len(x.shape)
    step = 1
    for d in reversed(dims):
        coef[d] = step
        step *= x.shape[d]
    idx = b.pw("iota", [], x.shape, torch.int64, start=0, coef=tuple(coef))
    cand = b.pw("where", [hit, idx, step], x.shape, torch.int64)
    return b.red("amin", cand, dims, keep, dtype)


def _max_dim(g: Graph, n: Node) -> str | None:
    """``max.dim`` / ``min.dim`` -> ``amax``/``amin`` for the values and the argmax rule for the indices."""
    if n.kind != "aten" or n.op not in ("max", "min") or getattr(n.target, "_overloadname", "") != "dim":
        return None
    x = n.args[0]
    dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
    keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
    if not isinstance(x, Node) or x.dtype not in (torch.float16, torch.bfloat16, torch.float32) or \
            not isinstance(dim, int) or not x.shape or not isinstance(keep, bool):
        return None
    if n in g.outputs:
        return None
    dims = (dim % len(x.shape),)
    users = g.users()[n.name]
    if not all(u.target is operator.getitem and u.args[0] is n for u in users):
        return None
    extreme = "amax" if n.op == "max" else "amin"
    for u in users:
        b = _Builder(g, u)
        if u.args[1] == 0:
            out = b.red(extreme, x, dims, keep, x.dtype)
        else:
            out = _arg_extreme(b, x, dims, keep, extreme, torch.int64)
        b.place(out)
    g.nodes.remove(n)
    return f"{n.name}: {n.op}.dim -> {extreme} (values) and the arg{extreme[1:]} rule (indices)"


def _reverse_scan(g: Graph, n: Node) -> str | None:
    """``flip(scan(flip(x, d), d), d)`` -> ``scan(x, d, reverse)``."""
    if n.kind != "pointwise" or n.op != "flip" or len(n.attrs["dims"]) != 1:
        return None
    s = n.args[0]
    users = g.users()
    if s.kind != "scan" or s.attrs["dim"] != n.attrs["dims"][0] or len(users[s.name]) != 1 or s in g.outputs:
        return None
    f = s.args[0]
    if f.kind != "pointwise" or f.op != "flip" or f.attrs["dims"] != n.attrs["dims"] or len(users[f.name]) != 1 or \
            f in g.outputs:
        return None
    b = _Builder(g, n)
    out = b.node("scan", s.op, [f.args[0]], n.shape, n.dtype, dim=s.attrs["dim"], reverse=not s.attrs["reverse"])
    b.place(out)
    return f"{n.name}: flip({s.op}(flip(x))) -> reverse {s.op}"


_FOLDABLE = {"view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "expand", "permute", "transpose", "t",
             "numpy_T", "mT", "select", "slice", "narrow", "alias", "detach", "expand_as", "view_as", "flatten",
             "unflatten", "swapaxes", "movedim", "contiguous", "clone", "lift_fresh_copy"}


def _generator_view(g: Graph, n: Node) -> str | None:
    """A view of a generator is a generator of the view's shape (the view replayed on a meta tensor
    whose strides are the iota's coefficients: its storage offset and strides are the new ones)."""
    if n.kind != "view" or n.op not in _FOLDABLE or not n.args or not is_generator(n.args[0]) or n.shape is None:
        return None
    gen = n.args[0]
    b = _Builder(g, n)
    if gen.op == "full":
        out = b.pw("full", [], n.shape, n.dtype, value=gen.attrs["value"])
    else:
        coef, start = gen.attrs["coef"], gen.attrs["start"]
        if any(c < 0 for c in coef) or n.target is None:
            return None
        size = 1 + sum((s - 1) * c for s, c in zip(gen.shape, coef))
        base = torch.empty(max(size, 1), device="meta").as_strided(gen.shape, coef, 0)
        args = [base if a is gen else a for a in (n.aten_args or [])]
        if any(isinstance(a, Node) for a in args):
            return None
        try:
            r = n.target(*args, **(n.aten_kwargs or {}))
        except Exception:  # noqa: BLE001 - a view meta tensors cannot replay stays a view
            return None
        if not isinstance(r, torch.Tensor) or not torch._C._is_alias_of(r, base) or tuple(r.shape) != n.shape:
            return None
        out = b.pw("iota", [], n.shape, n.dtype, start=start + r.storage_offset(), coef=tuple(r.stride()))
    b.place(out)
    return f"{n.name}: {n.op} of a generator -> a {out.op} of shape {list(n.shape)}"
