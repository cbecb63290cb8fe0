"""In-bounds stride by stride: an address that is linear in its tensor's symbolic strides.

An access to a tensor with symbolic non-negative strides ``s_1 .. s_k`` usually addresses
``c_0 + c_1 * s_1 + ... + c_k * s_k``, where each coefficient ``c_j`` is an index the kernel
computed (often by division and remainder of a flat offset: ``(offs // D2) % D1``), and the
tensor's span is ``w_0 + w_1 * s_1 + ... + w_k * s_k`` with ``w_j`` the extent minus one of the
dimensions of stride ``s_j``. z3 proves ``0 <= c_j <= w_j`` quickly (a linear question about one
index) but rarely ``0 <= offset <= span`` as a whole (products of unbounded symbols).

The first implies the second, in every model: with ``s_j >= 0``, ``0 <= c_j <= w_j`` gives
``0 <= c_j * s_j <= w_j * s_j``, and summing (with ``0 <= c_0 <= w_0``) gives the bound. So
:func:`parts` splits one in-bounds claim into these per-stride claims, which the prover then
discharges one by one: all proved means the access is proved in bounds; otherwise nothing is
concluded (the split is sufficient, not necessary) and the whole claim is tried as before.

The split is exact algebra: :func:`linear` writes an expression as ``c_0 + sum c_j s_j`` only
through ``+``, ``-``, ``*`` (one factor mentioning a stride) and integer constants, and refuses
anything else that mentions a stride (a stride inside a division, a conditional, a product of
two strides), so both sides are equal as polynomials.
"""
from __future__ import annotations

from typing import Any

import z3

from .contract import Tensor


def linear(e: Any, syms: dict[int, Any]) -> tuple[Any, dict[int, Any]] | None:
    """``(c_0, {id(s): c_s})`` with ``e == c_0 + sum c_s * s`` as polynomials in the symbols
    ``syms`` (z3 ids -> symbol), or None when ``e`` is not linear in them."""
    if not _mentions(e, syms):
        return e, {}
    if e.get_id() in syms:
        return z3.IntVal(0), {e.get_id(): z3.IntVal(1)}
    if not z3.is_app(e):
        return None
    kind = e.decl().kind()
    ch = e.children()
    if kind in (z3.Z3_OP_ADD, z3.Z3_OP_SUB):
        parts = [linear(c, syms) for c in ch]
        if any(p is None for p in parts):
            return None
        c0, co = parts[0][0], dict(parts[0][1])
        for c, cs in parts[1:]:
            c0 = c0 + c if kind == z3.Z3_OP_ADD else c0 - c
            for k, v in cs.items():
                prev = co.get(k)
                if kind == z3.Z3_OP_ADD:
                    co[k] = v if prev is None else prev + v
                else:
                    co[k] = -v if prev is None else prev - v
        return c0, co
    if kind == z3.Z3_OP_UMINUS:
        p = linear(ch[0], syms)
        return None if p is None else (-p[0], {k: -v for k, v in p[1].items()})
    if kind == z3.Z3_OP_MUL:
        live = [i for i, c in enumerate(ch) if _mentions(c, syms)]
        if len(live) != 1:
            return None
        p = linear(ch[live[0]], syms)
        if p is None:
            return None
        factor = z3.IntVal(1)
        for i, c in enumerate(ch):
            if i != live[0]:
                factor = factor * c
        return factor * p[0], {k: factor * v for k, v in p[1].items()}
    return None


def parts(offset: Any, t: Tensor) -> list[tuple[str, Any]] | None:
    """The per-stride claims that together imply ``0 <= offset <= t.span()`` (a list of
    ``(label, claim)``), or None when the split does not apply (no symbolic stride of ``t``
    occurs linearly in both the offset and the span)."""
    syms = {s.get_id(): s for s in t.strides if isinstance(s, z3.ExprRef) and z3.is_const(s)
            and s.decl().kind() == z3.Z3_OP_UNINTERPRETED}
    if not syms:
        return None
    off, span = linear(offset, syms), linear(t.span(), syms)
    if off is None or span is None or not off[1]:
        return None
    out = [("the part of the address with no symbolic stride", z3.And(off[0] >= 0, off[0] <= span[0]))]
    for k in sorted(set(off[1]) | set(span[1])):
        c = off[1].get(k, z3.IntVal(0))
        w = span[1].get(k, z3.IntVal(0))
        out.append((f"the coefficient of {syms[k]}", z3.And(c >= 0, c <= w)))
    return out


def _mentions(e: Any, syms: dict[int, Any]) -> bool:
    seen, todo = set(), [e]
    while todo:
        x = todo.pop()
        if x.get_id() in syms:
            return True
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        todo.extend(x.children())
    return False
