"""Roofline: the time an op cannot beat on a target, from its FLOPs and minimum bytes."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.opspec import OpSpec, Problem
from ..targets import Target


def math_kind(dtype: torch.dtype, precision: str = "ieee") -> str:
    """The peak-table entry a dtype's matrix math runs at ("tf32" when fp32 is allowed tf32)."""
    if dtype == torch.float32:
        return "tf32" if precision == "tf32" else "fp32"
    return {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}.get(dtype, "fp8")


@dataclass(frozen=True)
class Roofline:
    flops: float
    bytes: float
    compute_ms: float
    memory_ms: float

    @property
    def bound_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms)

    @property
    def limiter(self) -> str:
        return "compute" if self.compute_ms >= self.memory_ms else "memory"


def roofline(spec: OpSpec, problem: Problem, target: Target, precision: str = "ieee") -> Roofline:
    f, b = spec.flops(problem), spec.min_bytes(problem)
    peak = target.peak(math_kind(problem.dtype, precision)) * 1e12
    return Roofline(f, b, f / peak * 1e3, b / (target.hbm_tbps * 1e12) * 1e3)
