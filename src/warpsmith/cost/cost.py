"""Cost models behind one function: the predicted time of a variant's config on a target.

A variant names its model in ``cost_model``: ``"gemm"`` (tile model, cost/gemm_model.py) or
``"conv"`` (the tile model on an implicit GEMM), ``"comm"`` (the collectives' alpha-beta model with
programs and chunk size, cost/comm_model.py, through the variant's ``predict_ms``), ``"memory"`` (bytes against bandwidth, occupancy and tails, cost/memory_model.py, fed by the
variant's ``work``). Given the compiler's facts about the config (``ConfigFacts``: registers,
spills, shared memory, pipelining, from a static compile or a real one), the models use them in
place of their own estimates, and a config the compiler says spills, or whose ``num_stages`` has
no effect, is not a candidate (``inf``).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..core.errors import WarpsmithError
from ..core.variant import Variant
from ..core.opspec import Problem
from ..targets import ConfigFacts, Target
from . import gemm_model, memory_model

_MODELS: dict[str, Callable[[Variant, Problem, Mapping[str, Any], Target, ConfigFacts | None], float]] = {
    "gemm": lambda v, p, c, t, f: gemm_model.predict_ms(v.name, p, c, t, v.smem_bytes(p, c), f),
    "memory": lambda v, p, c, t, f: memory_model.predict_ms(memory_model.with_facts(v.work(p, c, t), f), t),
    # implicit-GEMM convolutions: the tile model on the equivalent GEMM (variant.gemm_problem), whose A
    # operand is the unmaterialized im2col matrix, so the re-reads the window and stride imply count
    "conv": lambda v, p, c, t, f: gemm_model.predict_ms("splitk" if c.get("SPLIT_K", 1) > 1 else "tiled",
                                                        v.gemm_problem(p), {"GROUP_M": 1, **c}, t,
                                                        v.smem_bytes(p, c), f),
    # collectives: the alpha-beta model with programs and chunk size (cost/comm_model.py), via the variant
    "comm": lambda v, p, c, t, f: v.predict_ms(p, c),
}


def predict_ms(variant: Variant, problem: Problem, config: Mapping[str, Any], target: Target,
               facts: ConfigFacts | None = None) -> float:
    """Predicted milliseconds; ``inf`` where the config cannot run (validity, guard, or the compiler's
    word in ``facts``)."""
    if variant.rejection(problem, config, target) or (facts is not None and facts.rejection(config)):
        return float("inf")
    if variant.cost_model not in _MODELS:
        raise WarpsmithError(f"variant {variant.op}/{variant.name} names cost model {variant.cost_model!r}: "
                             f"expected one of {', '.join(_MODELS)}")
    return _MODELS[variant.cost_model](variant, problem, config, target, facts)
