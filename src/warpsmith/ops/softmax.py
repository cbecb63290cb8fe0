"""``warpsmith.ops.softmax`` and ``warpsmith.ops.log_softmax`` over the last dimension."""
from __future__ import annotations

import torch

from ..runtime.softmax_ops import log_softmax_op, softmax_op
from ..spec.softmax import SOFTMAX
from .validate import check_device, check_dtype, check_nonempty, check_tensor


def _validate(x: object) -> torch.Tensor:
    x = check_tensor("x", x)
    check_nonempty("x", x, min_dim=1)
    check_dtype("x", x, SOFTMAX.dtypes)
    check_device("x", x)
    SOFTMAX.problem({"M": x.numel() // x.shape[-1], "N": x.shape[-1]}, x.dtype)  # sizes within the axes' range
    return x


def softmax(x: torch.Tensor) -> torch.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` over the last dimension, with the best verified kernel
    for the shape (else the heuristic default: single pass where the row fits, else online).

    Computed in fp32 whatever the dtype, rounded once to x's dtype. NaN/Inf as torch.softmax: a row
    holding a NaN or +inf, or only -inf, is NaN. Differentiable (the backward is the
    ``warpsmith::softmax_backward`` op on the saved output).

    Args:
        x: (..., N), float32, float16 or bfloat16, non-empty. Any strides: rows are handed to the
            kernel as strided views where ``x.reshape(-1, N)`` is a view (a copy otherwise).

    Returns:
        (..., N), contiguous, in x's dtype.

    Raises:
        InvalidInputError: not a tensor, empty or 0-d, another dtype or device (nothing is computed).
    """
    return softmax_op(_validate(x))


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """``(x - max) - log(sum(exp(x - max)))`` over the last dimension; see :func:`softmax`.

    NaN/Inf as torch.log_softmax: a -inf entry among finite ones gives -inf; a row holding a NaN
    or +inf, or only -inf, is NaN. The backward is ``warpsmith::log_softmax_backward``.

    Args:
        x: (..., N), float32, float16 or bfloat16, non-empty, any strides (as :func:`softmax`).

    Returns:
        (..., N), contiguous, in x's dtype.

    Raises:
        InvalidInputError: not a tensor, empty or 0-d, another dtype or device (nothing is computed).
    """
    return log_softmax_op(_validate(x))


__all__ = ["softmax", "log_softmax"]
