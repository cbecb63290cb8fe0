"""The bounded shapes of a kernel the symbolic tracer cannot follow, run with every size and program id a number.

The symbolic trace refuses what it cannot model for all sizes at once: control flow on a runtime value
(``if N > 64``, ``while start < N``), ``break``/``continue``/``return`` inside a loop, a block pointer
re-made in a loop. On one concrete shape none of that is symbolic any more: the sizes are numbers and so,
program by program, are the program ids, so every branch and loop bound is a number and the kernel runs
as the Python it is (``Tracer(concrete=True)``: no loop rewriting, every iteration traced). Only the lanes
stay symbolic, and each recorded access is evaluated for every lane with numpy (evaluate.py), exactly.

So on each bounded shape (:meth:`Prover.shapes`) every access the run reaches is checked: ``in_bounds``
(per statement), ``race_free`` (two programs, or two lanes, storing to one address; atomics exempt),
``cross_program_raw``, ``coverage`` of outputs and ``int32_no_overflow``. An obligation ends ``failed``
with the first shape and instance that breaks it, else ``bounded(N shapes)``: never ``proved``. A
statement no shape reaches (behind a branch no shape takes) is not listed. What cannot run even so (an
index from ``tl.cumsum``, control flow on loaded data, a ``tl`` function the tracer does not know) stays
``unknown``, with both reasons named. Shapes with more than ``MAX_PROGRAMS`` programs are left out
(each program is one run of the kernel's Python).
"""
from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np
import z3

from .evaluate import evaluate
from .prove_support import Decoder, construct
from .tracer import Trace, Tracer

MAX_PROGRAMS = 4096  # programs of one shape run concretely (each is one run of the kernel's Python)
INT32 = (-(2**31), 2**31 - 1)


class _Statement:
    """One access statement (kind, tensor, line) over every program and shape run."""

    def __init__(self, index: int, kind: str, base: str, where: str, file: str) -> None:
        self.index, self.kind, self.base, self.where, self.file = index, kind, base, where, file
        self.cex: dict | None = None
        self.impossible = ""

    @property
    def subject(self) -> str:
        return f"{self.kind} #{self.index} of {self.base} at {self.where}"

    @property
    def source(self) -> str:
        return f"{self.file}:{self.where.rsplit(':', 1)[-1]}"


