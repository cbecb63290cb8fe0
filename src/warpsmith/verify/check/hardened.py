"""The hardened harness: run a candidate beside its reference so that gaming the check fails.

**Protocol.**

1. Load the reference (trusted). Import Triton, which picks the interpreter where there is no
   GPU. Take a :class:`~.guards.PatchGuard` snapshot.
2. Load the candidate, and compare the snapshot (``no_patching``).
3. Warm up: one call on inputs drawn now, after the load, like every input set. Threads it
   leaves behind, such as a compile pool, are tolerated; nothing else about it is.
4. For each workload, run ``--trials`` trials, cycling through the distributions (KernelBench:
   ``native``, normal, uniform, outliers, tiny; FlashInfer: the last four). Each trial:
   - draws fresh inputs. Trial 1 writes its draw *into trial 0's input tensors*, so the
     candidate sees the same buffers holding new values (the memoization probe). Other trials
     use new tensors, allocated while the previous trial's are still alive.
   - runs the reference on a copy, in the working dtype, and on float64 copies (the oracle).
   - poisons the allocator with 0xFF bytes at the outputs' sizes. Destination buffers and
     every Python-side ``torch.empty*`` during the call are NaN-filled.
   - calls the candidate under ``torch.no_grad()``, synchronizes the current stream,
     snapshots the outputs, and compares the patch snapshot.
   - checks that no thread the call started is still running. It then sleeps ``settle_s``,
     synchronizes the whole device, and checks that the outputs are unchanged.
   - checks types, shapes, dtypes and layout, then aliasing and input integrity, then the
     history against the previous call (stale buffers, memoization, constant outputs). Last
     come poison left in the outputs and the error contract, judged on the values the outputs
     held at return.
5. Call once more, on new tensors holding trial 0's values. The result must be bitwise equal
   to trial 0's (``deterministic``, unless declared), and must not be trial 0's output object
   (a value-keyed cache: ``memoized``).
6. On a GPU, if the candidate is accepted, time it and the reference with CUDA events
   (:mod:`.speed`). On a CPU, timing is ``not measured (no GPU)``.

A patch, an exception, a tensor subclass, a lazy output or a wrong shape stops the run, and
the checks not reached are ``skipped``. Every patch is undone before ``check`` returns, whether
it was detected or not.

**Limits.** An in-process harness cannot stop a determined attacker. Such an attacker can patch
and restore between two of our observations, edit our snapshot through ``gc``, or detect the
poison mode and evade it. What we do about it:

- the snapshot covers the namespaces that matter, after loading and after every call;
- the comparison code binds its torch functions and builtins at import, so patching
  ``torch.equal`` or ``builtins.isinstance`` cannot bend a comparison;
- the guard's logic is a closure made at snapshot time;
- a patch undone before the call returns cannot touch our comparisons, which all run after it;
- everything is restored at the end.

Three more limits:

- A value-keyed cache that returns *copies* looks like recomputation on a CPU.
- A candidate that hangs is not interrupted.
- Integer outputs cannot show poison, so they must equal the reference exactly instead.

For hostile code, run ``warpsmith check`` in a throwaway process or container.
"""
from __future__ import annotations

import time
from builtins import all, any, enumerate, isinstance, len, set, type, zip  # pinned against later patches
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from ...core.errors import InvalidInputError
from . import flashinfer, kernelbench, solution  # noqa: F401  (imported before the snapshot, so guarded)
from .compare import bitwise_equal, dense, describe, identity, judge, same_layout, shares_memory, snapshot, unwritten
from .formats import (Candidate, CandidateError, CheckProblem, Workload, as_outputs, load_candidate, load_problem,
                      parse_overrides)
from ...core.variant import poison_fill
from .guards import PatchGuard, PoisonEmpty, live_threads, poison_allocator, settle
from .report import CheckReport, Ledger
from .speed import time_candidate

_perf_counter = time.perf_counter
_Tensor = torch.Tensor
SETTLE_S = 0.05


class _Stop(Exception):
    """A failure after which no further observation means anything."""


@dataclass
class _Call:
    workload: Workload
    dist: str
    inputs: list[Any]
    saved: list[Any]
    ref: tuple[Any, ...]
    oracle: tuple[Any, ...]
    outs: tuple[Any, ...]
    snaps: tuple[Any, ...]


