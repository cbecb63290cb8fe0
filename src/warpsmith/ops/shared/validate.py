"""Argument checks shared by the public ops: each raises InvalidInputError naming what was
expected and what was given, before anything is computed."""
from __future__ import annotations

from typing import Sequence

import torch

from ...core.errors import InvalidInputError
from ...core.dtypes import dtype_name


def check_tensor(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise InvalidInputError(name, "a torch.Tensor", type(t).__name__)
    return t


def check_device(name: str, t: torch.Tensor) -> None:
    """Kernels run natively on CUDA tensors, or under Triton's interpreter on CPU tensors."""
    from ...core._triton import INTERPRET

    if not INTERPRET and t.device.type != "cuda":
        raise InvalidInputError(f"device of {name}", "a CUDA tensor (Triton runs natively on this machine)", str(t.device))
    if INTERPRET and t.device.type != "cpu":
        raise InvalidInputError(f"device of {name}", "a CPU tensor (kernels run under Triton's interpreter here)", str(t.device))


def check_dtype(name: str, t: torch.Tensor, allowed: Sequence[torch.dtype]) -> None:
    if t.dtype not in allowed:
        raise InvalidInputError(f"dtype of {name}", "one of " + ", ".join(dtype_name(d) for d in allowed), str(t.dtype))


def check_like(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor, *, shape: tuple[int, ...] | None = None,
               dtype: bool = True) -> None:
    """``t`` on ``ref``'s device, with ``ref``'s dtype (unless ``dtype=False``) and the given shape."""
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise InvalidInputError(f"shape of {name}", str(tuple(shape)), str(tuple(t.shape)))
    if dtype and t.dtype != ref.dtype:
        raise InvalidInputError(f"dtype of {name}", f"{ref.dtype} (as {ref_name})", str(t.dtype))
    if t.device != ref.device:
        raise InvalidInputError(f"device of {name}", f"{ref.device} (as {ref_name})", str(t.device))


def check_nonempty(name: str, t: torch.Tensor, min_dim: int = 1) -> None:
    if t.dim() < min_dim or t.numel() == 0:
        raise InvalidInputError(name, f"a non-empty tensor with at least {min_dim} dimension(s)", f"shape {tuple(t.shape)}")
