"""Race freedom and coverage of one output from a declared writer witness (see contract.py).

A :class:`~.contract.Witness` names, for an element index ``e``, the store instance that writes
it (``writer``), and for a store instance ``x``, the element it writes (``element``). Each part is
a quantifier-free implication over the whole domain (sizes, programs, iterations, lanes and the
index are free variables), so nothing has to be inverted by the solver:

- ``coverage``: for every in-range ``e``, ``writer(e)`` executes (program in the grid, iteration
  in its loop's range, lane in its block, mask and path true) and stores to ``e``'s address;
- ``race_free`` from three facts: the layout is injective (strides nest, each larger than the
  span of the dimensions inside it: :func:`layout_injective`), every executing store instance
  ``x`` stores to ``element(x)``, which is in range, and ``writer(element(x))`` is ``x`` itself
  (same statement, program, iterations and lanes). Two instances storing to one address then
  write one element and are both its writer: they are one instance.

Each implication is decided by :class:`Decider`: the integer division and remainder of tile
orders and grid-stride loops are first rewritten under side conditions it proves (rewrite.py),
then each conjunct gets a few short solver attempts that keep an unsat answer sound.

The witness is never trusted: each part is proved or the result is not ``proved``. When the
left inverse fails, the writer the witness names for ``element(x)`` is tried as a second
instance: if it executes, stores to ``x``'s address and is another program (or another lane of
the same statement), that is a race, reported with the two instances as a counterexample.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping

import z3

from .budget import budgeted
from .contract import Tensor, Witness, Writer
from .rewrite import Rewriter
from .termwise import _names  # the uninterpreted constants of some expressions (one definition)
from .tracer import Access, Trace
from .values import lane


class WitnessError(Exception):
    """The witness does not fit the traced kernel (arity of program ids, iterations, lanes or index)."""


def _expr(v: Any) -> Any:
    if isinstance(v, bool):
        raise WitnessError(f"a witness component is a boolean: {v!r}")
    if isinstance(v, int):
        return z3.IntVal(v)
    if isinstance(v, z3.ArithRef) and v.is_int():
        return v
    raise WitnessError(f"a witness component is not an integer expression: {v!r}")


class Placed:
    """One store statement at given program ids, loop iterations and lanes (expressions)."""

    def __init__(self, access: Access, trace_pids: Mapping[int, Any], grid: tuple, pid: tuple, iters: tuple,
                 lanes: tuple) -> None:
        if len(pid) != len(grid):
            raise WitnessError(f"{len(pid)} program ids for a grid of {len(grid)} axes")
        if len(iters) != len(access.loops):
            raise WitnessError(f"{len(iters)} loop iterations for a store inside {len(access.loops)} loops "
                               f"({access.where})")
        if len(lanes) != len(access.shape):
            raise WitnessError(f"{len(lanes)} lanes for a store block of shape {access.shape} ({access.where})")
        self.access, self.grid = access, grid
        self.pids = {a: (_expr(pid[a]) if a < len(grid) else z3.IntVal(0)) for a in trace_pids}
        self.ts = [_expr(t) for t in iters]
        self.lanes = [_expr(v) for v in lanes]
        self.pairs = ([(lane(d), v) for d, v in enumerate(self.lanes)]
                      + [(trace_pids[a], v) for a, v in self.pids.items()]
                      + [(t, v) for (t, _), v in zip(access.loops, self.ts)])

    def sub(self, e: Any) -> Any:
        return z3.substitute(e, *self.pairs) if self.pairs else e

    def executes(self) -> list[Any]:
        """The instance runs and its mask is true."""
        c = [z3.And(v >= 0, v < n) for v, n in zip(self.lanes, self.access.shape)]
        c += [z3.And(v >= 0, v < self.grid[a]) for a, v in self.pids.items() if a < len(self.grid)]
        c += [self.sub(x) for x in self.access.conds]
        return c + [self.sub(self.access.mask)]

    def offset(self) -> Any:
        return self.sub(self.access.offset)


class Decider:
    """Whether a context implies claims, over the whole domain (one per context: rewriting is shared).

    :meth:`decide` gives ``unsat`` (the claim follows), ``sat`` with a model of ``context, not
    claim`` (a counterexample), or ``unknown``. Division, remainder and conditionals are first
    rewritten under side conditions proved from the context (rewrite.py), in one of two ways
    (remainders kept as expressions, or named). Each conjunct of the claim is then proved on its
    own, with the conjuncts proved before it as facts, by a few short attempts that keep an unsat
    answer sound: only the contract assumptions whose symbols the problem mentions (the others,
    often products of strides, only slow the solver), different random seeds, and the problem with
    each division replaced by a fresh integer bounded by what division guarantees (weaker, so unsat
    still means proved). A model is only taken from a solve with every assumption and nothing
    abstracted (of the rewritten problem, whose models are models of ``context, not claim``).
    A side condition is first tried at concrete sizes (:func:`probe_shapes`), where a model refuting
    it is quick to find (the side condition is then not accepted); what is left unproved after a
    rewriting with short side-condition budgets is tried again after one with longer ones."""

    SIDE_BUDGETS = (1000, 4000)  # ms per side condition: a second rewriting, with more, for what is left

    def __init__(self, prover: Any, context: list[Any]) -> None:
        self.prover, self.context = prover, list(context)
        self.ways: dict[tuple[bool, int], Rewriter] = {}
        self.shapes = probe_shapes(prover)
        syms = prover.c.size_symbols()  # each probe shape as substitution pairs, built once (naming a z3 term is slow)
        self.fixed = [[(x, z3.IntVal(shape[str(x)])) for x in syms if str(x) in shape] for shape in self.shapes]

    def _rewriter(self, name_remainders: bool, level: int = 0) -> Rewriter:
        key = (name_remainders, level)
        if key not in self.ways:
            budget = self.SIDE_BUDGETS[level]
            self.ways[key] = Rewriter(self.context, prove=lambda facts, c: self._side(facts, c, budget),
                                      name_remainders=name_remainders)
        return self.ways[key]

    def _side(self, facts: list[Any], claim: Any, budget: int) -> bool:
        """A side condition of the rewriting: True only when it follows from the facts."""
        problem = _relevant(self.prover, [*facts, z3.Not(claim)])
        whole = z3.And(*problem)
        for fixed in self.fixed:  # a model at concrete sizes refutes it quickly (sizes substituted: linear)
            solver = budgeted(z3.Solver(), 100)
            solver.add(z3.simplify(z3.substitute(whole, *fixed)))
            if solver.check() == z3.sat:
                return False
        return _attempts(problem, budget, quick=True) == "unsat"

    def _rewritten(self, name_remainders: bool, claim: Any) -> tuple[list[Any], Any]:
        """(facts, claim) rewritten one way; the facts include every side condition accepted so far."""
        rw = self._rewriter(name_remainders)
        goal = rw(claim)
        return [*self.context, *[rw(c) for c in self.context], *rw.sides], goal

    def decide(self, claim: Any, timeout_ms: int | None = None) -> tuple[str, Any]:
        budget = timeout_ms or self.prover.timeout_ms
        pending, proved = _conjuncts(claim), []
        for level in range(len(self.SIDE_BUDGETS)):
            first = True
            while pending:  # again while a pass proves something: later conjuncts may help earlier ones
                each = max(500, budget // 3) if first else budget  # a short first pass, the others in full
                done = [any(self._proves(part, proved, way, each, level) for way in (False, True)) for part in pending]
                if not any(done) and not first:
                    break
                first = False
                proved += [part for part, ok in zip(pending, done) if ok]
                pending = [part for part, ok in zip(pending, done) if not ok]
        if not pending:
            return "unsat", None
        facts, goal = self._rewritten(False, claim)
        return self.prover._solve([*facts, z3.Not(goal)], timeout_ms=budget)

    def _proves(self, part: Any, proved: list[Any], name_remainders: bool, budget: int, level: int) -> bool:
        rw = self._rewriter(name_remainders, level)
        goal = rw(part)
        known = [rw(c) for c in proved]  # conjuncts proved already: facts under the context
        facts = [*self.context, *[rw(c) for c in self.context], *rw.sides, *known]
        return all(_attempts(_relevant(self.prover, [*facts, z3.Not(sub)]), budget) == "unsat"
                   for sub in _conjuncts(goal))


def probe_shapes(prover: Any) -> list[dict[str, int]]:
    """Concrete sizes in the contract's domain, to refute side conditions quickly: the first two
    bounded shapes, and for each size that is a tensor extent or grid extent, a model of the
    domain where that size is at least 1000 (a tile order shows its groups only on large sizes)."""
    cached = getattr(prover, "_probe_shapes", None)
    if cached is not None:
        return cached
    out = [sh for sh in prover.c.bounded_shapes if prover._admits(sh)][:2]
    syms = prover.c.size_symbols()
    extents = [x for t in prover.tensors.values() for x in t.shape] + list(prover.grid)
    big = {str(v) for e in extents if isinstance(e, z3.ExprRef) for v in _names_of(e)}
    for x in syms:
        if str(x) not in big:
            continue
        solver = budgeted(z3.Solver(), 500)
        solver.add(*prover.assume, x >= 1000)
        if solver.check() == z3.sat:
            m = solver.model()
            out.append({str(y): m.eval(y, model_completion=True).as_long() for y in syms})
    prover._probe_shapes = out
    return out


def _names_of(e: Any) -> list[Any]:
    from .contract import _symbols

    return _symbols(e)


def decide(prover: Any, context: list[Any], claim: Any, timeout_ms: int | None = None) -> tuple[str, Any]:
    """:meth:`Decider.decide` for one claim."""
    return Decider(prover, context).decide(claim, timeout_ms)


def _conjuncts(e: Any) -> list[Any]:
    e = z3.simplify(e)
    return [c for x in e.children() for c in _conjuncts(x)] if z3.is_and(e) else [e]


def _relevant(prover: Any, problem: list[Any]) -> list[Any]:
    """``problem`` with the contract assumptions (and value preconditions) over its own symbols."""
    names = set().union(*(_names_cached(prover, e) for e in problem)) if problem else set()
    few = [a for a in prover.assume if _names_cached(prover, a) <= names]
    return [*few, *problem, *prover._value_preconditions(problem)]


def _attempts(problem: list[Any], budget_ms: int, quick: bool = False) -> str:
    """unsat if one short attempt shows ``problem`` (or a weakening of it) unsatisfiable; sat if one
    finds a model of a weakening (not a counterexample: the caller re-solves); else unknown. The
    budget is counted in z3's resource units, not time: the answer does not depend on the load."""
    tries = 2 if quick else 4
    each = max(150, budget_ms // tries)
    weak: list[Any] = []
    for k, seed in ((0, 0), (1, 0), (0, 1), (1, 1))[:tries]:
        if k and not weak:
            weak = _abstract_divisions(problem)  # only when the problem itself was not decided
        s = budgeted(z3.Solver(), each)  # z3's work count (see budget.py): the load does not decide
        s.set("random_seed", seed)
        s.add(*(weak if k else problem))
        r = s.check()
        if r == z3.unsat:
            return "unsat"
        if r == z3.sat:
            return "sat"
    return "unknown"


def _abstract_divisions(fs: list[Any]) -> list[Any]:
    """``fs`` with every ``a / d`` replaced by a fresh integer ``v`` with ``d * v <= a < d * (v + 1)``
    when ``d > 0`` (what Euclidean division guarantees): every model of ``fs`` is one of the result."""
    divs, seen, todo = [], set(), list(fs)
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_app_of(e, z3.Z3_OP_IDIV):
            divs.append(e)
        todo.extend(e.children())
    if not divs:
        return list(fs)
    fresh = [z3.FreshInt("div") for _ in divs]
    pairs = list(zip(divs, fresh))
    # one substitution for everything: the formulas and the divisions' operands, packed as the
    # arguments of one application (substitute is slow per call)
    items = [z3.If(f, z3.IntVal(1), z3.IntVal(0)) for f in fs] + [x for d in divs for x in (d.arg(0), d.arg(1))]
    pack = z3.Function("ws_pack", *([z3.IntSort()] * len(items)), z3.IntSort())
    done = z3.substitute(pack(*items), *pairs).children()
    out = [x.arg(0) if z3.is_app_of(x, z3.Z3_OP_ITE) and x.arg(1).eq(z3.IntVal(1)) and x.arg(2).eq(z3.IntVal(0))
           else x == 1 for x in done[:len(fs)]]
    for k, v in enumerate(fresh):
        a, b = done[len(fs) + 2 * k], done[len(fs) + 2 * k + 1]
        out.append(z3.Implies(b > 0, z3.And(b * v <= a, a < b * v + b)))
    return out


def _names_cached(prover: Any, e: Any) -> frozenset[str]:
    """:func:`_names` of one expression, cached on the prover (keyed by AST id, the term kept alive)."""
    cache = prover.__dict__.setdefault("_names_cache", {})
    hit = cache.get(e.get_id())
    if hit is None:
        hit = cache[e.get_id()] = (e, frozenset(_names([e])))
    return hit[1]




@dataclass
class Result:
    status: str  # proved | refuted | unknown | failed (a race shown by the witness's own writer)
    detail: str = ""
    counterexample: dict | None = None


def _addr(t: Tensor, idx: list[Any]) -> Any:
    return sum((i * st for i, st in zip(idx, t.strides)), z3.IntVal(0))


def _in_range(t: Tensor, idx: list[Any]) -> list[Any]:
    return [z3.And(i >= 0, i < n) for i, n in zip(idx, t.shape)]


def _index(w: Witness, t: Tensor, store: int, pid: tuple, iters: tuple, lanes: tuple) -> list[Any]:
    out = w.element(store, pid, iters, lanes)
    out = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(out) != len(t.shape):
        raise WitnessError(f"element() gives {len(out)} indices for a tensor of {len(t.shape)} dimensions")
    return [_expr(v) for v in out]


def _writer(w: Witness, idx: list[Any]) -> Writer:
    out = w.writer(*idx)
    if not isinstance(out, Writer):
        raise WitnessError(f"writer() must return a Writer, not {type(out).__name__}")
    return out


def _store_is(wr: Writer, k: int) -> Any:
    """The writer's store statement is number ``k``."""
    if isinstance(wr.store, int) and not isinstance(wr.store, bool):
        return z3.BoolVal(wr.store == k)
    return _expr(wr.store) == k


def _placed_writer(prover: Any, tr: Trace, stores: list[Access], wr: Writer) -> list[tuple[int, Any, Placed | None]]:
    """(statement number, the writer names it, the writer placed on it) for each store statement;
    a statement whose loops or block the writer's arity does not fit cannot be the one it names."""
    out = []
    for k, a in enumerate(stores):
        sel = _store_is(wr, k)
        if z3.is_false(z3.simplify(sel)):
            continue
        try:
            out.append((k, sel, Placed(a, tr.pids, prover.grid, tuple(wr.pid), tuple(wr.iters), tuple(wr.lanes))))
        except WitnessError:
            if not isinstance(wr.store, int):
                out.append((k, sel, None))
            else:
                raise
    return out


def coverage(prover: Any, tr: Trace, stores: list[Access], base: str, w: Witness) -> Result:
    """Every in-range element is stored to by the instance ``writer`` names for it."""
    t = prover.tensors[base]
    idx = [z3.Int(f"elem{d}") for d in range(len(t.shape))]
    wr = _writer(w, idx)
    written = []
    for k, sel, at in _placed_writer(prover, tr, stores, wr):
        if at is not None:
            written.append(z3.And(sel, *at.executes(), at.offset() == _addr(t, idx)))
    if not written:
        raise WitnessError("the writer names no store statement of this tensor")
    status, m = decide(prover, _in_range(t, idx), z3.Or(*written))
    if status == "unsat":
        return Result("proved", "by the writer witness: every element is stored to by the instance it names")
    if status == "unknown":
        return Result("unknown", f"the witness's coverage part was not proved ({m})")
    terms = {f"index{d}": v for d, v in enumerate(idx)}
    terms.update({f"writer.pid{a}": _expr(p) for a, p in enumerate(wr.pid)})
    terms.update({f"writer.iteration{k}": _expr(v) for k, v in enumerate(wr.iters)})
    terms.update({f"writer.lane{d}": _expr(v) for d, v in enumerate(wr.lanes)})
    cex = prover._cex(m, terms)
    return Result("refuted", "the writer witness is refuted: the instance it names for an element does not "
                  f"execute or does not store to it ({_short(cex)})", cex)


def _sampled_order(prover: Any, strides: list[Any], shape: list[Any]) -> list[int] | None:
    """The dimensions by increasing stride at one shape of the domain (every extent above 1 where the
    domain has one): the order to try beside the fixed ones; only a candidate, proved like them."""
    status, m = prover._solve([n > 1 for n in shape], timeout_ms=min(prover.timeout_ms, 1500))
    if status != "sat":
        return None
    vals = [m.eval(s, model_completion=True) for s in strides]
    if not all(z3.is_int_value(v) for v in vals):
        return None
    return sorted(range(len(strides)), key=lambda d: (vals[d].as_long(), -d))


def layout_injective(prover: Any, t: Tensor) -> bool:
    """Whether distinct in-range indices have distinct offsets, for every size in the domain: some
    order of the dimensions (innermost first; the reverse order, the order of the strides at one shape
    of the domain, then others) has non-negative strides each larger than the span of the dimensions
    inside it (a dimension of extent 1 needs no room). Mixed-radix uniqueness then
    gives injectivity: at the outermost dimension where two indices differ, that stride exceeds
    anything the inner dimensions can make up."""
    dims = list(range(len(t.shape)))
    strides = [_expr(s) for s in t.strides]
    shape = [_expr(n) for n in t.shape]
    nonneg = z3.And(*[s >= 0 for s in strides]) if strides else z3.BoolVal(True)
    fixed = ([dims[::-1]] + [list(p) for p in itertools.permutations(dims) if list(p) != dims[::-1]])[:24]

    def orders():  # the sampled order is computed (one more solver call) only when the reverse one fails
        yield fixed[0]
        sampled = _sampled_order(prover, strides, shape)  # e.g. channels-last: (c, w, h, d, n), past the first 24
        if sampled is not None and sampled not in fixed:
            yield sampled
        yield from fixed[1:]

    for order in orders():
        conds, span = [nonneg], z3.IntVal(0)
        for d in order:
            conds.append(z3.Implies(shape[d] > 1, strides[d] > span))
            span = span + (shape[d] - 1) * strides[d]
        status, _ = prover._solve([z3.Not(z3.And(*conds))], timeout_ms=min(prover.timeout_ms, 1500))
        if status == "unsat":
            return True
    return False


def race_free(prover: Any, tr: Trace, stores: list[Access], base: str, w: Witness) -> Result:
    """No two distinct store instances write one address: by the element map and its left inverse."""
    from .prove import _Instance

    t = prover.tensors[base]
    if not layout_injective(prover, t):
        return Result("unknown", "the witness does not apply: the output's layout is not shown injective (no "
                      "order of its dimensions has strides that nest)")
    for k, a in enumerate(stores):
        x = _Instance(a, tr.pids, f"x{k}")
        pid = tuple(x.pids[ax] for ax in range(len(prover.grid)))
        idx = _index(w, t, k, pid, tuple(x.ts), tuple(x.lanes))
        base_facts = x.constraints(prover.grid)
        # the element map: the instance stores to element(x), which lies in the tensor
        decider = Decider(prover, base_facts)
        status, m = decider.decide(z3.And(*_in_range(t, idx), x.sub(a.offset) == _addr(t, idx)))
        if status != "unsat":
            return _not_proved(prover, status, m, x, idx, f"store #{k} at {a.where}: element() is not the element "
                               "the instance stores to (or lies outside the tensor)")
        # the left inverse: the writer of element(x) is x
        wr = _writer(w, idx)
        same = []
        for kk, sel, at in _placed_writer(prover, tr, stores, wr):
            if kk == k and at is not None:
                same.append(z3.And(sel, *[at.pids[ax] == x.pids[ax] for ax in x.pids],
                                   *[u == v for u, v in zip(at.ts, x.ts)],
                                   *[u == v for u, v in zip(at.lanes, x.lanes)]))
        status, m = decider.decide(z3.Or(*same) if same else z3.BoolVal(False))
        if status == "unsat":
            continue
        if status == "sat":
            race = _shown_race(prover, tr, stores, k, x, idx, wr)
            if race is not None:
                return race
        return _not_proved(prover, status, m, x, idx, f"store #{k} at {a.where}: writer(element(x)) is not x")
    return Result("proved", "by the writer witness: each executing store instance writes the element element() "
                  "names, whose writer is that instance, and the layout is injective")


def _shown_race(prover: Any, tr: Trace, stores: list[Access], k: int, x: Any, idx: list[Any],
                wr: Writer) -> Result | None:
    """The witness's own writer of element(x) as a second instance: a race when it executes, stores to
    x's address and is another program (or another lane of the same statement)."""
    a = stores[k]
    for kk, sel, at in _placed_writer(prover, tr, stores, wr):
        if at is None:
            continue
        pid_differ = z3.Or(*[at.pids[ax] != x.pids[ax] for ax in x.pids]) if x.pids else z3.BoolVal(False)
        distinct = z3.Or(pid_differ, *[u != v for u, v in zip(at.lanes, x.lanes)]) if kk == k else pid_differ
        facts = (x.constraints(prover.grid) + [sel, *at.executes(), at.offset() == x.sub(a.offset), distinct])
        status, m = prover._solve(facts)  # a model of the facts is the race
        if status == "sat":
            m = prover._minimize(facts, m, rounds=4)
            terms = {**prover._instance_terms(x, "first.")}
            terms.update({f"second.pid{ax}": v for ax, v in at.pids.items()})
            terms.update({f"second.lane{d}": v for d, v in enumerate(at.lanes)})
            terms.update({f"second.iteration{j}": v for j, v in enumerate(at.ts)})
            terms["address"] = x.sub(a.offset)
            cex = prover._cex(m, terms)
            cex["element"] = [prover._cex(m, {"i": i})["i"] for i in idx]
            cex["source"] = [f"{a.file}:{a.where.rsplit(':', 1)[-1]}",
                             f"{stores[kk].file}:{stores[kk].where.rsplit(':', 1)[-1]}"]
            return Result("failed", f"stores #{k} and #{kk} hit one address (two writers of one element, found "
                          "through the witness)", cex)
    return None


def _not_proved(prover: Any, status: str, m: Any, x: Any, idx: list[Any], what: str) -> Result:
    if status == "unknown":
        return Result("unknown", f"the witness's race part was not proved: {what} ({m})")
    terms = {**prover._instance_terms(x, ""), **{f"index{d}": v for d, v in enumerate(idx)}}
    cex = prover._cex(m, terms)
    return Result("refuted", f"the writer witness is refuted: {what} ({_short(cex)})", cex)


def _short(cex: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in list(cex.items())[:16])
