"""Scoring candidates: predicted by the cost model, or compiled and timed on the GPU.

Every score is a time in ms; a candidate that cannot run (validity predicate, guard, compile
error, out of resources, a launch error) scores ``inf`` with the reason kept, never a crash. So
does one the compiler says spills or cannot pipeline: measured, from the kernels its first launch
compiled; predicted, from a static compile for the target (``facts``), whose registers, shared
memory and pipelining then feed the cost model. A
measured batch starts no candidate (compilation or timing) once its deadline has passed: the rest
score ``inf`` with the reason ``"deadline"``.

The measured inputs (a few rotated sets, drawn from ``seed``) are built once, before the compile
threads start, and shared by every candidate.
"""
from __future__ import annotations

import contextlib
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Mapping, Sequence

import torch

from ..core.opspec import OpSpec, Problem
from ..core.variant import Variant
from ..cost.cost import predict_ms
from ..targets import ConfigFacts, Target
from ..targets.compiler import kernel_facts, kernel_sass, recording
from .timing import time_gpu

_ROTATE_BYTES = 1 << 30  # rotate input sets while they fit in this much memory
MEASURE_MAX_MS = 100.0  # timing budget of one candidate (time_gpu reduces its runs and warm-up to fit)
DEADLINE = "deadline"  # the error of candidates not started because the deadline had passed


def expired(deadline: float | None) -> bool:
    """Whether the deadline (a ``time.perf_counter()`` value; None: none) has passed."""
    return deadline is not None and time.perf_counter() >= deadline


def span(trace: Any, name: str, track: str | None = None, **args: Any) -> ContextManager[dict[str, Any]]:
    """A span recorded on ``trace`` (a ``warpsmith.profile.trace.TraceRecorder``, passed in by the caller;
    ``track`` None: the calling thread's), or nothing where ``trace`` is None. Yields a dict whose
    entries join the span's args."""
    return trace.span(name, track, **args) if trace is not None else contextlib.nullcontext({})


COMPILE_WORKER = "compile-only worker"  # the trace track of predicted candidates' compiles


def _count_sass(launches: Sequence[Any]) -> list[Any] | None:
    """Each launched kernel's machine code counted (``targets.compiler.sass``; the learned ranker's
    static-model features), or None where any kernel's cannot be (no nvdisasm, no cubin)."""
    try:
        counts = [kernel_sass(launch.kernel) for launch in launches]
    except Exception:  # nvdisasm missing or failing: the facts stand without it
        return None
    return counts if counts and all(c is not None for c in counts) else None


@dataclass
class Score:
    variant: str
    config: dict[str, Any]
    predicted_ms: float
    measured_ms: float | None = None
    error: str | None = None
    facts: ConfigFacts | None = None  # what the compiler made of the config, where known
    sass: list[Any] | None = None  # each kernel's machine code counted (SassCounts), where it could be

    @property
    def ms(self) -> float:
        return self.measured_ms if self.measured_ms is not None else self.predicted_ms


