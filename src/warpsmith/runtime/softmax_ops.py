"""``warpsmith::softmax``, ``warpsmith::log_softmax`` and their ``_backward`` ops: torch.library custom
ops (last dimension, any leading dimensions), fake (meta) kernels and autograd.

The forward ops save their output; their backward calls the matching ``_backward`` op on it
(``dx = y (dy - sum(dy y))``, or ``dy - exp(y) sum(dy)`` for log-softmax). The backward ops have
no autograd of their own (no double backward).
"""
from __future__ import annotations

import torch

from ..spec import Problem
from .dispatch import launch


def rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as (M, N) rows of its last dimension: a view where the strides allow, else a copy."""
    return t.reshape(-1, t.shape[-1])


def problem_of(op: str, t: torch.Tensor) -> Problem:
    """The Problem a (validated) call on ``t`` solves: M rows of N = t.shape[-1]."""
    n = t.shape[-1]
    return Problem(op, {"M": t.numel() // n, "N": n}, t.dtype, {})


def _forward(op: str, x: torch.Tensor) -> torch.Tensor:
    x2 = rows(x)
    return launch(problem_of(op, x2), {"x": x2}).view(x.shape)


def _backward_op(op: str, y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y2, dy2 = rows(y), rows(dy)
    return launch(problem_of(op, y2), {"y": y2, "dy": dy2}).view(y.shape)


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

__all__ = ["softmax_op", "log_softmax_op", "softmax_backward_op", "log_softmax_backward_op", "problem_of", "rows"]
