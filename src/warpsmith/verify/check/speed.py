"""Timing a candidate against its reference on a GPU (CUDA events; nothing is timed on a CPU).

Both run through :func:`warpsmith.measure.timing.time_gpu`: warm-up, an L2 flush before each
timed call, and the median of many calls. They cycle through three distinct input sets drawn
from the first workload. Destination-passing candidates get one set of destination buffers
per input set. The speedup is the reference's median over the candidate's.
"""
from __future__ import annotations

from typing import Any

import torch

from .formats import Candidate, CheckProblem
from ...core.variant import poison_fill

INPUT_SETS = 3


def time_candidate(problem: CheckProblem, cand: Candidate, device: torch.device,
                   gen: torch.Generator) -> dict[str, Any]:
    """Median CUDA-event times of reference and candidate, and the speedup."""
    from ...measure.timing import time_gpu

    w = problem.workloads[0]
    sets = [problem.draw_inputs(w, gen, problem.distributions[0], device) for _ in range(INPUT_SETS)]
    outs = [[poison_fill(t) for t in problem.allocate_outputs(w, device)] if cand.destination_passing
            and problem.allocate_outputs is not None else None for _ in sets]
    with torch.no_grad():
        ref_t = time_gpu(lambda a: problem.run_reference(a), sets)
        cand_t = time_gpu(lambda a: cand.call(a[0], a[1]), list(zip(sets, outs)))
    return {"kind": "measured", "device": torch.cuda.get_device_name(device), "workload": w.label,
            "reference_ms": ref_t.median_ms, "candidate_ms": cand_t.median_ms,
            "speedup": ref_t.median_ms / max(cand_t.median_ms, 1e-9), "runs": cand_t.runs}
