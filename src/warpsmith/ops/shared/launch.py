"""Rules every launcher follows, written once.

- :func:`emulated`: whether a kernel runs with ``EMULATE`` set: under Triton's CPU interpreter, for
  bfloat16 (whose conversions and dots the interpreter gets wrong; see :mod:`.kernel`) or where tf32
  products must be rounded by hand;
- :func:`launch_target`: the target a launcher sizes its grid for (persistent grids): the one given,
  else this machine's;
- :func:`allocate`: the outputs of a launch: those given (checked for count), else fresh tensors of
  the shapes and dtypes the spec declares (:meth:`warpsmith.core.opspec.OpSpec.outputs`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import torch

from ...core._triton import INTERPRET
from ...core.errors import InvalidInputError

if TYPE_CHECKING:
    from ...targets import Target


def emulated(dtype: torch.dtype, tf32: bool = False) -> bool:
    """``EMULATE`` for a kernel computing in ``dtype`` (with tf32 products where ``tf32``)."""
    return INTERPRET and (dtype == torch.bfloat16 or tf32)


def launch_target(target: Target | None = None) -> Target:
    """``target``, else the target of the device kernels run on here."""
    if target is not None:
        return target
    from ...targets import current_device

    return current_device().target


def allocate(out: Any, shapes: Sequence[tuple[tuple[int, ...], torch.dtype]], device: torch.device, *,
             unit_cols: bool = False) -> tuple[torch.Tensor, ...]:
    """The launch's outputs, one per entry of ``shapes`` (a sequence of (shape, dtype), e.g. a spec's
    ``outputs``): uninitialised tensors where ``out`` is None, else ``out`` (a tensor or a sequence),
    checked: tensors of those shapes and dtypes on ``device`` (with unit column stride where
    ``unit_cols``, for outputs the kernels index in 32 bits along a row)."""
    if out is None:
        return tuple(torch.empty(shape, dtype=dt, device=device) for shape, dt in shapes)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != len(shapes) or any(
            not isinstance(o, torch.Tensor) or tuple(o.shape) != tuple(s) or o.dtype != dt or o.device != device
            or (unit_cols and o.dim() > 1 and o.shape[-1] > 1 and o.stride(-1) != 1)
            for o, (s, dt) in zip(outs, shapes)):
        want = ", ".join(f"{tuple(s)} {dt}" for s, dt in shapes)
        raise InvalidInputError("out", f"{len(shapes)} tensor(s): {want}, on {device}"
                                + (", unit column stride" if unit_cols else ""),
                                out if not isinstance(out, torch.Tensor) else
                                f"{tuple(out.shape)} {out.dtype} strides {out.stride()} on {out.device}")
    return outs