@dataclass
class Evaluator:
    spec: OpSpec
    problem: Problem
    variants: Mapping[str, Variant]
    target: Target
    measured: bool
    seed: int = 0
    compile_workers: int = 8
    # predicted scoring: the compiler's facts per config (warpsmith.targets.compiler.CompilerFacts), or None
    facts: Callable[[Variant, Problem, Mapping[str, Any]], ConfigFacts | None] | None = None
    # a trace recorder (``warpsmith.profile.trace.TraceRecorder``): compile and measure spans per candidate
    trace: Any = None
    _inputs: list[dict[str, torch.Tensor]] = field(default_factory=list, init=False)

    # ---- prediction ---------------------------------------------------------------------
    def predict(self, point: Mapping[str, Any], compile: bool = False) -> Score:
        """The cost model's score; with ``compile`` (and a ``facts`` provider), from the compiler's facts
        about the config, which also reject it where it spills or cannot pipeline."""
        v = self.variants[point["variant"]]
        cfg = {k: x for k, x in point.items() if k != "variant"}
        why = v.rejection(self.problem, cfg, self.target)
        facts = None
        if compile and why is None and self.facts:
            before = getattr(self.facts, "compiled", 0)
            with span(self.trace, "compile", COMPILE_WORKER, variant=v.name, config=cfg) as out:
                facts = self.facts(v, self.problem, cfg)
                out["cached"] = getattr(self.facts, "compiled", 0) == before
        why = why or (facts.rejection(cfg) if facts else None)
        with span(self.trace if compile else None, "predict", variant=v.name, config=cfg) as out:  # not prescreens
            ms = math.inf if why else predict_ms(v, self.problem, cfg, self.target, facts)
            out.update(predicted_ms=ms, rejected=why)
        return Score(v.name, cfg, ms, error=why, facts=facts)

    # ---- measurement ----------------------------------------------------------------------
    def inputs(self) -> list[dict[str, torch.Tensor]]:
        """The rotated input sets, built on first use (serially: ``evaluate`` builds them before its
        compile threads start)."""
        if not self._inputs:
            gen = torch.Generator().manual_seed(self.seed)
            n = max(1, min(4, _ROTATE_BYTES // max(1, int(self.spec.min_bytes(self.problem)))))
            self._inputs = [self.spec.make_inputs(self.problem, gen, device="cuda") for _ in range(n)]
        return self._inputs

    def _first_run(self, s: Score, inputs: Mapping[str, torch.Tensor], deadline: float | None) -> Score:
        """Compile (first launch) one candidate unless the deadline has passed; errors become inf with
        the reason."""
        if expired(deadline):
            s.error, s.measured_ms = DEADLINE, math.inf
            return s
        try:
            with span(self.trace, "compile", variant=s.variant, config=s.config), recording() as launches:
                self.variants[s.variant].launch(inputs, self.problem, s.config)
            s.facts = ConfigFacts(tuple(kernel_facts(launch) for launch in launches)) if launches else None
            s.sass = _count_sass(launches)
        except Exception as exc:  # compile errors, OutOfResources, launch failures: scored, never raised
            s.error, s.measured_ms = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}", math.inf
            return s
        why = s.facts.rejection(s.config) if s.facts else None
        if why:  # the compiler says it spills or cannot pipeline: not timed
            s.error, s.measured_ms = why, math.inf
        return s

    def evaluate(self, points: Sequence[Mapping[str, Any]], deadline: float | None = None) -> list[Score]:
        """Score ``points`` (predicted, or compiled in parallel and timed). Measured, no candidate is
        started once ``deadline`` (``time.perf_counter()``) has passed; those left score inf (``"deadline"``)."""
        scores = [self.predict(p, compile=not self.measured) for p in points]
        if not self.measured:
            return scores
        runnable = [s for s in scores if s.error is None]
        sets = self.inputs()  # built here, once, before the compile threads share them
        with ThreadPoolExecutor(max_workers=self.compile_workers) as pool:  # parallel compilation
            list(pool.map(lambda s: self._first_run(s, sets[0], deadline), runnable))
        torch.cuda.synchronize()
        for s in runnable:  # a failure in a worker thread is confirmed serially before it counts
            if s.error is not None and s.error != DEADLINE:
                s.error, s.measured_ms = None, None
                self._first_run(s, sets[0], deadline)
        torch.cuda.synchronize()
        for s in runnable:
            if s.error is None and expired(deadline):
                s.error, s.measured_ms = DEADLINE, math.inf
            if s.error is None:
                v, cfg = self.variants[s.variant], s.config
                try:
                    with span(self.trace, "measure", variant=s.variant, config=cfg) as out:
                        s.measured_ms = time_gpu(lambda x: v.launch(x, self.problem, cfg), sets,
                                                 max_ms=MEASURE_MAX_MS).median_ms
                        out["measured_ms"] = s.measured_ms
                except Exception as exc:
                    s.error, s.measured_ms = f"{type(exc).__name__}: {exc}"[:200], math.inf
        for s in scores:
            if s.error is not None and s.measured_ms is None:
                s.measured_ms = math.inf
        return scores

    def baseline_ms(self) -> float | None:
        """The reference (plain PyTorch, e.g. ``torch.matmul`` + epilogue) timed in the same run."""
        if not self.measured:
            return None
        return time_gpu(lambda x: self.spec.reference(x, self.problem.attrs), self.inputs()).median_ms
