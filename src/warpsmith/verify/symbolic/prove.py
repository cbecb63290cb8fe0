"""Discharging a kernel's proof obligations with z3.

For each constexpr combination of a :class:`LaunchContract`, the kernel is traced once and
these obligations are built over the contract's whole domain of sizes, every program id in the
grid, every lane and every loop iteration:

1. ``in_bounds``: every load and store whose mask is true addresses inside its tensor
   (``0 <= offset <= span``, the largest element offset its shape and strides reach);
2. ``race_free``: no two distinct (program, lane) pairs store to one address (atomics exempt);
3. ``coverage``: every element of each output tensor is written;
4. ``split_coverage``: with a declared split reduction, every reduction index of each output
   contribution is read by exactly one (split, iteration, lane);
5. ``cross_program_raw``: no program loads an element that another program stores (programs run
   in no fixed order, with no barrier between them), for every tensor both loaded and stored;
6. ``int32_no_overflow``: no 32-bit integer add, subtract or multiply wraps, in any lane (masked
   or not: Triton's int32 arithmetic wraps before any mask applies), since a wrapped index would
   make every other proof, done over unbounded integers, meaningless.

An output with a writer witness in its contract (contract.py) gets ``race_free`` and
``coverage`` from the witness (witness.py) when every part of the witness is proved; otherwise
(a witness refuted or not proved, an output with atomic writes) the checks above run as without
one, and the detail says why the witness did not prove the obligation.

``in_bounds`` and ``int32_no_overflow`` first try the stride-term rules (termwise.py): an address split
into index times stride with each index's range one solve, an int32 sum of stride terms bounded term
by term by a domain fact; what they do not show is checked as one formula, as before. A witness
answer is reused for a later constexpr combination posing the very same problem (memo.py).

Statuses: ``proved`` (z3 found no counterexample in the whole domain), ``failed`` with a
concrete counterexample (sizes, program ids, lanes, address), ``bounded(N shapes)`` (no proof
was reached in time; checked exhaustively for N named shapes — never reported as proved), or
``unknown`` with the reason.

**Where no proof is reached, the bounded shapes always run.** The shapes are the contract's
``bounded_shapes`` that its domain admits; where it names none, small ones are drawn
(:meth:`Prover.shapes`: every size in {1, 2, 3} where that is few, then larger ones, then models
z3 finds). An operator z3 does not reason about exactly (``offs & (N - 1)`` with a runtime ``N``,
``|``, ``^``, a shift by a runtime amount: ``lang.opaque``) is traced as an uninterpreted function
with its sound facts: a proof through it holds, a solver model through it is no counterexample, so
such an obligation is settled on the bounded shapes, where numpy evaluates the operator exactly
(``failed`` with the shape, or ``bounded``). A kernel the symbolic tracer cannot follow at all
(control flow on a runtime value, ``while``, ``break``) is run on each bounded shape with every
size and program id a number (concrete.py): ``failed`` with the shape or ``bounded`` again, and
``unknown`` only when that run is impossible too, with both reasons named.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import z3

from . import memo, termwise, witness
from .budget import budgeted
from .contract import LaunchContract, Tensor
from .evaluate import evaluate, instances
from .lang import OPAQUE_PREFIX, SymbolicError, opaque_facts
from .prove_support import Decoder, apps, construct, contiguous_stride, free, gathered, plain
from .tracer import Access, Trace, Tracer
from .values import DATA, lane

RETRY = 8  # budget multiple of the one second chance an undecided solve gets before named shapes
AUTO_SHAPES = 16  # shapes drawn for a contract that names none its domain admits
LADDER = (1, 2, 3, 4, 5, 7, 8, 16, 17, 33)  # the sizes drawn shapes are made of, smallest first
OBLIGATIONS = ("in_bounds", "race_free", "cross_program_raw", "coverage", "split_coverage", "int32_no_overflow")


@dataclass
class Obligation:
    name: str
    subject: str
    status: str  # proved | failed | bounded(N shapes) | unknown
    detail: str = ""
    counterexample: dict[str, Any] | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        # counterexamples from the bounded (numpy) paths carry numpy scalars: every report must serialize
        self.counterexample = plain(self.counterexample)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "status": self.status, "detail": self.detail,
                "counterexample": self.counterexample, "seconds": round(self.seconds, 3)}


@dataclass
class ProofReport:
    contract: str
    constexprs: dict[str, Any]
    obligations: list[Obligation] = field(default_factory=list)

    @property
    def proved(self) -> bool:
        return bool(self.obligations) and all(o.status == "proved" for o in self.obligations)

    def to_json(self) -> dict[str, Any]:
        return {"contract": self.contract, "constexprs": self.constexprs, "proved": self.proved,
                "obligations": [o.to_json() for o in self.obligations]}


class _Instance:
    """Fresh copies of an access's per-instance variables (lanes, program ids, iterations)."""

    def __init__(self, access: Access, pids: Mapping[int, Any], tag: str) -> None:
        self.access = access
        self.lanes = [z3.Int(f"{tag}_lane{d}") for d in range(len(access.shape))]
        self.pids = {a: z3.Int(f"{tag}_pid{a}") for a in pids}
        self.ts = [z3.Int(f"{tag}_{t}") for t, _ in access.loops]
        self.pairs = ([(lane(d), v) for d, v in enumerate(self.lanes)] + [(pids[a], v) for a, v in self.pids.items()]
                      + [(t, v) for (t, _), v in zip(access.loops, self.ts)])

    def sub(self, e: Any) -> Any:
        return z3.substitute(e, *self.pairs) if self.pairs else e

    def constraints(self, grid: tuple) -> list[Any]:
        c = [z3.And(v >= 0, v < n) for v, n in zip(self.lanes, self.access.shape)]
        c += [z3.And(v >= 0, v < grid[a]) if a < len(grid) else v == 0 for a, v in self.pids.items()]
        c += [self.sub(x) for x in self.access.conds]
        return c + [self.sub(self.access.mask)]


