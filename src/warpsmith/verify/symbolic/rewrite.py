"""Rewriting integer division, remainder and conditionals under side conditions the solver proves.

z3 rarely proves facts like ``(g * (4 * nn) + r) // (4 * nn) == g`` on its own when they sit inside
a larger nonlinear goal (a grouped tile order, a grid-stride loop), though each one alone is easy.
:class:`Rewriter` simplifies a goal bottom-up before the solver sees it:

- ``a // d`` and ``a % d`` where the polynomial ``a`` splits as ``q * d + r`` become ``q`` and ``r``
  once the solver shows ``d > 0``, ``a == q * d + r`` and ``0 <= r < d`` under the context
  (uniqueness of floor division, which z3's ``div``/``mod`` are for a positive divisor), or
  ``q + r // d`` and ``r % d`` with ``d > 0`` alone. The splits tried: ``r`` a remainder met
  before (``pid_m = first_m + (t % per_group) % size_m`` divided by ``GROUP_M``), then ``q`` all
  the monomials of ``a`` that ``d``'s single monomial divides;
- ``r // d`` and ``r % d`` become ``0`` and ``r`` once ``0 <= r < d`` is shown;
- any other ``a % d`` becomes ``a - d * (a // d)`` once ``d != 0`` is shown (one normal form for
  remainders, the one the tracer uses for Triton's ``%``, so that multiples cancel in sums);
- ``If(c, x, y)`` becomes ``x`` (``y``) once the context implies ``c`` (``not c``): Triton's
  truncating division is such a conditional, and with signs known it is plain division.

A quotient by a positive symbolic divisor that stays becomes a fresh integer with its definition
and bounds (the same term, the same integer); with ``name_remainders`` its remainder too
(``u == a - d w``, ``0 <= u < d``), which helps where a remainder is divided again (a tile number
within a batch, split into tile coordinates) and hurts where it must cancel against its quotient. Each accepted side condition holds in
every model of the context (it was proved there, given the ones accepted before it, or it defines
a fresh integer, which any model extends to), and under them every rewritten term equals the
original; so
``context, sides, rewritten context, not rewritten goal`` is unsatisfiable exactly when
``context, not goal`` is, and any model of it is a model of ``context, not goal``. Nothing is
assumed that was not proved.
"""
from __future__ import annotations

from typing import Any, Callable

import z3

from .budget import budgeted

_MAX_TERMS = 256


def _poly(e: Any, atoms: dict[int, Any]) -> dict[tuple, int]:
    """``e`` as a polynomial {monomial (sorted atom ids, with repeats): coefficient} over atoms
    (anything that is not +, -, * or an integer constant)."""
    if z3.is_int_value(e):
        v = e.as_long()
        return {(): v} if v else {}
    kind = e.decl().kind() if z3.is_app(e) else None
    if kind in (z3.Z3_OP_ADD, z3.Z3_OP_SUB):
        ch = e.children()
        out = dict(_poly(ch[0], atoms))
        for c in ch[1:]:
            for m, v in _poly(c, atoms).items():
                out[m] = out.get(m, 0) + (v if kind == z3.Z3_OP_ADD else -v)
        return {m: v for m, v in out.items() if v}
    if kind == z3.Z3_OP_UMINUS:
        return {m: -v for m, v in _poly(e.children()[0], atoms).items()}
    if kind == z3.Z3_OP_MUL:
        out: dict[tuple, int] = {(): 1}
        for c in e.children():
            nxt: dict[tuple, int] = {}
            for m1, v1 in out.items():
                for m2, v2 in _poly(c, atoms).items():
                    m = tuple(sorted(m1 + m2))
                    nxt[m] = nxt.get(m, 0) + v1 * v2
            out = {m: v for m, v in nxt.items() if v}
            if len(out) > _MAX_TERMS:
                raise OverflowError("polynomial too large")
        return out
    atoms[e.get_id()] = e
    return {(e.get_id(),): 1}


def _expr(p: dict[tuple, int], atoms: dict[int, Any]) -> Any:
    terms = []
    for m, v in sorted(p.items()):
        t = z3.IntVal(v)
        for a in m:
            t = t * atoms[a]
        terms.append(t)
    return z3.simplify(sum(terms[1:], terms[0])) if terms else z3.IntVal(0)


def _minus(big: tuple, small: tuple) -> tuple | None:
    rest = list(big)
    for a in small:
        if a not in rest:
            return None
        rest.remove(a)
    return tuple(rest)


def decompose(a: Any, d: Any, remainders: list[Any] = ()) -> list[tuple[Any, Any]]:
    """Splits ``(q, r)`` with ``a == q * d + r`` as polynomials and ``q`` not zero, most useful first:
    ``r`` one of ``remainders`` (expressions already known to be remainders, so often in
    ``[0, d)``) with everything else a multiple of ``d``; then ``q`` collecting every monomial of
    ``a`` that ``d``'s single monomial divides."""
    atoms: dict[int, Any] = {}
    try:
        pa, pd = _poly(a, atoms), _poly(d, atoms)
        known = [_poly(r, atoms) for r in remainders]
    except OverflowError:
        return []
    if len(pd) != 1:
        return []
    (md, c), = pd.items()
    if c <= 0:
        return []
    out = []
    for pr in known:
        if not pr or any(pa.get(m) != v for m, v in pr.items()):
            continue
        q: dict[tuple, int] = {}
        for m, v in pa.items():
            if m in pr:
                continue
            rest = _minus(m, md)
            if rest is None or v % c:
                break
            q[rest] = q.get(rest, 0) + v // c
        else:
            if q:
                out.append((_expr(q, atoms), _expr(pr, atoms)))
    q, r = {}, {}
    for m, v in pa.items():
        rest = _minus(m, md)
        if rest is None:
            r[m] = r.get(m, 0) + v
            continue
        qv, rv = divmod(v, c)
        if rv and rest:  # a coefficient d does not divide: the monomial stays whole in r
            qv, rv = 0, v
        if qv:
            q[rest] = q.get(rest, 0) + qv
        if rv:
            r[m] = r.get(m, 0) + rv
    if q:
        out.append((_expr(q, atoms), _expr(r, atoms)))
    return out


