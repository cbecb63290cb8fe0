"""``warpsmith.ops.softmax`` and ``warpsmith.ops.log_softmax`` over the last dimension.

``warpsmith::softmax``, ``warpsmith::log_softmax`` and their ``_backward`` ops: torch.library custom
ops (last dimension, any leading dimensions), fake (meta) kernels and autograd.

The forward ops save their output; their backward calls the matching ``_backward`` op on it
(``dx = y (dy - sum(dy y))``, or ``dy - exp(y) sum(dy)`` for log-softmax). The backward ops have
no autograd of their own (no double backward).
"""
from __future__ import annotations

import torch

from ...core.opspec import Problem
from ...dispatch import launch
from ..shared.validate import check_device, check_dtype, check_nonempty, check_tensor
from .spec import SOFTMAX, SPECS
from .variant import VARIANTS

_SPECS = {s.name: s for s in SPECS}


def rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as (M, N) rows of its last dimension: a view where the strides allow, else a copy."""
    return t.reshape(-1, t.shape[-1])


def problem_of(op: str, t: torch.Tensor) -> Problem:
    """The Problem a (validated) call on ``t`` solves: M rows of N = t.shape[-1]."""
    n = t.shape[-1]
    return _SPECS[op].problem({"M": t.numel() // n, "N": n}, t.dtype, {})


def _forward(op: str, x: torch.Tensor) -> torch.Tensor:
    x2 = rows(x)
    return launch(problem_of(op, x2), VARIANTS, {"x": x2}).view(x.shape)


def _backward_op(op: str, y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y2, dy2 = rows(y), rows(dy)
    return launch(problem_of(op, y2), VARIANTS, {"y": y2, "dy": dy2}).view(y.shape)


@torch.library.custom_op("warpsmith::softmax", mutates_args=())
def softmax_op(x: torch.Tensor) -> torch.Tensor:
    return _forward("softmax", x)


@torch.library.custom_op("warpsmith::log_softmax", mutates_args=())
def log_softmax_op(x: torch.Tensor) -> torch.Tensor:
    return _forward("log_softmax", x)


@torch.library.custom_op("warpsmith::softmax_backward", mutates_args=())
def softmax_backward_op(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return _backward_op("softmax_backward", y, dy)


@torch.library.custom_op("warpsmith::log_softmax_backward", mutates_args=())
def log_softmax_backward_op(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return _backward_op("log_softmax_backward", y, dy)


for _op in (softmax_op, log_softmax_op):
    _op.register_fake(lambda x: x.new_empty(x.shape))
for _op in (softmax_backward_op, log_softmax_backward_op):
    _op.register_fake(lambda y, dy: y.new_empty(y.shape))


def _save_output(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)


def _softmax_grad(ctx, grad):
    (y,) = ctx.saved_tensors
    return softmax_backward_op(y, grad)


def _log_softmax_grad(ctx, grad):
    (y,) = ctx.saved_tensors
    return log_softmax_backward_op(y, grad)


softmax_op.register_autograd(_softmax_grad, setup_context=_save_output)
log_softmax_op.register_autograd(_log_softmax_grad, setup_context=_save_output)


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


__all__ = ["softmax_op", "log_softmax_op", "softmax_backward_op", "log_softmax_backward_op", "problem_of", "rows",
           "softmax", "log_softmax"]
