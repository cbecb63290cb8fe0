"""Running a candidate under guard: poisoned outputs and scratch, inputs checked unmodified."""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ..core.opspec import OpSpec, Problem, as_tuple
from ..core.variant import Variant, poison_fill, poisoned_allocations


class HarnessFailure(Exception):
    """The candidate misbehaved (the message names how)."""


def output_like(spec: OpSpec, problem: Problem, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The op's outputs, allocated and filled with NaN (integers: -1)."""
    return tuple(poison_fill(torch.empty(shape, dtype=dtype, device=device))
                 for shape, dtype in spec.outputs(problem))


def takes_target(variant: Variant) -> bool:
    """Whether the variant's launcher sizes its grid for a ``target`` it is given (persistent grids)."""
    import inspect

    return "target" in inspect.signature(variant.launch).parameters


def run_guarded(spec: OpSpec, variant: Variant, problem: Problem, config: Mapping[str, Any],
                inputs: Mapping[str, torch.Tensor], target: Any = None) -> tuple[torch.Tensor, ...]:
    """Launch into NaN-poisoned outputs (scratch poisoned too); fail if inputs changed or an output is odd.

    The launcher gets ``out=`` a tensor for a one-output op, else a tuple (and ``target=`` where it
    takes one and ``target`` is given); returns the outputs as a tuple.
    """
    device = next(iter(inputs.values())).device
    before = {k: v.clone() for k, v in inputs.items()}
    outs = output_like(spec, problem, device)
    try:
        with poisoned_allocations():
            extra = {"target": target} if target is not None and takes_target(variant) else {}
            result = variant.launch(inputs, problem, config, out=outs[0] if len(outs) == 1 else outs, **extra)
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - a candidate that raises is rejected, never a crash of the verifier
        first = " ".join(str(exc).split())[:300]
        raise HarnessFailure(f"the launch raised {type(exc).__name__}: {first}") from exc
    results = as_tuple(result)
    if len(results) != len(outs) or any(r is not o for r, o in zip(results, outs)):
        raise HarnessFailure("launcher returned tensors other than the outputs it was given")
    for r in results:
        if type(r) is not torch.Tensor:
            raise HarnessFailure(f"output is a {type(r).__name__}, not a plain torch.Tensor")
    for k, v in inputs.items():
        if v.is_floating_point() and v.element_size() == 1:  # fp8: the bytes (no nan_to_num for fp8)
            same = torch.equal(v.view(torch.uint8), before[k].view(torch.uint8))
        else:
            same = torch.equal(v, before[k]) or (v.is_floating_point() and torch.equal(v.isnan(), before[k].isnan())
                                                 and torch.equal(v.nan_to_num(), before[k].nan_to_num()))
        if not same:
            raise HarnessFailure(f"input {k!r} was modified")
    return results


# bound at import, so a candidate that patches torch later cannot change the test (the check harness
# runs foreign code and shares it)
_isnan, _logical_and, _logical_not, _sum = torch.isnan, torch.logical_and, torch.logical_not, torch.sum


def unwritten(out: torch.Tensor, ref: torch.Tensor) -> int:
    """Elements of a float ``out`` still holding the NaN poison where ``ref`` (the oracle, or the
    reference) is a number; 0 for other dtypes and for a shape that differs (judged elsewhere)."""
    if not out.is_floating_point() or tuple(out.shape) != tuple(ref.shape):
        return 0
    ref = ref.to(out.device)
    return int(_sum(_logical_and(_isnan(out), _logical_not(_isnan(ref)))))