def run_concretely(prover: Any, why: str) -> list[Any]:
    """The obligations of ``prover``'s contract checked on its bounded shapes by concrete runs (module
    docstring); ``why`` is the reason the symbolic trace stopped, named in every detail."""
    from .prove import Obligation

    t0 = time.perf_counter()
    c = prover.c
    shapes = prover.shapes()
    head = f"the symbolic tracer could not model the kernel ({why})"
    if not shapes:
        return [Obligation("trace", c.name, "unknown", f"{head}; and no shape satisfies the assumptions with every "
                                                       "size at most 256, so none was run concretely")]
    values = {k: t.values for k, t in prover.tensors.items() if t.values is not None}
    tracer = Tracer(c.name, (), values, prover.assume, concrete=True)
    statements: dict[tuple, _Statement] = {}
    races: dict[str, dict | None] = {}
    raws: dict[str, dict | None] = {}
    uncovered: dict[str, dict | None] = {}
    broken: dict[str, str] = {}  # tensor -> why its race/coverage check could not be completed
    int32_cex: dict | None = None
    run, skipped = [], []
    failure = ""
    from . import lang

    for shape in shapes:
        env, grid = prover._concrete(shape)
        if math.prod(grid) > MAX_PROGRAMS:
            skipped.append(shape)
            continue
        tracer.grid_exprs = tuple(z3.IntVal(g) for g in grid)
        kwargs = prover.arguments(lambda v: int(evaluate(v, env, ())) if isinstance(v, z3.ExprRef) else v)
        kwargs.update(prover.consts)
        tensors = {}
        for name, t in prover.tensors.items():
            tshape = tuple(int(evaluate(d, env, ())) for d in t.shape)
            strides = [int(evaluate(s, env, ())) for s in t.strides]
            tensors[name] = (tshape, strides, int(evaluate(t.span(), env, ())))
        rows: dict[str, list] = {}  # tensor -> [offset, program, statement, lane] rows of its stores
        loads: dict[str, list] = {}  # tensor -> [offset, program] rows of its loads
        written: dict[str, list] = {}  # tensor -> offsets stores and atomics write
        programs = list(itertools.product(*(range(g) for g in grid)))
        try:
            fn = tracer.compile(c.kernel)
            for p, pids in enumerate(programs):
                tracer.trace, tracer.concrete_pids, tracer.path = Trace(c.name), pids, []
                lang._ACTIVE.append(tracer)
                try:
                    fn(**kwargs)
                finally:
                    lang._ACTIVE.pop()
                _program(prover, tracer.trace, shape, pids, p, tensors, statements, rows, loads, written, broken)
                if int32_cex is None and prover.wants("int32_no_overflow"):
                    int32_cex = _int32(tracer.trace, shape, pids)
        except Exception as exc:  # noqa: BLE001 - what even a concrete run cannot model
            failure = f"{head}; nor run on the bounded shape {shape} with every size and program id a number: " \
                      f"{construct(exc)}"
            break
        run.append(shape)
        for base in rows:
            if races.get(base) is None:
                races[base] = _race(rows[base], shape, programs, prover.program_races)
        for base in loads:
            if base in rows and raws.get(base) is None:
                raws[base] = _raw(loads[base], rows[base], shape, programs)
        for base, t in prover.tensors.items():
            if t.output and uncovered.get(base) is None and base in written:
                uncovered[base] = _uncovered(written[base], tensors[base], shape)

    out = []
    took = lambda: time.perf_counter() - t0  # noqa: E731
    if failure and not run:
        return [Obligation("trace", c.name, "unknown", failure, seconds=took())]
    n = len(run)
    note = f"run concretely on {n} shape(s): {head}"
    if skipped:
        note += f"; {len(skipped)} shape(s) with more than {MAX_PROGRAMS} programs left out"
    if failure:
        note += f"; stopped: {failure}"

    def status(cex: dict | None, impossible: str = "") -> tuple[str, str, dict | None]:
        if cex is not None:
            return "failed", f"counterexample at {prover.shape_kind()} shape {_shape_of(cex, shapes)} ({note})", cex
        if impossible:
            return "unknown", f"bounded check impossible: {impossible} ({note})", None
        if failure or not n:
            return "unknown", note if n else f"no bounded shape could be run ({note})", None
        return f"bounded({n} shapes)", f"checked exhaustively, {note}: " + "; ".join(map(str, run)), None

    for st in sorted(statements.values(), key=lambda s: s.index):
        if prover.wants("in_bounds"):
            out.append(Obligation("in_bounds", st.subject, *status(st.cex, st.impossible), seconds=took()))
    for base, t in prover.tensors.items():
        if prover.wants("race_free") and base in races:
            out.append(Obligation("race_free", base, *status(races[base], broken.get(base, "")), seconds=took()))
        if prover.wants("cross_program_raw") and base in raws:
            out.append(Obligation("cross_program_raw", base, *status(raws[base], broken.get(base, "")),
                                  seconds=took()))
        if t.output and prover.wants("coverage") and n:
            if base not in written:
                out.append(Obligation("coverage", base, "failed", f"no run writes this output ({note})",
                                      {**run[0], "index": [0] * len(t.shape)}, seconds=took()))
            else:
                out.append(Obligation("coverage", base, *status(uncovered.get(base), broken.get(base, "")),
                                      seconds=took()))
    if prover.wants("int32_no_overflow") and n:
        out.append(Obligation("int32_no_overflow", "int32 results", *status(int32_cex), seconds=took()))
    if failure:
        out.append(Obligation("trace", c.name, "unknown", failure, seconds=took()))
    return out


def _shape_of(cex: dict, shapes: list[dict]) -> dict:
    keys = set().union(*shapes) if shapes else set()
    return {k: cex[k] for k in cex if k in keys}