def _nbytes(ref: Sequence[Any]) -> list[int]:
    return [r.numel() * r.element_size() for r in ref if isinstance(r, _Tensor)]


class _Session:
    def __init__(self, problem: CheckProblem, cand: Candidate, ledger: Ledger, guard: PatchGuard, device: torch.device,
                 settle_s: float) -> None:
        self.problem, self.cand, self.ledger, self.guard = problem, cand, ledger, guard
        self.device, self.settle_s = device, settle_s
        self.calls = 0
        self.signatures: dict[str, list[str]] = {}

    # ---- one guarded call ---------------------------------------------------------------------
    def guard_check(self, when: str) -> None:
        changes = self.guard.changes()
        if changes:
            self.guard.restore()
            more = f" (+{len(changes) - 4} more)" if len(changes) > 4 else ""
            self.ledger.fail("no_patching", f"{when}: " + "; ".join(changes[:4]) + more)
            raise _Stop("monkey_patch")
        self.ledger.ok("no_patching")

    def _destinations(self, w: Workload) -> list[torch.Tensor] | None:
        if not self.cand.destination_passing:
            return None
        if self.problem.allocate_outputs is None:
            raise InvalidInputError("candidate", "value-returning for this format", "destination-passing")
        return [poison_fill(t) for t in self.problem.allocate_outputs(w, self.device)]

    def _invoke(self, args: list[Any], dps: list[torch.Tensor] | None, sizes: list[int],
                watch: bool = True) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        poison_allocator(sizes, self.device)
        before = set(live_threads())
        self.calls += 1
        try:
            with torch.no_grad(), PoisonEmpty():
                result = self.cand.call(args, dps)
        except (Exception, SystemExit) as e:
            self.guard_check("during a call that raised")
            self.ledger.fail("runs", f"the call raised {type(e).__name__}: {e}")
            raise _Stop("candidate_error") from None
        if self.device.type == "cuda":
            torch.cuda.current_stream().synchronize()
        outs = tuple(dps) if dps is not None else as_outputs(result, self.problem.output_names)
        snaps = tuple(snapshot(o) if type(o) is _Tensor and not o.is_meta else None for o in outs)
        self.guard_check("after a call")
        self.ledger.ok("runs")
        if watch:
            started = [t.name for t in live_threads() if t not in before and t.is_alive()]
            settle(self.settle_s, self.device)
            changed = [i for i, (o, s) in enumerate(zip(outs, snaps)) if s is not None and not bitwise_equal(o, s)]
            why = [f"thread(s) {', '.join(started)} started by the call still running after it returned"
                   ] if started else []
            self.ledger.record("synchronous", why + [f"output {i} changed after the call returned" for i in changed])
        return outs, snaps

    # ---- per-call checks ----------------------------------------------------------------------
    def _validate(self, outs: tuple[Any, ...], ref: tuple[Any, ...]) -> None:
        for i, o in enumerate(outs):
            if type(o) is not _Tensor and isinstance(o, _Tensor):
                self.ledger.fail("plain_tensor", f"output {i} is a {type(o).__qualname__}, a torch.Tensor subclass")
                raise _Stop("tensor_subclass")
        self.ledger.ok("plain_tensor")
        for i, o in enumerate(outs):
            if not isinstance(o, _Tensor):
                lazy = (" (it defines __torch_function__: a deferred proxy)"
                        if hasattr(type(o), "__torch_function__") else "")
                self.ledger.fail("materialized", f"output {i} is a {type(o).__qualname__}, not a tensor{lazy}")
                raise _Stop("lazy_output")
            if o.is_meta or o.device != ref[0].device:
                self.ledger.fail("materialized", f"output {i} is on {o.device}, the reference's on {ref[0].device}")
                raise _Stop("lazy_output")
        self.ledger.ok("materialized")
        if len(outs) != len(ref):
            self.ledger.fail("shape", f"{len(outs)} outputs returned, the reference returns {len(ref)}")
            raise _Stop("wrong_shape")
        for i, (o, r) in enumerate(zip(outs, ref)):
            if tuple(o.shape) != tuple(r.shape):
                self.ledger.fail("shape", f"output {i} has shape {list(o.shape)}, the reference's {list(r.shape)}")
                raise _Stop("wrong_shape")
        self.ledger.ok("shape")
        bad = [f"output {i} is {describe(o)}, the reference's {describe(r)}" for i, (o, r) in enumerate(zip(outs, ref))
               if o.dtype != r.dtype]
        self.ledger.record("dtype", bad)
        bad = []
        for i, (o, r) in enumerate(zip(outs, ref)):
            if o.layout != torch.strided or not dense(o):
                bad.append(f"output {i} is not dense and strided (strides {list(o.stride())})")
            elif r.is_contiguous() and not o.is_contiguous():
                bad.append(f"output {i} has strides {list(o.stride())}; the reference's output is contiguous "
                           f"({list(r.stride())})")
        self.ledger.record("layout", bad)

    def _aliasing(self, outs: tuple[Any, ...], args: list[Any], dps: list[torch.Tensor] | None,
                  dps_meta: list[tuple]) -> None:
        bad, state = [], self.cand.state()
        for i, o in enumerate(outs):
            bad += [f"output {i} shares memory with input {j}" for j, a in enumerate(args)
                    if isinstance(a, _Tensor) and shares_memory(o, a)]
            bad += [f"outputs {j} and {i} share memory" for j in range(i) if shares_memory(o, outs[j])]
            if any(shares_memory(o, p) for p in state):
                bad.append(f"output {i} shares memory with a parameter or buffer of the candidate")
        if dps is not None:
            bad += [f"destination buffer {i} was rebound to other memory" for i, (t, m) in enumerate(zip(dps, dps_meta))
                    if identity(t) != m]
        self.ledger.record("no_aliasing", bad)

    def _inputs(self, args: list[Any], saved: list[Any], meta: list[Any]) -> None:
        bad = []
        for j, (a, s, m) in enumerate(zip(args, saved, meta)):
            if isinstance(a, _Tensor) and (identity(a) != m or not bitwise_equal(a, s)):
                n = int((a != s).sum()) if a.shape == s.shape and a.dtype == s.dtype else a.numel()
                bad.append(f"input {j} was modified ({n} of {s.numel()} elements differ, or its shape, strides or "
                           f"storage changed)")
        self.ledger.record("inputs_unmodified", bad)

    def _history(self, prev: _Call, outs: tuple[Any, ...], snaps: tuple[Any, ...], ref: tuple[Any, ...],
                 refill: bool) -> None:
        stale = [f"output {i} of the previous call changed during this call"
                 for i, (p, ps) in enumerate(zip(prev.outs, prev.snaps)) if ps is not None and not bitwise_equal(p, ps)]
        stale += [f"output {i} reuses the memory of the previous call's output" for i, o in enumerate(outs)
                  if any(isinstance(p, _Tensor) and shares_memory(o, p) for p in prev.outs)]
        self.ledger.record("fresh_buffers", stale)
        repeated = [i for i, (r, pr, s, ps) in enumerate(zip(ref, prev.ref, snaps, prev.snaps))
                    if not bitwise_equal(r, pr) and s is not None and bitwise_equal(s, ps)]
        if refill:
            if repeated:
                self.ledger.fail("not_memoized", f"after the inputs were overwritten in place with new values, "
                                 f"output {repeated[0]} is bitwise the previous call's result although the "
                                 "reference's changed")
            else:
                self.ledger.ok("not_memoized")
        elif any(not bitwise_equal(r, pr) for r, pr in zip(ref, prev.ref)):
            if repeated:
                self.ledger.fail("not_constant", f"output {repeated[0]} is bitwise identical for two different inputs "
                                 f"({prev.dist} and the next draw, in new tensors) although the reference's differs")
            else:
                self.ledger.ok("not_constant")

    def _values(self, call: _Call) -> None:
        where = f"{call.dist} inputs, workload {call.workload.label}"
        for i, (s, r, y) in enumerate(zip(call.snaps, call.ref, call.oracle)):
            holes = unwritten(s, r)
            if holes:
                self.ledger.fail("fully_written", f"{holes} of {s.numel()} elements of output {i} are NaN where the "
                                 f"reference has numbers ({where}; outputs and new allocations are NaN-poisoned)")
            else:
                self.ledger.ok("fully_written")
            ok, msg = judge(s, r, y)
            if ok:
                self.ledger.ok("error_contract")
            else:
                self.ledger.fail("error_contract", f"output {i}, {where}: {msg}")

    # ---- the protocol -------------------------------------------------------------------------
    def _reference(self, w: Workload, saved: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        try:
            ref = self.problem.run_reference([snapshot(a) for a in saved])
            oracle = self.problem.run_oracle([snapshot(a) for a in saved])
        except InvalidInputError:
            raise
        except Exception as e:
            raise InvalidInputError("reference", "to run on the drawn inputs", f"{type(e).__name__}: {e}") from None
        if not all(isinstance(r, _Tensor) for r in (*ref, *oracle)) or len(ref) != len(oracle):
            raise InvalidInputError("reference outputs", "tensors", [describe(r) for r in ref])
        if self.problem.allocate_outputs is not None and w.label not in self.signatures:
            want = self.problem.allocate_outputs(w, self.device)
            if [describe(t) for t in want] != [describe(r) for r in ref]:
                raise InvalidInputError("reference outputs", "the shapes and dtypes definition.json declares: "
                                        + ", ".join(describe(t) for t in want), [describe(r) for r in ref])
        return ref, oracle

    def _trial(self, w: Workload, dist: str, gen: torch.Generator, prev: _Call | None, refill: bool) -> _Call:
        fresh = self.problem.draw_inputs(w, gen, dist, self.device)
        if refill and prev is not None and same_layout(prev.inputs, fresh):
            args = prev.inputs
            for i, (a, b) in enumerate(zip(args, fresh)):
                if isinstance(a, _Tensor):
                    a.copy_(b)
                else:
                    args[i] = b
        else:
            args, refill = fresh, False
        saved = [snapshot(a) for a in args]
        meta = [identity(a) if isinstance(a, _Tensor) else None for a in args]
        ref, oracle = self._reference(w, saved)
        self.signatures.setdefault(w.label, [describe(a) for a in args])
        dps = self._destinations(w)
        dps_meta = [identity(t) for t in dps] if dps is not None else []
        outs, snaps = self._invoke(args, dps, _nbytes(ref))
        self._validate(outs, ref)
        self._aliasing(outs, args, dps, dps_meta)
        self._inputs(args, saved, meta)
        if prev is not None:
            self._history(prev, outs, snaps, ref, refill)
        call = _Call(w, dist, args, saved, ref, oracle, outs, snaps)
        self._values(call)
        return call

    def run(self, trials: int, gen: torch.Generator) -> None:
        w0 = self.problem.workloads[0]
        warm = self.problem.draw_inputs(w0, gen, self.problem.distributions[0], self.device)
        self._invoke(warm, self._destinations(w0), [], watch=False)
        first: _Call | None = None
        for w in self.problem.workloads:
            prev = None
            for k in range(trials):
                dist = self.problem.distributions[k % len(self.problem.distributions)]
                prev = self._trial(w, dist, gen, prev, refill=(k == 1))
                first = first or prev
        if first is not None:
            self._repeat(first)
        if self.ledger.seen["not_constant"] == 0:
            self.ledger.skip("not_constant", "no two trials on new tensors whose reference outputs differ "
                                             "(needs at least 3 trials per workload)")

    def _repeat(self, first: _Call) -> None:
        args = [snapshot(a) for a in first.saved]
        dps = self._destinations(first.workload)
        outs, snaps = self._invoke(args, dps, _nbytes(first.ref))
        self._validate(outs, first.ref)
        reused = [i for i, o in enumerate(outs)
                  if any(isinstance(p, _Tensor) and shares_memory(o, p) for p in first.outs)]
        if reused and not self.ledger.has_failed("fresh_buffers"):
            self.ledger.fail("not_memoized", "a repeat of the first trial's input values, in new tensors, returned "
                             f"the first trial's output object (output {reused[0]}): a cache keyed on values")
        elif not reused:
            self.ledger.ok("not_memoized")
        same = all(s is not None and bitwise_equal(s, fs) for s, fs in zip(snaps, first.snaps))
        if self.cand.nondeterministic:
            self.ledger.skip("deterministic", "declared nondeterministic; two calls on identical inputs were "
                             + ("bitwise equal" if same else "different"))
        elif same:
            self.ledger.ok("deterministic")
        else:
            diff = [i for i, (s, fs) in enumerate(zip(snaps, first.snaps)) if s is None or not bitwise_equal(s, fs)]
            self.ledger.fail("deterministic", f"two calls on identical inputs differ bitwise (output {diff[0]}), and "
                             "the candidate does not declare itself nondeterministic")


def check(reference: str | Path, candidate: str | Path, *, trials: int | None = None, seed: int = 0,
          overrides: Sequence[str] | dict[str, Any] | None = None, settle_s: float = SETTLE_S,
          device: str | torch.device | None = None, timing: bool = True) -> CheckReport:
    """Run every hardened check of CANDIDATE against REFERENCE (see the module docstring).

    Args:
        reference: a KernelBench ``.py`` file, or a FlashInfer-Bench problem folder.
        candidate: a KernelBench ``.py`` file with ``ModelNew``, or a ``solution.json`` (or its folder).
        trials: input draws per workload (default: one per distribution).
        seed: seeds weight initialisation and every input draw.
        overrides: ``--set`` items, ``["NAME=VALUE", ...]`` or a mapping.
        settle_s: the pause before outputs are re-read for late writes.
        device: where to run (default: CUDA when available, else CPU).
        timing: time candidate and reference on a GPU when the candidate is accepted.

    Raises:
        InvalidInputError: the files are unusable (the CLI's exit code 2).
    """
    t0 = _perf_counter()
    from ...core import _triton  # noqa: F401  (decides the interpreter before any candidate imports triton)

    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sets = parse_overrides(overrides)
    if trials is not None and trials < 1:
        raise InvalidInputError("--trials", "a positive integer", trials)
    problem = load_problem(reference, sets, seed=seed, device=dev)
    per_workload = trials or len(problem.distributions)
    ledger, guard, cand, session = Ledger(), PatchGuard(), None, None
    stopped: str | None = None
    timing_doc: dict[str, Any] = {"kind": "not measured", "reason": "no GPU" if dev.type != "cuda" else "rejected"}
    try:
        try:
            cand = load_candidate(candidate, problem, device=dev)
        except CandidateError as e:
            ledger.fail("runs", str(e))
            stopped = "candidate_error"
        changes = guard.changes()
        if changes:
            guard.restore()
            ledger.fail("no_patching", "after loading the candidate: " + "; ".join(changes[:4]))
            stopped = "monkey_patch"
        else:
            ledger.ok("no_patching")
        if cand is not None and stopped is None:
            session = _Session(problem, cand, ledger, guard, dev, settle_s)
            gen = torch.Generator().manual_seed(seed + 0x5EED)
            try:
                session.run(per_workload, gen)
            except _Stop as stop:
                stopped = str(stop)
            if stopped is None and timing and dev.type == "cuda" and not ledger.failed:
                try:
                    timing_doc = time_candidate(problem, cand, dev, gen)
                except Exception as e:
                    ledger.fail("runs", f"a timed call raised {type(e).__name__}: {e}")
                    stopped = "candidate_error"
                try:
                    session.guard_check("after timing")
                except _Stop as stop:
                    stopped = str(stop)
    finally:
        guard.restore()
        if cand is not None:
            cand.cleanup()
    problem_doc = {"name": problem.name, "overrides": problem.overrides, "distributions": list(problem.distributions),
                   "workloads": [{"label": w.label, "axes": dict(w.axes),
                                  "inputs": session.signatures.get(w.label) if session else None}
                                 for w in problem.workloads], **problem.info}
    return CheckReport(reference=str(reference), candidate=str(candidate), format=problem.format, device=str(dev),
                       seed=seed, trials=per_workload, problem=problem_doc, checks=ledger.results(stopped),
                       timing=timing_doc, elapsed_s=_perf_counter() - t0, calls=session.calls if session else 0,
                       complete=stopped is None)
