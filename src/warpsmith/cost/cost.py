"""Cost models behind one function: the predicted time of a variant's config on a target.

A variant names its model in ``cost_model``: ``"gemm"`` (tile model, cost/gemm_model.py) or
``"memory"`` (bytes against bandwidth, occupancy and tails, cost/memory_model.py, fed by the
variant's ``work``).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..core.errors import WarpsmithError
from ..core.variant import Variant
from ..core.opspec import Problem
from ..targets import Target
from . import gemm_model, memory_model

_MODELS: dict[str, Callable[[Variant, Problem, Mapping[str, Any], Target], float]] = {
    "gemm": lambda v, p, c, t: gemm_model.predict_ms(v.name, p, c, t, v.smem_bytes(p, c)),
    "memory": lambda v, p, c, t: memory_model.predict_ms(v.work(p, c, t), t),
}


def predict_ms(variant: Variant, problem: Problem, config: Mapping[str, Any], target: Target) -> float:
    """Predicted milliseconds; ``inf`` where the config cannot run (validity or guard)."""
    if variant.rejection(problem, config, target):
        return float("inf")
    if variant.cost_model not in _MODELS:
        raise WarpsmithError(f"variant {variant.op}/{variant.name} names cost model {variant.cost_model!r}: "
                             f"expected one of {', '.join(_MODELS)}")
    return _MODELS[variant.cost_model](variant, problem, config, target)
