"""Proofs by splitting an address or an int32 result into its stride terms.

An implicit-GEMM gather addresses ``x[n, c, i_d, i_h, i_w]`` as ``n*sxn + c*sxc + i_d*sxd + ...``,
each index a chain of divisions and remainders of a program id and a lane. Over the whole domain
z3 does not prove ``0 <= offset <= span`` (products of strides and index chains), though each
index's range alone is easy. Two sound rules split such goals into stride-free ones:

- **in bounds by dimensions.** With the tensor's strides distinct symbols (at most one a constant),
  the offset, as a polynomial, is ``sum_d c_d * stride_d`` (``c_d``: everything that multiplies
  ``stride_d``; nothing may be left over, and no monomial may hold two strides). If every executing
  instance has ``0 <= c_d <= n_d - 1`` for every dimension ``d``, then, strides being
  non-negative, ``0 <= offset <= sum_d (n_d - 1) stride_d``, the tensor's span. Each ``c_d`` range
  is one solve; any that is not shown leaves the obligation to the whole-offset check (which finds
  the counterexample when there is one).
- **int32 by the domain.** For an int32 result ``e`` and a domain fact ``Q < K`` (or ``Q <= K - 1``)
  with ``K <= 2^31``: with ``S`` the contract's stride symbols (each ``>= 0``), split
  ``e = sum_s s * c_s + r`` and ``Q = sum_s s * b_s + q`` (no monomial with two of ``S``). If every
  instance, masked lanes included, has ``|c_s| <= b_s`` for the strides of ``e``, ``b_s >= 0`` for
  the strides only ``Q`` has, and ``|r| <= q``, then ``|e| <= Q <= 2^31 - 1``: the result does not
  wrap. Each part is one solve without stride products. A result with no stride term (an input
  coordinate, before it is scaled by its stride) is bounded by one coefficient: ``|e| <= b_s``,
  ``s >= 1``, every other ``b_j >= 0`` and ``q >= 0`` give ``|e| <= b_s <= s b_s <= Q``.

Nothing is assumed: every part is an unsat answer of a solve over the whole domain (with the
contract assumptions whose symbols the part mentions: fewer assumptions, the same unsat), and the
split itself is an identity of polynomials, checked by construction.
"""
from __future__ import annotations

from typing import Any

import z3

from .budget import budgeted
from .rewrite import _expr, _poly

LIMIT = 2**31


def split_by(e: Any, atoms_of: dict[int, int]) -> tuple[dict[int, Any], Any] | None:
    """``e`` as ``sum_k atom_k * coefficient_k + rest``: {k: coefficient}, rest; ``atoms_of`` maps the
    z3 ids of the splitting atoms to their keys. None when some monomial holds two of them (or ``e``
    is too large a polynomial)."""
    atoms: dict[int, Any] = {}
    try:
        p = _poly(z3.simplify(e), atoms)
    except OverflowError:
        return None
    coef: dict[int, dict[tuple, int]] = {}
    rest: dict[tuple, int] = {}
    for mono, v in p.items():
        hits = [a for a in mono if a in atoms_of]
        if len(hits) > 1:
            return None
        if not hits:
            rest[mono] = rest.get(mono, 0) + v
            continue
        others = list(mono)
        others.remove(hits[0])
        key = tuple(others)
        part = coef.setdefault(atoms_of[hits[0]], {})
        part[key] = part.get(key, 0) + v
    return {k: _expr(q, atoms) for k, q in coef.items()}, _expr(rest, atoms)