class Rewriter:
    """Bottom-up rewriting of terms under ``context`` (see the module docstring); ``sides`` are the
    side conditions accepted, each proved under the context and the ones before it. ``prove(facts,
    claim)`` decides whether the facts imply the claim (True only when they do); by default one
    short z3 solve."""

    def __init__(self, context: list[Any], prove: Callable[[list[Any], Any], bool] | None = None,
                 timeout_ms: int = 300, name_remainders: bool = False) -> None:
        self.context, self.timeout_ms, self.name_remainders = list(context), timeout_ms, name_remainders
        self.prove = prove or self._prove
        self.sides: list[Any] = []
        # keyed by AST ids; each entry keeps its key terms alive, so that no id is reused while cached
        self.memo: dict[int, tuple[Any, Any]] = {}
        self.named: dict[tuple, tuple[Any, Any]] = {}
        self.remainders: list[Any] = []  # remainders written a - d (a // d), to be recognized in sums

    def _prove(self, facts: list[Any], claim: Any) -> bool:
        s = budgeted(z3.Solver(), self.timeout_ms)
        s.add(*facts, z3.Not(claim))
        return s.check() == z3.unsat

    def holds(self, claim: Any) -> bool:
        return self.prove([*self.context, *self.sides], claim)

    def __call__(self, e: Any) -> Any:
        key = e.get_id()
        if key in self.memo:
            return self.memo[key][1]
        if not z3.is_app(e) or e.num_args() == 0:
            out = e
        elif z3.is_app_of(e, z3.Z3_OP_ITE):
            out = self._ite(e)
        else:
            ch = [self(c) for c in e.children()]
            out = e.decl()(*ch)
            if z3.is_app_of(e, z3.Z3_OP_IDIV) or z3.is_app_of(e, z3.Z3_OP_MOD):
                out = self._division(ch[0], ch[1], z3.is_app_of(e, z3.Z3_OP_IDIV))
        out = z3.simplify(out)
        self.memo[key] = (e, out)
        return out

    def _accept(self, side: Any) -> bool:
        side = z3.simplify(side)
        if z3.is_true(side):
            return True
        if self.holds(side):
            self.sides.append(side)
            return True
        return False

    def _ite(self, e: Any) -> Any:
        """A conditional whose condition the context decides is its branch (only that one is rewritten)."""
        cond = self(e.arg(0))
        if z3.is_true(cond) or (not z3.is_false(cond) and self._accept(cond)):
            return self(e.arg(1))
        if z3.is_false(cond) or self._accept(z3.Not(cond)):
            return self(e.arg(2))
        return z3.If(cond, self(e.arg(1)), self(e.arg(2)))

    def _division(self, a: Any, d: Any, div: bool) -> Any:
        """``a // d`` (div) or ``a % d`` with a, d rewritten already."""
        a, d = z3.simplify(a), z3.simplify(d)
        splits = decompose(a, d, self.remainders)
        # (q d + r) // d == q and (q d + r) % d == r when 0 <= r < d; for any r, q + r // d and r % d
        # (d > 0: floor division)
        for q, r in splits:
            if self._accept(z3.And(d > 0, a == q * d + r, r >= 0, r < d)):
                return q if div else r
        for q, r in splits[-1:]:
            if self._accept(z3.And(d > 0, a == q * d + r)):
                rest = self._small(r, d, div)
                return z3.simplify(q + rest) if div else rest
        return self._small(a, d, div)

    def _small(self, a: Any, d: Any, div: bool) -> Any:
        """``a // d`` or ``a % d``: 0 or ``a`` when ``0 <= a < d``. Otherwise the remainder is written
        ``a - d * (a // d)`` (the form the tracer gives Triton's ``%``: multiples then cancel in sums),
        and a quotient by a divisor shown positive and not constant is a fresh integer ``w`` named by
        its definition ``w == a // d`` with the bounds that follow, ``d w <= a < d w + d``: later steps
        see one bounded atom, and one term gets one name."""
        if self._accept(z3.And(a >= 0, a < d)):
            return z3.IntVal(0) if div else a
        q = self._quotient(a, d)
        if div:
            return q
        if self.name_remainders and not z3.is_app_of(q, z3.Z3_OP_IDIV):
            key = (a.get_id(), d.get_id(), "mod")
            if key not in self.named:
                u = z3.FreshInt("mod")
                self.sides += [u == a - d * q, u >= 0, u < d]
                self.named[key] = ((a, d), u)
            return self.named[key][1]
        if z3.is_app_of(q, z3.Z3_OP_IDIV) and not self._accept(d != 0):  # a % 0 is not a - 0 * (a // 0)
            return a % d
        out = z3.simplify(a - d * q)
        self.remainders.append(out)
        return out

    def _quotient(self, a: Any, d: Any) -> Any:
        key = (a.get_id(), d.get_id())
        if key not in self.named:
            out = a / d
            if not z3.is_int_value(d) and self._accept(d > 0):
                w = z3.FreshInt("div")
                self.sides += [w == out, d * w <= a, a < d * w + d]
                out = w
            self.named[key] = ((a, d), out)
        return self.named[key][1]
