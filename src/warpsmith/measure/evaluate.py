"""Scoring candidates: predicted by the cost model, or compiled and timed on the GPU.

Every score is a time in ms; a candidate that cannot run (validity predicate, guard, compile
error, out of resources, a launch error) scores ``inf`` with the reason kept, never a crash.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from ..core.variant import Variant
from ..cost.cost import predict_ms
from ..core.opspec import OpSpec, Problem
from ..targets import Target
from .timing import time_gpu

_ROTATE_BYTES = 1 << 30  # rotate input sets while they fit in this much memory


@dataclass
class Score:
    variant: str
    config: dict[str, Any]
    predicted_ms: float
    measured_ms: float | None = None
    error: str | None = None

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
    _inputs: list[dict[str, torch.Tensor]] = field(default_factory=list, init=False)

    # ---- prediction ---------------------------------------------------------------------
    def predict(self, point: Mapping[str, Any]) -> Score:
        v = self.variants[point["variant"]]
        cfg = {k: x for k, x in point.items() if k != "variant"}
        why = v.rejection(self.problem, cfg, self.target)
        return Score(v.name, cfg, math.inf if why else predict_ms(v, self.problem, cfg, self.target), error=why)

    # ---- measurement ----------------------------------------------------------------------
    def inputs(self) -> list[dict[str, torch.Tensor]]:
        if not self._inputs:
            gen = torch.Generator().manual_seed(self.seed)
            n = max(1, min(4, _ROTATE_BYTES // max(1, int(self.spec.min_bytes(self.problem)))))
            self._inputs = [self.spec.make_inputs(self.problem, gen, device="cuda") for _ in range(n)]
        return self._inputs

    def _first_run(self, s: Score) -> Score:
        """Compile (first launch) one candidate; errors become inf with the reason."""
        try:
            self.variants[s.variant].launch(self.inputs()[0], self.problem, s.config)
        except Exception as exc:  # compile errors, OutOfResources, launch failures: scored, never raised
            s.error, s.measured_ms = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}", math.inf
        return s

    def evaluate(self, points: Sequence[Mapping[str, Any]]) -> list[Score]:
        scores = [self.predict(p) for p in points]
        if not self.measured:
            return scores
        runnable = [s for s in scores if s.error is None]
        with ThreadPoolExecutor(max_workers=self.compile_workers) as pool:  # parallel compilation
            list(pool.map(self._first_run, runnable))
        torch.cuda.synchronize()
        for s in runnable:  # a failure in a worker thread is confirmed serially before it counts
            if s.error is not None:
                s.error, s.measured_ms = None, None
                self._first_run(s)
        torch.cuda.synchronize()
        for s in runnable:
            if s.error is None:
                v, cfg = self.variants[s.variant], s.config
                try:
                    s.measured_ms = time_gpu(lambda x: v.launch(x, self.problem, cfg), self.inputs(), max_ms=100).median_ms
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
