"""``warpsmith.ops.cross_entropy`` and ``warpsmith.ops.fused_linear_cross_entropy``: validate, then call
the ``warpsmith::`` custom ops (dispatch to the best verified kernel for the shape, else the default).

Cross-entropy custom ops: ``warpsmith::cross_entropy`` (+ ``cross_entropy_backward`` and the in-place
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

from ...core.errors import InvalidInputError
from ...core.opspec import Problem, as_tuple
from ...dispatch import launch
from ..shared.validate import check_device, check_dtype, check_like, check_tensor
from .spec import (CROSS_ENTROPY, CROSS_ENTROPY_BACKWARD, FUSED_LINEAR_CROSS_ENTROPY, FUSED_LINEAR_CROSS_ENTROPY_BACKWARD,
                   REDUCTIONS)
from .variant import VARIANTS, row_major


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
    loss, stats = launch(p, VARIANTS, {"logits": logits, "target": target})
    return loss, stats


@cross_entropy_op.register_fake
def _(logits, target, ignore_index, label_smoothing, reduction, inplace_backward):
    return (logits.new_empty(_loss_shape(logits.shape[0], reduction)),
            logits.new_empty((logits.shape[0], 2), dtype=torch.float32))


@torch.library.custom_op("warpsmith::cross_entropy_backward", mutates_args=())
def cross_entropy_backward_op(logits: torch.Tensor, target: torch.Tensor, stats: torch.Tensor, grad: torch.Tensor,
                              ignore_index: int, label_smoothing: float, reduction: str) -> torch.Tensor:
    p = ce_problem(logits, ignore_index, label_smoothing, reduction, backward=True)
    return launch(p, VARIANTS, {"logits": logits, "target": target, "stats": stats, "grad": grad})


@cross_entropy_backward_op.register_fake
def _(logits, target, stats, grad, ignore_index, label_smoothing, reduction):
    return torch.empty_like(logits, memory_format=torch.contiguous_format)


@torch.library.custom_op("warpsmith::cross_entropy_backward_", mutates_args=("logits",))
def cross_entropy_backward_inplace(logits: torch.Tensor, target: torch.Tensor, stats: torch.Tensor, grad: torch.Tensor,
                                   ignore_index: int, label_smoothing: float, reduction: str) -> None:
    """Overwrites ``logits`` with the gradient (same kernel, output pointer = the logits)."""
    p = ce_problem(logits, ignore_index, label_smoothing, reduction, backward=True)
    launch(p, VARIANTS, {"logits": logits, "target": target, "stats": stats, "grad": grad}, out=logits)


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
    outs = list(as_tuple(launch(p, VARIANTS, inputs)))
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
    outs = list(as_tuple(launch(p, VARIANTS, inputs)))
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


def _check_attrs(ignore_index: int, label_smoothing: float, reduction: str) -> None:
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise InvalidInputError("ignore_index", "an integer", ignore_index)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0.0 <= label_smoothing <= 1.0:
        raise InvalidInputError("label_smoothing", "a number in [0, 1]", label_smoothing)
    if reduction not in REDUCTIONS:
        raise InvalidInputError("reduction", "one of " + ", ".join(REDUCTIONS), reduction)


def _check_target(target: object, rows_shape: tuple[int, ...], classes: int, ignore_index: int,
                  like: torch.Tensor, rows_of: str) -> torch.Tensor:
    target = check_tensor("target", target)
    if target.dtype != torch.int64:
        raise InvalidInputError("dtype of target", "torch.int64 class indices (probability targets are not supported)",
                                str(target.dtype))
    check_like("target", target, rows_of, like, shape=rows_shape, dtype=False)
    # values: checked where it costs no device synchronisation and no graph break (CPU tensors, eager);
    # elsewhere a target outside [0, V) that is not ignore_index gives NaN loss and gradient for its row
    if target.device.type == "cpu" and not torch.compiler.is_compiling():
        bad = (target != ignore_index) & ((target < 0) | (target >= classes))
        if bool(bad.any()):
            first = tuple(int(i) for i in bad.nonzero()[0])
            raise InvalidInputError("target", f"class indices in [0, {classes}) or ignore_index ({ignore_index})",
                                    f"{int(target[first])} at {first}")
    return target


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100, label_smoothing: float = 0.0,
                  reduction: str = "mean", inplace_backward: bool = False) -> torch.Tensor:
    """Cross-entropy of class-index targets, as ``torch.nn.functional.cross_entropy``, with autograd to ``logits``.

    The math runs in fp32 (softmax statistics included) whatever the logits' dtype; the loss is returned
    in the logits' dtype, as torch returns it. ``mean`` divides by the number of targets that are not
    ``ignore_index`` (NaN when there is none); label smoothing eps gives each row
    ``(1 - eps) nll + eps mean_i(-log p_i)``.

    Args:
        logits: (..., V) float16, bfloat16 or float32, classes on the last dimension (unlike torch's
            K-dimensional form, which takes them on dimension 1); leading dimensions are flattened to
            rows (a copy only where they cannot be viewed as one); any strides otherwise.
        target: (...) int64 class indices in [0, V), or ``ignore_index``; the leading shape of ``logits``.
        ignore_index: targets with this value contribute no loss and no gradient.
        label_smoothing: eps in [0, 1].
        reduction: "mean", "sum" or "none".
        inplace_backward: if True (and ``logits`` is not a leaf tensor, and its rows are row-major), the
            backward writes the gradient into the logits' own memory and returns it, saving an (M, V)
            allocation; the logits then hold the gradient after ``backward()``. Use it only when nothing
            reads the logits afterwards (autograd raises if another op saved them for its backward).
            Default False: the logits are never modified.

    Returns:
        A scalar (mean, sum) or a tensor of ``target``'s shape (none), in the logits' dtype.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices, attributes, or (CPU tensors) a target
            outside [0, V) that is not ``ignore_index``; nothing is computed.
    """
    logits = check_tensor("logits", logits)
    _check_attrs(ignore_index, label_smoothing, reduction)
    check_dtype("logits", logits, CROSS_ENTROPY.dtypes)
    if logits.dim() < 1 or logits.numel() == 0:
        raise InvalidInputError("logits", "a non-empty (..., V) tensor", f"shape {tuple(logits.shape)}")
    V = logits.shape[-1]
    target = _check_target(target, tuple(logits.shape[:-1]), V, ignore_index, logits, "logits")
    if not isinstance(inplace_backward, bool):
        raise InvalidInputError("inplace_backward", "True or False", inplace_backward)
    check_device("logits", logits)
    rows = logits.reshape(-1, V)
    inplace = inplace_backward and logits.requires_grad and not logits.is_leaf and row_major(rows)
    loss, _ = cross_entropy_op(rows, target.reshape(-1), int(ignore_index), float(label_smoothing), reduction, inplace)
    return loss.reshape(target.shape) if reduction == "none" else loss


def fused_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                               bias: Optional[torch.Tensor] = None, ignore_index: int = -100,
                               label_smoothing: float = 0.0, reduction: str = "mean") -> torch.Tensor:
    """``cross_entropy(hidden @ weight.T + bias, target)`` without materializing the (M, V) logits.

    Rows are processed in tuned chunks: per chunk, the logits (warpsmith's GEMM, fp32 accumulation,
    rounded to the input dtype as ``F.linear`` would), the cross-entropy kernel (fp32 math; loss, row
    statistics, and the logits' gradient written in place into the private chunk), then the
    hidden-gradient GEMM. The weight's (and bias') gradient is written by a second pass over tuned
    vocabulary chunks: the chunk's logits for all rows again, their gradient from the saved row
    statistics, then one GEMM over all rows (fp32 accumulation, rounded once); no (V, H) fp32
    buffer. Each chunk buffer is at most 1/8 of the unfused logits (or 32 MiB). With ``mean``/``sum`` in
    bfloat16/float32 and autograd on, the gradients are computed during the forward (one GEMM fewer;
    held until ``backward``, which scales them by the upstream gradient: exact for the usual 1, one
    more rounding otherwise). With ``none`` (per-row upstream gradients) and in float16 (where loss
    scaling must reach the logits' gradient before it is rounded to float16) the forward computes the
    loss only and the backward recomputes the chunks with the upstream gradient, as torch's unfused
    path would round it. Semantics and dtype rules as :func:`cross_entropy` (the loss in hidden's dtype).

    Args:
        hidden: (..., H) float16, bfloat16 or float32; leading dimensions flattened to rows.
        weight: (V, H), as ``nn.Linear.weight`` / an LM head; same dtype and device as ``hidden``.
        target: (...) int64 class indices, the leading shape of ``hidden``.
        bias: optional (V,), same dtype.
        ignore_index, label_smoothing, reduction: as :func:`cross_entropy`.

    Returns:
        A scalar (mean, sum) or a tensor of ``target``'s shape (none), in hidden's dtype; differentiable
        with respect to ``hidden``, ``weight`` and ``bias`` (gradients in their dtype).

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices, attributes or (CPU) target values.
    """
    hidden, weight = check_tensor("hidden", hidden), check_tensor("weight", weight)
    _check_attrs(ignore_index, label_smoothing, reduction)
    check_dtype("hidden", hidden, CROSS_ENTROPY.dtypes)
    if hidden.dim() < 1 or hidden.numel() == 0:
        raise InvalidInputError("hidden", "a non-empty (..., H) tensor", f"shape {tuple(hidden.shape)}")
    H = hidden.shape[-1]
    if weight.dim() != 2 or weight.shape[1] != H or weight.shape[0] < 1:
        raise InvalidInputError("weight", f"a 2-D (V, {H}) tensor with V >= 1", f"shape {tuple(weight.shape)}")
    check_like("weight", weight, "hidden", hidden)
    if bias is not None:
        bias = check_tensor("bias", bias)
        check_like("bias", bias, "hidden", hidden, shape=(weight.shape[0],))
    target = _check_target(target, tuple(hidden.shape[:-1]), weight.shape[0], ignore_index, hidden, "hidden")
    check_device("hidden", hidden)
    need_w = weight.requires_grad or (bias is not None and bias.requires_grad)
    grads = "none"  # reduction none, float16 or no gradient: the backward (if any) recomputes
    if torch.is_grad_enabled() and reduction != "none" and hidden.dtype != torch.float16 \
            and (hidden.requires_grad or need_w):
        grads = "all" if need_w else "hidden"
    loss = fused_linear_cross_entropy_op(hidden.reshape(-1, H), weight, bias, target.reshape(-1), int(ignore_index),
                                         float(label_smoothing), reduction, grads)[0]
    return loss.reshape(target.shape) if reduction == "none" else loss


__all__ = ["cross_entropy_op", "cross_entropy_backward_op", "cross_entropy_backward_inplace",
           "fused_linear_cross_entropy_op", "fused_linear_cross_entropy_backward_op", "ce_problem", "flce_problem",
           "cross_entropy", "fused_linear_cross_entropy"]
