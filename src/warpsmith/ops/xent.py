"""``warpsmith.ops.cross_entropy`` and ``warpsmith.ops.fused_linear_cross_entropy``: validate, then call
the ``warpsmith::`` custom ops (dispatch to the best verified kernel for the shape, else the default)."""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import InvalidInputError
from ..kernels.xent.variant import row_major
from ..runtime.xent_ops import cross_entropy_op, fused_linear_cross_entropy_op
from ..spec.xent import CROSS_ENTROPY, REDUCTIONS
from .validate import check_device, check_dtype, check_like, check_tensor


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


__all__ = ["cross_entropy", "fused_linear_cross_entropy"]
