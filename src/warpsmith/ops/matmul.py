"""``warpsmith.ops.matmul``: validate, then call the ``warpsmith::matmul`` custom op."""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import InvalidInputError
from ..runtime.matmul_op import matmul_op
from ..spec.dtypes import dtype_name
from ..spec.matmul import ACTIVATIONS, MATMUL
from .validate import check_device, check_tensor as _check_tensor


def matmul(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None) -> torch.Tensor:
    """``act(a @ b + bias)`` with the best verified kernel for this shape (else the heuristic default).

    Args:
        a: (M, K) or (B, M, K); any strides.
        b: (K, N), or (B, K, N) when ``a`` is batched; any strides.
        bias: optional (N,), added before the activation.
        activation: None, "relu", "gelu" (erf form) or "silu".

    Returns:
        (M, N) or (B, M, N), contiguous, in the inputs' dtype (float16, bfloat16 or float32).

    Raises:
        InvalidInputError: wrong types, ranks, sizes, dtypes or devices (nothing is computed).
    """
    a, b = _check_tensor("a", a), _check_tensor("b", b)
    act = "none" if activation is None else activation
    if act not in ACTIVATIONS:
        raise InvalidInputError("activation", "None or one of " + ", ".join(ACTIVATIONS[1:]), activation)
    if a.dim() not in (2, 3):
        raise InvalidInputError("a", "a 2-D (M, K) or 3-D (B, M, K) tensor", f"{a.dim()}-D tensor of shape {tuple(a.shape)}")
    if b.dim() not in (2, 3) or (b.dim() == 3 and a.dim() != 3):
        raise InvalidInputError("b", "a 2-D (K, N) tensor, or 3-D (B, K, N) when a is 3-D",
                                f"{b.dim()}-D tensor of shape {tuple(b.shape)} with a of shape {tuple(a.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise InvalidInputError("inner dimensions", f"b.shape[-2] == a.shape[-1] == {a.shape[-1]}", b.shape[-2])
    if b.dim() == 3 and a.shape[0] != b.shape[0]:
        raise InvalidInputError("batch size of b", f"{a.shape[0]} (as a)", b.shape[0])
    if min(a.shape) < 1 or min(b.shape) < 1:
        raise InvalidInputError("sizes", "every dimension >= 1", f"a {tuple(a.shape)}, b {tuple(b.shape)}")
    if a.dtype not in MATMUL.dtypes:
        raise InvalidInputError("dtype of a", "one of " + ", ".join(dtype_name(d) for d in MATMUL.dtypes), str(a.dtype))
    if b.dtype != a.dtype:
        raise InvalidInputError("dtype of b", f"{a.dtype} (as a)", str(b.dtype))
    if b.device != a.device:
        raise InvalidInputError("device of b", f"{a.device} (as a)", str(b.device))
    if bias is not None:
        bias = _check_tensor("bias", bias)
        if bias.shape != (b.shape[-1],):
            raise InvalidInputError("bias", f"a 1-D tensor of shape ({b.shape[-1]},)", tuple(bias.shape))
        if bias.dtype != a.dtype:
            raise InvalidInputError("dtype of bias", f"{a.dtype} (as a)", str(bias.dtype))
        if bias.device != a.device:
            raise InvalidInputError("device of bias", f"{a.device} (as a)", str(bias.device))
    check_device("a", a)
    return matmul_op(a, b, bias, act)


__all__ = ["matmul"]
