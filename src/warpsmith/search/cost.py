"""Cost models behind one function: the predicted time of a variant's config on a target."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import WarpsmithError
from ..kernels.base import Variant
from ..spec import Problem
from ..targets import Target
from . import gemm_model


def predict_ms(variant: Variant, problem: Problem, config: Mapping[str, Any], target: Target) -> float:
    """Predicted milliseconds; ``inf`` where the config cannot run (validity or guard)."""
    if variant.rejection(problem, config, target):
        return float("inf")
    if variant.op == "matmul":
        return gemm_model.predict_ms(variant.name, problem, config, target, variant.smem_bytes(problem, config))
    raise WarpsmithError(f"no cost model for op {variant.op!r}: expected one of matmul")