def _program(prover: Any, tr: Trace, shape: dict, pids: tuple, p: int, tensors: dict, statements: dict,
             rows: dict, loads: dict, written: dict, broken: dict) -> None:
    """One program's accesses, evaluated lane by lane: in-bounds counterexamples, and the rows the race,
    read-after-write and coverage checks of the shape use."""
    for a in tr.accesses:
        key = (a.kind, a.base, a.where)
        st = statements.get(key)
        if st is None:
            st = statements[key] = _Statement(len(statements), a.kind, a.base, a.where, a.file)
        try:
            mask = np.broadcast_to(evaluate(a.mask, {}, a.shape), a.shape).ravel()
            offs = np.broadcast_to(evaluate(a.offset, {}, a.shape), a.shape).ravel()
        except Exception as exc:  # noqa: BLE001 - a gathered value in the address, say
            st.impossible = st.impossible or construct(exc)
            broken.setdefault(a.base, f"{st.subject}: {construct(exc)}")
            continue
        tshape, strides, span = tensors[a.base]
        lanes = np.flatnonzero(mask)
        if st.cex is None:
            bad = lanes[(offs[lanes] < 0) | (offs[lanes] > span)]
            if len(bad):
                at = np.unravel_index(int(bad[0]), a.shape) if a.shape else ()
                off = int(offs[bad[0]])
                from .prove import _decompose

                st.cex = {**shape, **{f"pid{ax}": v for ax, v in enumerate(pids)},
                          **{f"lane{d}": int(i) for d, i in enumerate(at)},
                          "offset": off, "span": span, "element": _decompose(strides, off), "source": st.source}
        if a.kind == "store":
            rows.setdefault(a.base, []).append(np.stack([offs[lanes], np.full_like(lanes, p),
                                                         np.full_like(lanes, st.index), lanes], axis=1))
        if a.kind in ("store", "atomic"):
            written.setdefault(a.base, []).append(offs[lanes])
        if a.kind == "load":
            loads.setdefault(a.base, []).append(np.stack([offs[lanes], np.full_like(lanes, p)], axis=1))


def _race(parts: list, shape: dict, programs: list, program_races: bool) -> dict | None:
    """Two programs (or, unless ``program_races``, two lanes of one statement) storing to one address."""
    t = np.unique(np.concatenate(parts), axis=0)
    if not len(t):
        return None
    by_prog = np.unique(t[:, :2], axis=0)
    off, counts = np.unique(by_prog[:, 0], return_counts=True)
    clash = off[counts > 1]
    if not len(clash) and not program_races:
        same, counts = np.unique(t[:, :3], axis=0, return_counts=True)
        clash = same[counts > 1][:, 0]
    if not len(clash):
        return None
    who = t[t[:, 0] == clash[0]][:2]
    cex: dict = {**shape, "address": int(clash[0])}
    for role, (_, prog, k, lane) in zip(("first.", "second."), who.tolist()):
        cex.update({f"{role}pid{ax}": v for ax, v in enumerate(programs[prog])})
        cex.update({f"{role}store": f"#{k}", f"{role}flat lane": lane})
    return cex


def _raw(load_parts: list, store_parts: list, shape: dict, programs: list) -> dict | None:
    """A load of an element another program stores (no barrier orders them)."""
    stores = np.unique(np.concatenate(store_parts)[:, :2], axis=0)
    owners: dict[int, set] = {}
    for off, prog in stores.tolist():
        owners.setdefault(off, set()).add(prog)
    for off, prog in np.unique(np.concatenate(load_parts), axis=0).tolist():
        other = owners.get(off, set()) - {prog}
        if other:
            return {**shape, "address": int(off), "load.program": list(programs[prog]),
                    "store.program": list(programs[min(other)])}
    return None


def _uncovered(parts: list, tensor: tuple, shape: dict) -> dict | None:
    tshape, strides, _ = tensor
    decode = Decoder(tshape, strides)
    hits = np.zeros(decode.size, dtype=np.int64)
    for offs in parts:
        flat = decode.flat(offs)
        hits[flat[flat >= 0]] = 1
    missing = np.flatnonzero(hits == 0)
    if not len(missing):
        return None
    index = [int(i) for i in np.unravel_index(missing[0], tshape)]
    return {**shape, "index": index, "element": index}


def _int32(tr: Trace, shape: dict, pids: tuple) -> dict | None:
    lo, hi = INT32
    for op in tr.int32_ops:
        if op.data:
            continue
        try:
            v = np.broadcast_to(evaluate(op.expr, {}, op.shape), op.shape)[
                np.broadcast_to(evaluate(op.mask, {}, op.shape), op.shape)]
        except Exception:  # noqa: BLE001 - a value of a gathered load: not an index here
            continue
        if v.size and (v.min() < lo or v.max() > hi):
            return {**shape, **{f"pid{ax}": p for ax, p in enumerate(pids)}, "at": op.where,
                    "value": int(v.max() if v.max() > hi else v.min())}
    return None