def _exact(*accesses: Any) -> bool:
    """Whether a solver model of these accesses is a counterexample (no havocked value, no opaque operator)."""
    return not any(a.havoc or getattr(a, "opaque", False) for a in accesses)


class Prover:
    """The obligations of one constexpr combination of a contract.

    ``only``: the obligations to check (default: all); ``program_races``: a race is two *programs*
    storing to one address (two lanes of one program storing there is not reported), as for a launch
    judged by ``warpsmith check``."""

    def __init__(self, contract: LaunchContract, consts: Mapping[str, Any], timeout_ms: int = 3_000,
                 only: Any = None, program_races: bool = False) -> None:
        self.c, self.consts, self.timeout_ms = contract, dict(consts), timeout_ms
        self.grid = tuple(contract.grid_for(consts))
        self.tensors = contract.tensors()
        self.assume = contract.assumptions(consts)
        self.only = set(only) if only is not None else None
        self.program_races = program_races
        self._shape_cache: list | None = None
        self.opaque = False  # the trace uses an opaque operator (lang.opaque): its facts join every solve

    def wants(self, name: str) -> bool:
        return self.only is None or name in self.only

    # ---- tracing ------------------------------------------------------------------------------
    def trace(self) -> Trace:
        values = {k: t.values for k, t in self.tensors.items() if t.values is not None}
        tracer = Tracer(self.c.name, self.grid, values, self.assume)
        fn = tracer.compile(self.c.kernel)
        from . import lang

        lang._ACTIVE.append(tracer)
        from .values import SymTensor

        kwargs = self.arguments(lambda v: v)
        kwargs.update(self.consts)
        try:
            fn(**kwargs)
        finally:
            lang._ACTIVE.pop()
        for axis in range(len(self.grid)):  # every grid axis is a program coordinate, used or not
            tracer.pid(axis)
        tr = tracer.trace
        self.opaque = any(x.opaque for x in (*tr.accesses, *tr.int32_ops)) or any(
            n.startswith(OPAQUE_PREFIX) for fact, _ in tr.loop_facts for n in _app_names(fact))
        return tr

    def arguments(self, size: Any) -> dict[str, Any]:
        """The kernel's runtime arguments as the tracer takes them: pointers, integers (``size`` maps a
        contract expression to what is passed: itself, or its value on a concrete shape), float
        scalars as data, ``None`` as itself (an optional pointer left out)."""
        from .values import SymTensor

        kwargs: dict[str, Any] = {}
        for name, v in self.c.args.items():
            if isinstance(v, Tensor):
                kwargs[name] = SymTensor(z3.IntVal(0), (), base=name)
            elif v is None:
                kwargs[name] = None
            elif isinstance(v, float):
                kwargs[name] = DATA
            else:
                v = size(v)
                kwargs[name] = SymTensor(v if isinstance(v, z3.ExprRef) else z3.IntVal(int(v)))
        return kwargs

    # ---- solving -------------------------------------------------------------------------------
    def _solve(self, facts: list[Any], extra_assume: list[Any] = (), timeout_ms: int | None = None,
               assume: list[Any] | None = None) -> tuple[str, Any]:
        """sat (with a model) / unsat / unknown (with the reason), trying a small portfolio of z3 set-ups:
        equation solving first (it eliminates the many defined terms a trace produces), then the default.
        ``assume`` replaces the contract's assumptions (a subset: an unsat answer stays sound, a model
        need not satisfy the ones left out)."""
        goal = [*(self.assume if assume is None else assume), *extra_assume, *facts]
        goal += self._value_preconditions(goal)
        reason = ""
        for make in (lambda: z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver(), z3.Solver):
            s = budgeted(make(), (timeout_ms or self.timeout_ms) // 2)  # the budget is shared by both
            s.add(*goal)
            r = s.check()
            if r == z3.sat:
                return "sat", s.model()
            if r == z3.unsat:
                return "unsat", None
            reason = s.reason_unknown()
        return "unknown", reason

    def _value_preconditions(self, facts: list[Any]) -> list[Any]:
        """Declared value ranges of the gather tables read, and the sound facts of every opaque operator."""
        out = ([f for app in apps(facts, OPAQUE_PREFIX, prefix=True) if _closed(app) for f in opaque_facts(app)]
               if self.opaque else [])
        for name, t in self.tensors.items():
            if t.values is None:
                continue
            lo, hi = t.values
            found = apps(facts, f"value_{name}")
            for app in found:
                out.append(z3.And(app >= lo, app < hi))
            if t.monotone:  # offsets in order read values in order
                out += [z3.Implies(a.arg(0) <= b.arg(0), a <= b) for a in found for b in found if a is not b]
        return out

    def _cex(self, model: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
        out = {str(s): model.eval(s, model_completion=True).as_long() for s in self.c.size_symbols()}
        for k, v in extra.items():
            try:
                out[k] = model.eval(v, model_completion=True).as_long()
            except (AttributeError, z3.Z3Exception):
                out[k] = str(model.eval(v, model_completion=True))
        return out

    def _minimize(self, facts: list[Any], model: Any, rounds: int = 12) -> Any:
        """A model with the smallest sizes z3 can show: the sum of the sizes is bisected while a
        counterexample remains (short solves; a solve that times out ends the search, keeping the best)."""
        syms = self.c.size_symbols()
        if not syms:
            return model
        total = sum(syms, z3.IntVal(0))
        lo, hi = len(syms), model.eval(total, model_completion=True).as_long()
        for _ in range(rounds):
            if lo >= hi:
                break
            mid = (lo + hi) // 2
            status, m = self._solve(facts, [total <= mid], timeout_ms=min(self.timeout_ms, 800))
            if status == "sat":
                model, hi = m, m.eval(total, model_completion=True).as_long()
            elif status == "unsat":
                lo = mid + 1
            else:
                break
        return model

    def _instance_terms(self, inst: "_Instance", prefix: str) -> dict[str, Any]:
        """Program ids, lanes and loop iterations of one instance, for a counterexample."""
        out = {f"{prefix}pid{k}": v for k, v in inst.pids.items()}
        out.update({f"{prefix}lane{d}": v for d, v in enumerate(inst.lanes)})
        lines = getattr(inst.access, "loop_lines", [])
        for k, t in enumerate(inst.ts):
            out[f"{prefix}iteration (loop at line {lines[k] if k < len(lines) else '?'})"] = t
        return out

    def _element(self, model: Any, base: str, offset: Any) -> list[int] | str:
        """The tensor index an element offset decomposes to (largest stride first); may lie outside the shape."""
        t = self.tensors[base]
        if not isinstance(offset, int):
            return "?"
        strides = [model.eval(st, model_completion=True) if isinstance(st, z3.ExprRef) else z3.IntVal(st)
                   for st in t.strides]
        strides = [s.as_long() if z3.is_int_value(s) else None for s in strides]
        if None in strides:
            return "?"
        idx, rest = [0] * len(strides), offset
        for d in sorted(range(len(strides)), key=lambda d: -strides[d]):
            if strides[d] > 0:
                idx[d], rest = (rest // strides[d], rest % strides[d]) if rest >= 0 else (-((-rest) // strides[d]), 0)
        return idx

    def shapes(self) -> list[dict[str, int]]:
        """The bounded shapes: the contract's that its domain admits, else drawn ones (the module docstring)."""
        if self._shape_cache is None:
            declared = [dict(sh) for sh in self.c.bounded_shapes if self._admits(sh)]
            self._shape_cache = declared or self._drawn_shapes()
        return self._shape_cache

    def shape_kind(self) -> str:
        """``named`` (the contract's bounded shapes) or ``drawn`` (:meth:`_drawn_shapes`)."""
        return "named" if any(self._admits(sh) for sh in self.c.bounded_shapes) else "drawn"

    def _drawn_shapes(self) -> list[dict[str, int]]:
        """Small shapes in the domain for a contract that names none: every size in {1, 2, 3} (when
        there are at most 81 such shapes), then each rung of ``LADDER`` for all sizes and for one size at
        a time, then models z3 finds with every size at most 256; up to ``AUTO_SHAPES``."""
        syms = [str(s) for s in self.c.size_symbols()]
        if not syms:
            return [{}]  # every size is a number: the one shape there is
        cands: list[tuple[int, ...]] = []
        if 3 ** len(syms) <= 81:
            cands += sorted(itertools.product((1, 2, 3), repeat=len(syms)), key=lambda c: (max(c), sum(c), c))
        for v in LADDER:
            cands.append((v,) * len(syms))
            cands += [tuple(v if j == i else 1 for j in range(len(syms))) for i in range(len(syms))]
        out: list[dict[str, int]] = []
        for c in dict.fromkeys(cands):
            shape = dict(zip(syms, c))
            if self._admits(shape):
                out.append(shape)
                if len(out) >= AUTO_SHAPES:
                    return out
        symbols = self.c.size_symbols()
        s = budgeted(z3.Solver(), 1000)
        s.add(*self.assume, *[x <= 256 for x in symbols])
        for sh in out:
            s.add(z3.Or(*[x != sh[str(x)] for x in symbols]))
        while len(out) < AUTO_SHAPES and s.check() == z3.sat:
            m = s.model()
            sh = {str(x): m.eval(x, model_completion=True).as_long() for x in symbols}
            out.append(sh)
            s.add(z3.Or(*[x != sh[str(x)] for x in symbols]))
        return out

    def _bounded(self, check) -> tuple[str, str, dict | None]:
        """Run ``check(sizes)`` on each bounded shape (:meth:`shapes`): (status, detail, counterexample)."""
        shapes = self.shapes()
        if not shapes:
            return ("unknown", "no proof reached, and no shape satisfies the assumptions with every size at most 256",
                    None)
        for shape in shapes:
            try:
                cex = check(dict(shape))
            except (SymbolicError, KeyError) as exc:
                return "unknown", f"bounded check impossible: {type(exc).__name__}: {exc}", None
            if cex is not None:
                return "failed", f"counterexample at {self.shape_kind()} shape {shape}", cex
        drawn = "" if self.shape_kind() == "named" else " (drawn: the contract names none)"
        return (f"bounded({len(shapes)} shapes)", f"checked exhaustively on{drawn} " + "; ".join(map(str, shapes)),
                None)

    # ---- obligations -----------------------------------------------------------------------------
    def in_bounds(self, tr: Trace, a: Access, i: int) -> Obligation:
        t0 = time.perf_counter()
        inst = _Instance(a, tr.pids, "x")
        off = inst.sub(a.offset)
        bad = z3.Not(z3.And(off >= 0, off <= self.tensors[a.base].span()))
        subject = f"{a.kind} #{i} of {a.base} at {a.where}"
        how = ""
        by_dims, lead = termwise.in_bounds(self, inst.constraints(self.grid), off, self.tensors[a.base],
                                           min(self.timeout_ms, 1500))
        status, m = ("unsat", None) if by_dims else ("unknown", None)
        if by_dims:
            how = "index by index (termwise.py)"
        if lead is not None and status == "unknown":  # an index outside its dimension: is the address outside too?
            fixed = [s == lead.eval(s, model_completion=True) for s in self.c.size_symbols()]
            found, model = self._solve(inst.constraints(self.grid) + [bad], fixed)
            if found == "sat":  # a model of the whole domain, at those sizes: a counterexample
                status, m = found, model
        if status == "unknown":
            status, m = self._solve(inst.constraints(self.grid) + [bad])
        if status == "unsat":
            reach, _ = self._solve(inst.constraints(self.grid))
            if reach == "unsat":  # true only because nothing executes: a mask or loop that is never true
                return Obligation("in_bounds", subject, "unknown", "vacuous: no program, lane or loop iteration "
                                  "executes this access (its mask or enclosing loop is never true)",
                                  seconds=time.perf_counter() - t0)
            return Obligation("in_bounds", subject, "proved", how, seconds=time.perf_counter() - t0)

        def access_cex(model):
            cex = self._cex(model, {**self._instance_terms(inst, ""), "offset": off,
                                    "span": self.tensors[a.base].span(), **gathered(off)})
            cex["element"] = self._element(model, a.base, cex["offset"])
            cex["source"] = f"{a.file}:{a.where.rsplit(':', 1)[-1]}"
            return cex

        if status == "sat" and _exact(a):
            m = self._minimize(inst.constraints(self.grid) + [bad], m)
            return Obligation("in_bounds", subject, "failed", "mask true, address outside the tensor", access_cex(m),
                              time.perf_counter() - t0)

        def concrete(shape):
            if a.opaque and not a.havoc:  # an opaque operator: every instance, evaluated exactly
                return self._in_bounds_enumerated(tr, a, shape)
            fixed = [s == shape[str(s)] for s in self.c.size_symbols() if str(s) in shape]
            st, mm = self._solve(inst.constraints(self.grid) + [bad], fixed)
            if st == "unknown" and not a.havoc:  # not decided at these sizes: every instance, evaluated
                return self._in_bounds_enumerated(tr, a, shape)
            return access_cex(mm) if st == "sat" else None  # the same fields as a quantified counterexample

        st, detail, cex = self._bounded(concrete)
        why = ("depends on a havocked loop value" if a.havoc else
               f"an operator the solver does not model exactly ({_opaque_ops(a)})" if a.opaque else f"solver: {m}")
        return Obligation("in_bounds", subject, st, f"{detail} (no proof: {why})", cex, time.perf_counter() - t0)

    def _in_bounds_enumerated(self, tr: Trace, a: Access, shape: Mapping[str, int]) -> dict | None:
        """Every instance of ``a`` on one concrete shape, evaluated with numpy: the first lane whose mask is
        true and whose address lies outside the tensor, as a counterexample (None: there is none)."""
        env, grid = self._concrete(shape)
        t = self.tensors[a.base]
        span = int(evaluate(t.span(), env, ()))
        strides = [int(evaluate(st, env, ())) for st in t.strides]
        lines = getattr(a, "loop_lines", [])
        for e in instances(a, env, grid, tr.pids):
            mask = np.broadcast_to(evaluate(a.mask, e, a.shape), a.shape)
            offs = np.broadcast_to(evaluate(a.offset, e, a.shape), a.shape)
            bad = mask & ((offs < 0) | (offs > span))
            if not bad.any():
                continue
            at = tuple(int(i) for i in np.argwhere(bad)[0]) if a.shape else ()
            off = int(offs[at]) if a.shape else int(offs)
            cex: dict[str, Any] = dict(shape)
            cex.update({f"pid{ax}": e[str(p)] for ax, p in tr.pids.items()})
            cex.update({f"lane{d}": i for d, i in enumerate(at)})
            for k, (tv, _) in enumerate(a.loops):
                cex[f"iteration (loop at line {lines[k] if k < len(lines) else '?'})"] = e[str(tv)]
            cex.update({"offset": off, "span": span, "element": _decompose(strides, off),
                        "source": f"{a.file}:{a.where.rsplit(':', 1)[-1]}"})
            return cex
        return None

    def _by_witness(self, name: str, tr: Trace, base: str) -> tuple[Obligation | None, str]:
        """``race_free`` or ``coverage`` of ``base`` from its declared writer witness: the obligation when
        the witness proves it (or shows a race through its own writer), else None and a note why not."""
        w = self.c.witness_for(base, self.consts)
        if w is None:
            return None, ""
        t0 = time.perf_counter()
        writes = [a for a in tr.accesses if a.base == base and a.kind in ("store", "atomic")]
        if any(a.kind == "atomic" for a in writes):
            return None, "witness not used: the output has atomic writes (not one writer per element)"
        stores = [a for a in writes if a.kind == "store"]
        key = memo.witness_key(self, name, tr, stores, base, w)  # the same problem in another combination
        res = memo.get(key)
        if res is not None:
            res = witness.Result(res.status, f"{res.detail} (the same witness problem as in an earlier constexpr "
                                 "combination: its answer)", res.counterexample)
        else:
            try:
                res = (witness.race_free if name == "race_free" else witness.coverage)(self, tr, stores, base, w)
            except witness.WitnessError as exc:
                return None, f"witness not used: it does not fit the kernel: {exc}"
            memo.put(key, res)
        if res.status == "failed" and not _exact(*stores):  # a model through an opaque operator: no race shown
            return None, "the witness's race model goes through an operator the solver does not model exactly"
        if res.status in ("proved", "failed"):
            return Obligation(name, base, res.status, res.detail, res.counterexample, time.perf_counter() - t0), ""
        return None, f"{res.detail} [{time.perf_counter() - t0:.1f} s on the witness]"

    def race_free(self, tr: Trace, stores: list[tuple[int, Access]], base: str) -> Obligation:
        done, note = self._by_witness("race_free", tr, base)
        if done is not None:
            return done
        return _noted(self._race_free(tr, stores, base), note)

    def _race_free(self, tr: Trace, stores: list[tuple[int, Access]], base: str) -> Obligation:
        t0 = time.perf_counter()
        for (i, a), (j, b) in itertools.combinations_with_replacement(stores, 2):
            x, y = _Instance(a, tr.pids, "x"), _Instance(b, tr.pids, "y")
            pid_differ = z3.Or(*[x.pids[k] != y.pids[k] for k in x.pids]) if x.pids else z3.BoolVal(False)
            if i == j and not self.program_races:
                distinct = z3.Or(pid_differ, *[u != v for u, v in zip(x.lanes, y.lanes)])
            else:
                distinct = pid_differ
            facts = x.constraints(self.grid) + y.constraints(self.grid) + [x.sub(a.offset) == y.sub(b.offset), distinct]
            status, m = self._solve(facts, timeout_ms=min(self.timeout_ms, 2500))
            if status == "sat" and _exact(a, b):
                m = self._minimize(facts, m)
                cex = self._cex(m, {**self._instance_terms(x, "first."), **self._instance_terms(y, "second."),
                                    "address": x.sub(a.offset), **gathered(x.sub(a.offset))})
                cex["element"] = self._element(m, base, cex["address"])
                cex["source"] = [f"{a.file}:{a.where.rsplit(':', 1)[-1]}", f"{b.file}:{b.where.rsplit(':', 1)[-1]}"]
                return Obligation("race_free", base, "failed", f"stores #{i} and #{j} hit one address", cex,
                                  time.perf_counter() - t0)
            if status != "unsat":
                st, detail, cex = self._bounded(lambda shape: self._race_enumerated(tr, [a, b], shape))
                return Obligation("race_free", base, st, f"{detail} (no proof: {_why(m, a, b)})", cex,
                                  time.perf_counter() - t0)
        return Obligation("race_free", base, "proved", seconds=time.perf_counter() - t0)

    def cross_program_raw(self, tr: Trace, loads: list[tuple[int, Access]], stores: list[tuple[int, Access]],
                          base: str) -> Obligation:
        """No program loads an element another program stores: programs run in no fixed order and
        there is no barrier between them, so such a load reads either value."""
        t0 = time.perf_counter()
        for (i, a), (j, b) in itertools.product(loads, stores):
            x, y = _Instance(a, tr.pids, "x"), _Instance(b, tr.pids, "y")
            pid_differ = z3.Or(*[x.pids[k] != y.pids[k] for k in x.pids]) if x.pids else z3.BoolVal(False)
            facts = x.constraints(self.grid) + y.constraints(self.grid) + [x.sub(a.offset) == y.sub(b.offset), pid_differ]
            status, m = self._solve(facts, timeout_ms=min(self.timeout_ms, 2500))
            if status == "sat" and _exact(a, b):
                m = self._minimize(facts, m)
                cex = self._cex(m, {**self._instance_terms(x, "load."), **self._instance_terms(y, "store."),
                                    "address": x.sub(a.offset)})
                cex["element"] = self._element(m, base, cex["address"])
                cex["source"] = [f"{a.file}:{a.where.rsplit(':', 1)[-1]}", f"{b.file}:{b.where.rsplit(':', 1)[-1]}"]
                return Obligation("cross_program_raw", base, "failed",
                                  f"load #{i} reads what another program's store #{j} writes, with no barrier", cex,
                                  time.perf_counter() - t0)
            if status != "unsat":
                st, detail, cex = self._bounded(lambda shape: self._raw_enumerated(tr, a, b, shape))
                return Obligation("cross_program_raw", base, st, f"{detail} (no proof: {_why(m, a, b)})", cex,
                                  time.perf_counter() - t0)
        return Obligation("cross_program_raw", base, "proved", seconds=time.perf_counter() - t0)

    def _raw_enumerated(self, tr: Trace, load: Access, store: Access, shape: Mapping[str, int]) -> dict | None:
        env, grid = self._concrete(shape)
        owners: dict[int, tuple] = {}
        for e in instances(store, env, grid, tr.pids):
            pid = tuple(e[str(tr.pids[ax])] for ax in sorted(tr.pids))
            for off in evaluate(store.offset, e, store.shape)[evaluate(store.mask, e, store.shape)].tolist():
                owners.setdefault(off, set()).add(pid)
        for e in instances(load, env, grid, tr.pids):
            pid = tuple(e[str(tr.pids[ax])] for ax in sorted(tr.pids))
            for off in evaluate(load.offset, e, load.shape)[evaluate(load.mask, e, load.shape)].tolist():
                other = owners.get(off, set()) - {pid}
                if other:
                    return {**shape, "address": int(off), "load.program": list(pid), "store.program": list(min(other))}
        return None

    def _admits(self, shape: Mapping[str, int]) -> bool:
        """Whether a named shape lies in the domain (guards included)."""
        env = {str(s): shape.get(str(s)) for s in self.c.size_symbols()}
        if None in env.values():
            return False
        return all(bool(evaluate(a, env, ())) for a in self.assume)

    def _concrete(self, shape: Mapping[str, int]) -> tuple[dict, tuple[int, ...]]:
        env = {str(s): shape[str(s)] for s in self.c.size_symbols()}
        grid = tuple(int(evaluate(g, env, ())) for g in self.grid)
        return env, grid

    def _race_enumerated(self, tr: Trace, stores: list[Access], shape: Mapping[str, int]) -> dict | None:
        """Every store instance on one concrete shape: the first address two (program, lane) pairs write."""
        env, grid = self._concrete(shape)
        rows = []  # (offset, program, store statement, lane) per written element
        programs: dict[tuple, int] = {}
        for k, a in enumerate(stores):
            for e in instances(a, env, grid, tr.pids):
                pid = programs.setdefault(tuple(e[str(tr.pids[ax])] for ax in sorted(tr.pids)), len(programs))
                mask = evaluate(a.mask, e, a.shape).ravel()
                offs = evaluate(a.offset, e, a.shape).ravel()
                lanes = np.flatnonzero(mask)
                rows.append(np.stack([offs[lanes], np.full_like(lanes, pid), np.full_like(lanes, k), lanes], axis=1))
        if not rows:
            return None
        t = np.unique(np.concatenate(rows), axis=0)  # one row per (offset, program, statement, lane)
        by_prog = np.unique(t[:, :2], axis=0)  # distinct (offset, program)
        off, counts = np.unique(by_prog[:, 0], return_counts=True)
        clash = off[counts > 1]
        if not len(clash) and not self.program_races:
            same, counts = np.unique(t[:, :3], axis=0, return_counts=True)  # same program and statement
            clash = same[counts > 1][:, 0]
        if not len(clash):
            return None
        who = t[t[:, 0] == clash[0]][:2]  # the first two writers, named as the solver's witness names them
        names = {v: k for k, v in programs.items()}
        cex: dict = {**shape, "address": int(clash[0])}
        for role, (_, prog, k, lane) in zip(("first.", "second."), who.tolist()):
            cex.update({f"{role}{ax}": v for ax, v in zip((f"pid{a}" for a in sorted(tr.pids)), names[prog])})
            cex.update({f"{role}store": f"#{k}", f"{role}flat lane": lane})
        return cex

    def coverage(self, tr: Trace, stores: list[Access], base: str) -> Obligation:
        done, note = self._by_witness("coverage", tr, base)
        if done is not None:
            return done
        return _noted(self._coverage(tr, stores, base), note)

    def _coverage(self, tr: Trace, stores: list[Access], base: str) -> Obligation:
        t0 = time.perf_counter()
        t = self.tensors[base]
        idx = [z3.Int(f"idx{r}") for r in range(len(t.shape))]
        addr = sum((i * st for i, st in zip(idx, t.strides)), z3.IntVal(0))
        written = []
        qvars = []
        for k, a in enumerate(stores):
            inst = _Instance(a, tr.pids, f"w{k}")
            qvars += inst.lanes + list(inst.pids.values()) + inst.ts
            written.append(z3.And(*inst.constraints(self.grid), inst.sub(a.offset) == addr))
        in_range = [z3.And(i >= 0, i < n) for i, n in zip(idx, t.shape)]
        facts = in_range + ([z3.ForAll(qvars, z3.Not(z3.Or(*written)))] if qvars else [z3.Not(z3.Or(*written))])
        status, m = self._solve(facts, timeout_ms=min(self.timeout_ms, 1000))
        if status == "unsat":
            return Obligation("coverage", base, "proved", seconds=time.perf_counter() - t0)
        if status == "sat" and _exact(*stores):
            m = self._minimize(facts, m, rounds=4)
            cex = self._cex(m, {f"index{r}": i for r, i in enumerate(idx)})
            cex["element"] = [cex[f"index{r}"] for r in range(len(idx))]
            return Obligation("coverage", base, "failed", "an output element no program writes", cex,
                              time.perf_counter() - t0)

        def concrete(shape):
            env, grid = self._concrete(shape)
            tshape = tuple(int(evaluate(d, env, ())) for d in t.shape)
            strides = [int(evaluate(s, env, ())) for s in t.strides]
            decode = Decoder(tshape, strides)
            hits = np.zeros(decode.size, dtype=np.int64)
            for a in stores:
                for e in instances(a, env, grid, tr.pids):
                    offs = evaluate(a.offset, e, a.shape)[evaluate(a.mask, e, a.shape)]
                    flat = decode.flat(offs)
                    np.add.at(hits, flat[flat >= 0], 1)
            missing = np.flatnonzero(hits == 0)
            if not len(missing):
                return None
            index = [int(i) for i in np.unravel_index(missing[0], tshape)]
            return {**shape, "index": index, "element": index}

        st, detail, cex = self._bounded(concrete)
        return Obligation("coverage", base, st, f"{detail} (no quantified proof: {_why(m, *stores)})", cex,
                          time.perf_counter() - t0)

    def int32_no_overflow(self, tr: Trace) -> Obligation:
        t0 = time.perf_counter()
        lo, hi = -(2**31), 2**31 - 1
        unproved, seen = [], set()
        # results computed from loaded values of no declared range are maybe float data: they matter
        # only where such a value reaches an address or a mask, and then a possible wrap is unknown
        data_addresses = any(a.data for a in tr.accesses)
        ops = [op for op in tr.int32_ops if not op.data or data_addresses]
        subject = f"{len(ops)} int32 results"
        maybe_data = []
        for op in ops:
            key = (op.expr.get_id(), len(op.loops), op.shape)
            if key in seen:  # the same value computed again (e.g. an index used by a load and a store)
                continue
            seen.add(key)
            inst = _Instance(op, tr.pids, "o")  # an Int32Op has the fields an instance needs
            e = inst.sub(op.expr)
            # a sum of stride terms: first the rule that bounds it term by term by a domain fact (termwise.py)
            if termwise.has_strides(self, e) and termwise.int32(self, inst.constraints(self.grid), e,
                                                                min(self.timeout_ms, 1000)):
                continue
            wraps = inst.constraints(self.grid) + [z3.Or(e < lo, e > hi)]
            status, m = self._solve(wraps, timeout_ms=min(self.timeout_ms, 400))
            if status == "unknown" and (termwise.has_strides(self, e) or not termwise.int32(
                    self, inst.constraints(self.grid), e, min(self.timeout_ms, 1000))):
                # a second chance with RETRY times the budget: an answer near the limit stays stable
                status, m = self._solve(wraps, timeout_ms=min(self.timeout_ms, 400) * RETRY)
                if status == "unknown":
                    unproved.append(op)
            if status == "sat" and op.data:
                maybe_data.append(op)
            elif status == "sat" and op.opaque:  # a model through an opaque operator: evaluated on the shapes
                unproved.append(op)
            elif status == "sat":
                m = self._minimize(wraps, m)
                cex = self._cex(m, {"value": e, **self._instance_terms(inst, "")})
                cex["source"] = f"{op.file}:{op.where.rsplit(':', 1)[-1]}"
                return Obligation("int32_no_overflow", op.where, "failed", "a 32-bit integer result wraps", cex,
                                  time.perf_counter() - t0)
        if maybe_data:
            where = ", ".join(sorted({op.where for op in maybe_data}))
            return Obligation("int32_no_overflow", subject, "unknown",
                              f"int32 results computed from loaded values of no declared range may wrap ({where}); "
                              "declare the tensor's values=(lo, hi)", seconds=time.perf_counter() - t0)
        if not unproved:
            return Obligation("int32_no_overflow", subject, "proved", seconds=time.perf_counter() - t0)

        def concrete(shape):
            env, grid = self._concrete(shape)
            for op in unproved:
                for ev in instances(op, env, grid, tr.pids):
                    v = evaluate(op.expr, ev, op.shape)[evaluate(op.mask, ev, op.shape)]  # past early exits
                    if v.size and (v.min() < lo or v.max() > hi):
                        return {**shape, "at": op.where, "value": int(v.max() if v.max() > hi else v.min())}
            return None

        st, detail, cex = self._bounded(concrete)
        where = ", ".join(sorted({op.where for op in unproved}))
        return Obligation("int32_no_overflow", subject, st, f"{detail} (no quantified proof for {where})", cex,
                          time.perf_counter() - t0)

    def split_coverage(self, tr: Trace) -> Obligation | None:
        sp = self.c.split
        if sp is None:
            return None
        t0 = time.perf_counter()
        t = self.tensors[sp.tensor]
        loads = [a for a in tr.accesses if a.kind == "load" and a.base == sp.tensor]
        subject = f"{sp.tensor} dim {sp.dim} split over grid axis {sp.axis}"
        # Which index a load reads is a property of the kernel's index arithmetic, not of the
        # stride values; it is read off a contiguous layout of the tensor, where the address
        # determines the index uniquely (an overlapping view would make two indices alias).
        contiguous = [st == contiguous_stride(t.shape, r) for r, st in enumerate(t.strides) if isinstance(st, z3.ExprRef)]

        def indices(inst: _Instance, a: Access, tag: str):
            j = [z3.Int(f"{tag}_j{r}") for r in range(len(t.shape))]
            c = [z3.And(v >= 0, v < n) for v, n in zip(j, t.shape)]
            c.append(inst.sub(a.offset) == sum((v * s for v, s in zip(j, t.strides)), z3.IntVal(0)))
            return j, c

        for a, b in itertools.combinations_with_replacement(loads, 2):
            x, y = _Instance(a, tr.pids, "x"), _Instance(b, tr.pids, "y")
            jx, cx = indices(x, a, "x")
            jy, cy = indices(y, b, "y")
            same_key = [x.pids[k] == y.pids[k] for k in x.pids if k != sp.axis]
            same_key += [u == v for r, (u, v) in enumerate(zip(jx, jy))]
            differ = z3.Or(*([x.pids[sp.axis] != y.pids[sp.axis]] if sp.axis in x.pids else []),
                           *[u != v for u, v in zip(x.ts, y.ts)] if a is b else [z3.BoolVal(True)],
                           *[u != v for u, v in zip(x.lanes, y.lanes)] if a is b else [])
            status, m = self._solve(x.constraints(self.grid) + y.constraints(self.grid) + cx + cy + same_key + [differ],
                                    contiguous)
            if status == "sat":
                return Obligation("split_coverage", subject, "failed", "one reduction index is read twice",
                                  self._cex(m, {"index": jx[sp.dim]}), time.perf_counter() - t0)
            if status == "unknown":
                return self._split_cover_all(tr, loads, subject, t0, once_proved=False)
        # every index read: each (output key, row) that is read at all reads every reduction index
        return self._split_cover_all(tr, loads, subject, t0, once_proved=True)

    def _split_cover_all(self, tr: Trace, loads: list[Access], subject: str, t0: float,
                         once_proved: bool) -> Obligation:
        sp, t = self.c.split, self.tensors[self.c.split.tensor]

        def concrete(shape):
            env, grid = self._concrete(shape)
            tshape = tuple(int(evaluate(d, env, ())) for d in t.shape)
            strides = [int(evaluate(s, env, ())) for s in t.strides]
            decode = Decoder(tshape, strides)
            parts = []  # rows: program coordinates except the split axis, the tensor index
            for a in loads:
                for e in instances(a, env, grid, tr.pids):
                    key_p = [e[str(tr.pids[k])] for k in sorted(tr.pids) if k != sp.axis]
                    flat = decode.flat(evaluate(a.offset, e, a.shape)[evaluate(a.mask, e, a.shape)])
                    ix = np.stack(np.unravel_index(flat[flat >= 0], tshape), axis=1) if len(tshape) else flat[:, None]
                    parts.append(np.concatenate([np.tile(np.asarray(key_p, dtype=np.int64), (len(ix), 1)), ix], axis=1))
            if not parts:
                return None
            rows = np.concatenate(parts)
            npk = len(rows[0]) - len(tshape)
            keep = [c for c in range(rows.shape[1]) if c != npk + sp.dim]
            seen: dict[tuple, list[int]] = {}
            for row_key, j in zip(map(tuple, rows[:, keep].tolist()), rows[:, npk + sp.dim].tolist()):
                seen.setdefault(row_key, []).append(j)
            for key, js in seen.items():
                if sorted(js) != list(range(tshape[sp.dim])):
                    return {**shape, "output_key": list(key), "indices_read": sorted(js)[:16]}
            return None

        st, detail, cex = self._bounded(concrete)
        if st.startswith("bounded"):
            detail = ("no index read twice: proved; every index read exactly once: " if once_proved else
                      "every index read exactly once (no quantified proof reached): ") + detail
        return Obligation("split_coverage", subject, st, detail, cex, time.perf_counter() - t0)

    def _safe(self, name: str, subject: str, fn, *args) -> Obligation:
        """An obligation whose check raises is ``unknown`` with the reason, never a crash."""
        try:
            return fn(*args)
        except Exception as exc:
            return Obligation(name, subject, "unknown", f"could not be checked: {construct(exc)}")

    # ---- all of them -----------------------------------------------------------------------------
    def run(self) -> ProofReport:
        rep = ProofReport(self.c.name, self.consts)
        try:
            tr = self.trace()
        except Exception as exc:  # what the tracer cannot model: the bounded shapes, run concretely (concrete.py)
            why = construct(exc)
            status, _ = self._solve([])
            if status == "unsat":
                rep.obligations.append(Obligation("domain", self.c.name, "failed",
                                                  "the contract's domain and guards admit no sizes at all"))
                return rep
            from .concrete import run_concretely

            rep.obligations += run_concretely(self, why)
            return rep
        status, _ = self._solve([])
        if status == "unsat":  # an empty domain would make every obligation vacuously true
            rep.obligations.append(Obligation("domain", self.c.name, "failed",
                                              "the contract's domain and guards admit no sizes at all"))
            return rep
        add = rep.obligations.append
        for i, a in enumerate(tr.accesses):
            if self.wants("in_bounds"):
                add(self._safe("in_bounds", f"{a.kind} #{i} of {a.base} at {a.where}", self.in_bounds, tr, a, i))
        for base, spec in self.tensors.items():
            stores = [(i, a) for i, a in enumerate(tr.accesses) if a.base == base and a.kind == "store"]
            if stores:
                if self.wants("race_free"):
                    add(self._safe("race_free", base, self.race_free, tr, stores, base))
                loads = [(i, a) for i, a in enumerate(tr.accesses) if a.base == base and a.kind == "load"]
                if loads and self.wants("cross_program_raw"):
                    add(self._safe("cross_program_raw", base, self.cross_program_raw, tr, loads, stores, base))
            if spec.output and self.wants("coverage"):
                writes = [a for a in tr.accesses if a.base == base and a.kind in ("store", "atomic")]
                add(self._safe("coverage", base, self.coverage, tr, writes, base) if writes else
                    Obligation("coverage", base, "failed", "the kernel never writes this output"))
        if self.wants("int32_no_overflow"):
            add(self._safe("int32_no_overflow", "int32 results", self.int32_no_overflow, tr))
        if self.c.split is not None and self.wants("split_coverage"):
            add(self._safe("split_coverage", self.c.split.tensor, self.split_coverage, tr))
        sizes = {str(s) for s in self.c.size_symbols()}
        for fact, text in tr.loop_facts if self.wants("loop_step") else ():
            status, m = self._solve([z3.Not(fact)])
            if status == "unsat":
                add(Obligation("loop_step", text, "proved"))
            elif status == "sat" and {str(s) for s in free(fact)} <= sizes and not any(
                    n.startswith(OPAQUE_PREFIX) for n in _app_names(fact)):  # a model through `&` shows nothing
                add(Obligation("loop_step", text, "failed", "the loop step is zero for these sizes", self._cex(m, {})))
            else:
                add(Obligation("loop_step", text, "unknown", f"a symbolic loop step may be zero ({status})"))
        return rep


def prove(contract: LaunchContract, timeout_ms: int = 3_000) -> list[ProofReport]:
    """Prove every constexpr combination of ``contract``."""
    return [Prover(contract, consts, timeout_ms).run() for consts in contract.constexprs]


def _closed(e: Any) -> bool:
    """Whether ``e`` has no variable bound by an enclosing quantifier (a fact about it can stand alone)."""
    seen, todo = set(), [e]
    while todo:
        x = todo.pop()
        if z3.is_var(x):
            return False
        if x.get_id() not in seen:
            seen.add(x.get_id())
            todo.extend(x.children())
    return True


def _decompose(strides: list[int], offset: int) -> list[int]:
    """The index an element offset decomposes to (largest stride first); may lie outside the shape."""
    idx, rest = [0] * len(strides), offset
    for d in sorted(range(len(strides)), key=lambda d: -strides[d]):
        if strides[d] > 0:
            idx[d], rest = (rest // strides[d], rest % strides[d]) if rest >= 0 else (-((-rest) // strides[d]), 0)
    return idx


def _app_names(e: Any) -> set[str]:
    return {x.decl().name() for x in apps([e], "", prefix=True)}


def _why(m: Any, *accesses: Any) -> Any:
    """Why a solve settled nothing: the operator or havocked value a model went through, else the solver's answer."""
    if not isinstance(m, z3.ModelRef):
        return m
    ops = sorted({op for a in accesses if getattr(a, "opaque", False) for op in _opaque_ops(a).split(", ")})
    if ops:
        return f"a model through an operator the solver does not model exactly ({', '.join(ops)})"
    if any(a.havoc for a in accesses):
        return "a model through a havocked loop value"
    return m


def _opaque_ops(a: Any) -> str:
    from .lang import OPAQUE

    names = sorted({n[len(OPAQUE_PREFIX):] for e in (a.offset, a.mask)
                    for n in (x.decl().name() for x in apps([e], OPAQUE_PREFIX, prefix=True))})
    return ", ".join(f"integer `{OPAQUE[n]}`" for n in names) or "?"


def _noted(o: Obligation, note: str) -> Obligation:
    """``o`` with why a declared witness did not prove it."""
    if note:
        o.detail = f"{o.detail}; {note}" if o.detail else note
    return o
