"""Cross-entropy custom ops: ``warpsmith::cross_entropy`` (+ ``cross_entropy_backward`` and the in-place
``cross_entropy_backward_``) and ``warpsmith::fused_linear_cross_entropy`` (+ its backward), with
their fake (meta) kernels and autograd.

- ``cross_entropy`` returns the loss and the per-row statistics ((M, 2) fp32: row max and log of the
  shifted sum, whose sum is the logsumexp; not differentiable), which the backward reuses. With
  ``inplace_backward`` the backward writes the gradient into the logits' own buffer
  (``cross_entropy_backward_``, which declares that it mutates them) and returns that buffer: no
  (M, V) allocation. The public op only sets it when the caller asked for it.
- ``fused_linear_cross_entropy`` returns the loss and, per ``grads`` ("all", "hidden" or "none"),
  the gradients for a unit upstream gradient in the input dtype (empty tensors stand for the ones
  not computed); autograd's backward scales them by the upstream gradient (a scalar for mean/sum):
  plain torch elementwise work, exact for the usual upstream gradient of 1. With ``grads="none"``
  (``reduction="none"``, float16, or no gradient wanted) the backward calls
  ``fused_linear_cross_entropy_backward``, which recomputes the logits chunk by chunk with the upstream
  gradient.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..spec import Problem, as_tuple
from ..spec.xent import CROSS_ENTROPY, CROSS_ENTROPY_BACKWARD, FUSED_LINEAR_CROSS_ENTROPY, \
    FUSED_LINEAR_CROSS_ENTROPY_BACKWARD
from .dispatch import launch


def _attrs(ignore_index: int, label_smoothing: float, reduction: str) -> dict:
    return {"reduction": reduction, "ignore_index": int(ignore_index), "label_smoothing": float(label_smoothing)}


def ce_problem(logits: torch.Tensor, ignore_index: int, label_smoothing: float, reduction: str,
               backward: bool = False) -> Problem:
    spec = CROSS_ENTROPY_BACKWARD if backward else CROSS_ENTROPY
    return spec.problem({"M": logits.shape[0], "V": logits.shape[1]}, logits.dtype,
                        _attrs(ignore_index, label_smoothing, reduction))


def flce_problem(hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], ignore_index: int,
                 label_smoothing: float, reduction: str, grads: str, backward: bool = False) -> Problem:
    spec = FUSED_LINEAR_CROSS_ENTROPY_BACKWARD if backward else FUSED_LINEAR_CROSS_ENTROPY
    return spec.problem({"M": hidden.shape[0], "H": hidden.shape[1], "V": weight.shape[0]}, hidden.dtype,
                        {**_attrs(ignore_index, label_smoothing, reduction), "bias": bias is not None, "grads": grads})


def _loss_shape(rows: int, reduction: str) -> tuple[int, ...]:
    return () if reduction != "none" else (rows,)


# ---- cross_entropy ------------------------------------------------------------------------------
@torch.library.custom_op("warpsmith::cross_entropy", mutates_args=())
def cross_entropy_op(logits: torch.Tensor, target: torch.Tensor, ignore_index: int, label_smoothing: float,
                     reduction: str, inplace_backward: bool) -> tuple[torch.Tensor, torch.Tensor]:
    p = ce_problem(logits, ignore_index, label_smoothing, reduction)
    loss, stats = launch(p, {"logits": logits, "target": target})
    return loss, stats


@cross_entropy_op.register_fake
def _(logits, target, ignore_index, label_smoothing, reduction, inplace_backward):
    return (logits.new_empty(_loss_shape(logits.shape[0], reduction)),
            logits.new_empty((logits.shape[0], 2), dtype=torch.float32))


@torch.library.custom_op("warpsmith::cross_entropy_backward", mutates_args=())
def cross_entropy_backward_op(logits: torch.Tensor, target: torch.Tensor, stats: torch.Tensor, grad: torch.Tensor,
                              ignore_index: int, label_smoothing: float, reduction: str) -> torch.Tensor:
    p = ce_problem(logits, ignore_index, label_smoothing, reduction, backward=True)
    return launch(p, {"logits": logits, "target": target, "stats": stats, "grad": grad})


@cross_entropy_backward_op.register_fake
def _(logits, target, stats, grad, ignore_index, label_smoothing, reduction):
    return torch.empty_like(logits, memory_format=torch.contiguous_format)


@torch.library.custom_op("warpsmith::cross_entropy_backward_", mutates_args=("logits",))
def cross_entropy_backward_inplace(logits: torch.Tensor, target: torch.Tensor, stats: torch.Tensor, grad: torch.Tensor,
                                   ignore_index: int, label_smoothing: float, reduction: str) -> None:
    """Overwrites ``logits`` with the gradient (same kernel, output pointer = the logits)."""
    p = ce_problem(logits, ignore_index, label_smoothing, reduction, backward=True)
    launch(p, {"logits": logits, "target": target, "stats": stats, "grad": grad}, out=logits)


@cross_entropy_backward_inplace.register_fake
def _(logits, target, stats, grad, ignore_index, label_smoothing, reduction):
    return None


def _ce_setup(ctx, inputs, output) -> None:
    logits, target, ignore_index, label_smoothing, reduction, inplace = inputs
    ctx.save_for_backward(logits, target, output[1])
    ctx.attrs, ctx.inplace = (ignore_index, label_smoothing, reduction), inplace
    ctx.mark_non_differentiable(output[1])


def _ce_backward(ctx, grad_loss, grad_stats):
    logits, target, stats = ctx.saved_tensors
    none = (None,) * 5
    if not ctx.needs_input_grad[0]:
        return (None,) + none
    if ctx.inplace:
        cross_entropy_backward_inplace(logits, target, stats, grad_loss, *ctx.attrs)
        return (logits,) + none
    return (cross_entropy_backward_op(logits, target, stats, grad_loss, *ctx.attrs),) + none


cross_entropy_op.register_autograd(_ce_backward, setup_context=_ce_setup)


# ---- fused_linear_cross_entropy -------------------------------------------------------------------
def _none(t: torch.Tensor) -> torch.Tensor:
    return t.new_empty((0,))


@torch.library.custom_op("warpsmith::fused_linear_cross_entropy", mutates_args=())
def fused_linear_cross_entropy_op(
        hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], target: torch.Tensor,
        ignore_index: int, label_smoothing: float, reduction: str, grads: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    p = flce_problem(hidden, weight, bias, ignore_index, label_smoothing, reduction, grads)
    inputs = {"hidden": hidden, "weight": weight, "target": target}
    if bias is not None:
        inputs["bias"] = bias
    outs = list(as_tuple(launch(p, inputs)))
    loss = outs.pop(0)
    gh = outs.pop(0) if grads != "none" else _none(hidden)
    gw = outs.pop(0) if grads == "all" else _none(hidden)
    gb = outs.pop(0) if grads == "all" and bias is not None else _none(hidden)
    return loss, gh, gw, gb


@fused_linear_cross_entropy_op.register_fake
def _(hidden, weight, bias, target, ignore_index, label_smoothing, reduction, grads):
    loss = hidden.new_empty(_loss_shape(hidden.shape[0], reduction))
    gh = hidden.new_empty(hidden.shape) if grads != "none" else _none(hidden)
    gw = hidden.new_empty(weight.shape) if grads == "all" else _none(hidden)
    gb = hidden.new_empty((weight.shape[0],)) if grads == "all" and bias is not None else _none(hidden)
    return loss, gh, gw, gb


@torch.library.custom_op("warpsmith::fused_linear_cross_entropy_backward", mutates_args=())
def fused_linear_cross_entropy_backward_op(
        hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], target: torch.Tensor,
        grad: torch.Tensor, ignore_index: int, label_smoothing: float, reduction: str, grads: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    p = flce_problem(hidden, weight, bias, ignore_index, label_smoothing, reduction, grads, backward=True)
    inputs = {"hidden": hidden, "weight": weight, "target": target, "grad": grad}
    if bias is not None:
        inputs["bias"] = bias
    outs = list(as_tuple(launch(p, inputs)))
    gh = outs.pop(0)
    gw = outs.pop(0) if grads == "all" else _none(hidden)
    gb = outs.pop(0) if grads == "all" and bias is not None else _none(hidden)
    return gh, gw, gb


@fused_linear_cross_entropy_backward_op.register_fake
def _(hidden, weight, bias, target, grad, ignore_index, label_smoothing, reduction, grads):
    gw = torch.empty_like(weight) if grads == "all" else _none(hidden)
    gb = hidden.new_empty((weight.shape[0],)) if grads == "all" and bias is not None else _none(hidden)
    return torch.empty_like(hidden, memory_format=torch.contiguous_format), gw, gb


def _flce_setup(ctx, inputs, output) -> None:
    hidden, weight, bias, target, ignore_index, label_smoothing, reduction, grads = inputs
    ctx.mark_non_differentiable(*output[1:])
    ctx.attrs, ctx.grads, ctx.dtype = (ignore_index, label_smoothing, reduction), grads, hidden.dtype
    if grads != "none":
        ctx.save_for_backward(*output[1:])
    else:
        ctx.save_for_backward(hidden, weight, bias, target)


def _flce_backward(ctx, grad_loss, *_):
    need_h, need_w, need_b = ctx.needs_input_grad[:3]
    rest = (None,) * 5
    if ctx.grads != "none":  # gradients of the forward, for a unit upstream gradient
        if (need_w or need_b) and ctx.grads != "all":
            raise RuntimeError("warpsmith::fused_linear_cross_entropy ran with grads='hidden' but the weight "
                               "or bias needs a gradient: call it with grads='all'")
        gh, gw, gb = ctx.saved_tensors
        return (gh * grad_loss if need_h else None, gw * grad_loss if need_w else None,
                gb * grad_loss if need_b else None) + rest
    hidden, weight, bias, target = ctx.saved_tensors
    grads = "all" if need_w or need_b else "hidden"
    gh, gw, gb = fused_linear_cross_entropy_backward_op(hidden, weight, bias, target, grad_loss, *ctx.attrs, grads)
    return (gh if need_h else None, gw if need_w else None, gb if need_b else None) + rest


fused_linear_cross_entropy_op.register_autograd(_flce_backward, setup_context=_flce_setup)

__all__ = ["cross_entropy_op", "cross_entropy_backward_op", "cross_entropy_backward_inplace",
           "fused_linear_cross_entropy_op", "fused_linear_cross_entropy_backward_op", "ce_problem", "flce_problem"]
