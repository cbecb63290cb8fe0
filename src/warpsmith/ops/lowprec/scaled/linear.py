"""Linear layers on the scaled GEMM, the computation behind :class:`warpsmith.nn.Fp8Linear` and
:class:`warpsmith.nn.Int8Linear` (the modules hold parameters and shapes; this is their math):

- :func:`fp8_linear`: ``x W^T + b`` in fp8 for training, with its autograd (:class:`Fp8LinearFn`):
  e4m3 forward operands, the *hybrid* backward (the gradient in e5m2, the other operand in e4m3), two
  recipes (:data:`FP8_RECIPES`: per row / per output channel, or one scale per tensor);
- :func:`int8_linear`: the W8A8 inference forward (activations quantized to int8 per token; the weight
  once, :func:`int8_weight`).

Operands are quantized dynamically by the quantization kernels (:func:`~warpsmith.ops.quantize`).
"""
from __future__ import annotations

from typing import Optional

import torch

from ..quant.op import quantize
from .op import scaled_matmul

FP8_RECIPES = ("rowwise", "tensorwise")


def _rows(t: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-row quantization of a 2-D tensor (a contiguous copy first where needed)."""
    return quantize(t.contiguous(), fmt, "row")


def _tensor(t: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-tensor quantization of a 2-D tensor: (q, scale (1,))."""
    return quantize(t.contiguous(), fmt, "tensor")


class Fp8LinearFn(torch.autograd.Function):
    """``x2 W^T + b`` for a 2-D ``x2``, in fp8 with dynamic scaling, and its backward (see the module docstring)."""

    @staticmethod
    def forward(ctx, x2, weight, bias, recipe):
        w = weight.detach().to(x2.dtype)
        b = None if bias is None else bias.detach().to(x2.dtype)
        ctx.has_bias, ctx.recipe, ctx.weight_dtype = bias is not None, recipe, weight.dtype
        if recipe == "tensorwise":  # the quantized operands serve the backward too: their transposes keep the scale
            (qx, sx), (qw, sw) = _tensor(x2, "e4m3"), _tensor(w, "e4m3")
            ctx.save_for_backward(qx, sx, qw, sw)
            return scaled_matmul(qx, qw.t(), sx, sw, x2.dtype, bias=b, scaling="tensor")
        qx, sx = _rows(x2, "e4m3")
        qw, sw = _rows(w, "e4m3")
        ctx.save_for_backward(x2, weight)
        return scaled_matmul(qx, qw.t(), sx, sw.t(), x2.dtype, bias=b, scaling="row")

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        grad_x = grad_w = grad_b = None
        if ctx.recipe == "tensorwise":
            qx, sx, qw, sw = ctx.saved_tensors
            qg, sg = _tensor(g, "e5m2")
            if ctx.needs_input_grad[0]:  # g (M, N) @ W (N, K): e5m2 x e4m3, one scale each
                grad_x = scaled_matmul(qg, qw, sg, sw, g.dtype, scaling="tensor")
            if ctx.needs_input_grad[1]:  # g^T (N, M) @ x (M, K)
                grad_w = scaled_matmul(qg.t(), qx, sg, sx, torch.float32, scaling="tensor")
        else:
            x2, weight = ctx.saved_tensors
            if ctx.needs_input_grad[0]:  # g (M, N) @ W (N, K): g per row in e5m2, W per column in e4m3
                qg, sg = _rows(g, "e5m2")
                qwt, swt = _rows(weight.detach().to(g.dtype).t(), "e4m3")
                grad_x = scaled_matmul(qg, qwt.t(), sg, swt.t(), g.dtype, scaling="row")
            if ctx.needs_input_grad[1]:  # g^T (N, M) @ x (M, K): g^T per row in e5m2, x per column in e4m3
                qgt, sgt = _rows(g.t(), "e5m2")
                qxt, sxt = _rows(x2.t(), "e4m3")
                grad_w = scaled_matmul(qgt, qxt.t(), sgt, sxt.t(), torch.float32, scaling="row")
        if grad_w is not None:
            grad_w = grad_w.to(ctx.weight_dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g.float().sum(0)
        return grad_x, grad_w, grad_b, None


def fp8_linear(x2: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], recipe: str) -> torch.Tensor:
    """``x2 W^T + b`` (``x2`` 2-D) in fp8 with ``recipe`` (one of :data:`FP8_RECIPES`), differentiable."""
    return Fp8LinearFn.apply(x2, weight, bias, recipe)


def int8_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A linear layer's weight (out, in) quantized once to int8 per output channel: (qweight, scale (out, 1))."""
    return _rows(weight.detach().float(), "int8")


def int8_linear(x2: torch.Tensor, qweight: torch.Tensor, weight_scale: torch.Tensor,
                bias: Optional[torch.Tensor]) -> torch.Tensor:
    """W8A8: ``x2`` (2-D) quantized to int8 per token, times the int8 ``qweight`` (out, in) with its
    per-channel ``weight_scale`` (out, 1); exact int32 accumulation, output in ``x2``'s dtype."""
    qx, sx = _rows(x2, "int8")
    b = None if bias is None else bias.to(x2.dtype)
    return scaled_matmul(qx, qweight.t(), sx, weight_scale.t(), x2.dtype, bias=b, scaling="row")
