"""Running a candidate under guard: poisoned outputs and scratch, inputs checked unmodified."""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ..kernels.base import Variant, poison_fill, poisoned_allocations
from ..spec import Problem


class HarnessFailure(Exception):
    """The candidate misbehaved (the message names how)."""


def output_like(problem: Problem, device: torch.device) -> torch.Tensor:
    M, N = problem.shape["M"], problem.shape["N"]
    shape = (problem.shape["B"], M, N) if "B" in problem.shape else (M, N)
    return poison_fill(torch.empty(shape, dtype=problem.dtype, device=device))


def run_guarded(variant: Variant, problem: Problem, config: Mapping[str, Any],
                inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Launch into a NaN-poisoned output (scratch poisoned too); fail if inputs changed or output is odd."""
    device = next(iter(inputs.values())).device
    before = {k: v.clone() for k, v in inputs.items()}
    out = output_like(problem, device)
    with poisoned_allocations():
        result = variant.launch(inputs, problem, config, out=out)
    if device.type == "cuda":
        torch.cuda.synchronize()
    if result is not out:
        raise HarnessFailure("launcher returned a tensor other than the output it was given")
    if type(result) is not torch.Tensor:
        raise HarnessFailure(f"output is a {type(result).__name__}, not a plain torch.Tensor")
    for k, v in inputs.items():
        if not torch.equal(v, before[k]) and not (v.is_floating_point() and torch.equal(v.isnan(), before[k].isnan())
                                                  and torch.equal(v.nan_to_num(), before[k].nan_to_num())):
            raise HarnessFailure(f"input {k!r} was modified")
    return result


def unwritten(out: torch.Tensor, ref64: torch.Tensor) -> int:
    """Elements still holding the NaN poison where the oracle is a number."""
    return int((torch.isnan(out) & ~torch.isnan(ref64.to(out.device))).sum())