def dimension_indices(offset: Any, shape: tuple, strides: tuple) -> list[tuple[Any, Any]] | None:
    """``offset`` as ``sum_d index_d * strides[d]``: [(index_d, extent_d)], or None when it is not of that
    form (strides not distinct symbols, two constant strides, a monomial with two strides, a remainder
    a constant stride does not divide)."""
    ids: dict[int, int] = {}
    const = None
    for d, st in enumerate(strides):
        st = z3.simplify(st) if isinstance(st, z3.ExprRef) else z3.IntVal(int(st))
        if z3.is_int_value(st):
            if const is not None or st.as_long() < 1:
                return None
            const = (d, st.as_long())
        elif z3.is_const(st) and st.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            if st.get_id() in ids:
                return None
            ids[st.get_id()] = d
        else:
            return None
    split = split_by(offset, ids)
    if split is None:
        return None
    coef, rest = split
    index = {d: coef.get(d, z3.IntVal(0)) for d in ids.values()}
    if const is not None:
        d, c = const
        if c != 1:
            atoms: dict[int, Any] = {}
            p = _poly(rest, atoms)
            if any(v % c for v in p.values()):
                return None
            rest = _expr({m: v // c for m, v in p.items()}, atoms)
        index[d] = rest
    elif not (z3.is_int_value(rest) and rest.as_long() == 0):
        return None
    return [(index[d], shape[d]) for d in range(len(strides))]


def in_bounds(prover: Any, facts: list[Any], offset: Any, tensor: Any, budget_ms: int) -> tuple[bool, Any]:
    """Whether ``facts`` (an executing instance) imply ``0 <= offset <= span`` by the dimension rule:
    (True, None); else (False, a model of the contract's assumptions and ``facts`` where one index lies
    outside its dimension, or None). Such a model is a lead, not a counterexample: the caller checks
    the whole offset at its sizes."""
    dims = dimension_indices(offset, tuple(tensor.shape), tuple(tensor.strides))
    if dims is None:
        return False, None
    for idx, n in dims:
        problem = [*facts, z3.Not(z3.And(idx >= 0, idx < n))]
        if not _unsat(prover, problem, budget_ms):
            status, m = prover._solve(problem, timeout_ms=budget_ms)  # every assumption: a model in the domain
            return False, (m if status == "sat" else None)
    return True, None


def stride_atoms(prover: Any) -> dict[int, int]:
    """z3 ids of the contract's stride symbols (every tensor's), each its own key."""
    out: dict[int, int] = {}
    for t in prover.tensors.values():
        for st in t.strides:
            if isinstance(st, z3.ExprRef) and z3.is_const(st) and st.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                out[st.get_id()] = st.get_id()
    return out


def has_strides(prover: Any, e: Any) -> bool:
    """Whether ``e`` mentions one of the contract's stride symbols."""
    mine = prover.__dict__.get("_stride_names")
    if mine is None:
        mine = prover._stride_names = {str(st) for t in prover.tensors.values() for st in t.strides
                                       if isinstance(st, z3.ExprRef) and z3.is_const(st)}
    return bool(mine & _names([e]))


def domain_bounds(prover: Any) -> list[Any]:
    """The domain facts ``Q < K`` / ``Q <= K`` with a constant ``K <= 2^31`` (resp. ``< 2^31``), as ``Q``."""
    out = []
    for f in prover.assume:
        if not (z3.is_app(f) and f.num_args() == 2 and f.decl().kind() in (z3.Z3_OP_LT, z3.Z3_OP_LE)):
            continue
        q, k = f.children()
        if not z3.is_int_value(k):
            continue
        top = k.as_long() - (1 if f.decl().kind() == z3.Z3_OP_LT else 0)
        if top <= LIMIT - 1 and not z3.is_int_value(q):
            out.append(q)
    return out


def int32(prover: Any, facts: list[Any], e: Any, budget_ms: int, tries: int = 3) -> bool:
    """Whether ``facts`` (any lane of an instance) imply ``|e| <= 2^31 - 1`` by the domain rule. A result
    with no stride term (an input coordinate) is bounded by one stride's coefficient instead: with
    ``|e| <= b_s``, ``s >= 1`` and the rest of ``Q`` non-negative, ``|e| <= b_s <= s b_s <= Q``; the
    ``tries`` coefficients sharing the most symbols with ``e`` are tried."""
    strides = stride_atoms(prover)
    mine = split_by(e, strides)
    if mine is None:
        return False
    coef, rest = mine
    facts_q = [(q, split_by(q, strides)) for q in domain_bounds(prover)]
    facts_q = [(q, split) for q, split in facts_q if split is not None]
    if not coef:  # no stride term: |e| <= b_s for one stride s of one domain fact
        mentions = _names([e])
        ranked = sorted(((len(_names([b]) & mentions), id(q), s, q, split) for q, split in facts_q
                         for s, b in split[0].items()), key=lambda r: -r[0])
        for _, _, s, q, (bound, qrest) in ranked[:tries]:
            atom = next(st for t in prover.tensors.values() for st in t.strides
                        if isinstance(st, z3.ExprRef) and st.get_id() == s)
            parts = [z3.And(-bound[s] <= e, e <= bound[s]), atom >= 1, qrest >= 0]
            parts += [b >= 0 for j, b in bound.items() if j != s]
            if all(_unsat(prover, [*facts, z3.Not(p)], budget_ms) for p in parts):
                return True
        return False
    for q, (bound, qrest) in facts_q:
        if not set(coef) <= set(bound):
            continue
        parts = [z3.And(-bound[s] <= c, c <= bound[s]) for s, c in coef.items()]
        parts += [b >= 0 for s, b in bound.items() if s not in coef]
        parts.append(z3.And(-qrest <= rest, rest <= qrest))
        if all(_unsat(prover, [*facts, z3.Not(p)], budget_ms) for p in parts):
            return True
    return False


def _unsat(prover: Any, problem: list[Any], budget_ms: int) -> bool:
    """``problem`` with the contract assumptions over its own symbols is unsatisfiable (a subset of the
    assumptions: an unsat answer holds with all of them). Answers are remembered per prover (one
    constexpr combination: the same assumptions), keyed by the problem's terms (kept alive)."""
    cache = prover.__dict__.setdefault("_termwise_unsat", {})
    key = (tuple(f.get_id() for f in problem), budget_ms)
    if key in cache:
        return cache[key][1]
    names = _names(problem)
    goal = [*(a for a in prover.assume if _names([a]) <= names), *problem]
    goal += prover._value_preconditions(goal)
    out = False
    for make in (lambda: z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver(), z3.Solver):
        solver = budgeted(make(), budget_ms // 2)  # as Prover._solve: equation solving first, then the default
        solver.add(*goal)
        r = solver.check()
        if r != z3.unknown:
            out = r == z3.unsat
            break
    cache[key] = (list(problem), out)
    return out


def _names(es: list[Any]) -> set[str]:
    """The uninterpreted constants (sizes, program ids, lanes, iterations) of some expressions."""
    out, seen, todo = set(), set(), list(es)
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(e.decl().name())
        todo.extend(e.children())
    return out
