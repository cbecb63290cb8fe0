"""``warpsmith.ops.matmul``: validate, then call the ``warpsmith::matmul`` custom op.

``warpsmith::matmul``: the torch.library custom op, its fake (meta) kernel and autograd.
"""
from __future__ import annotations

from typing import Optional

import torch

from ...core.dtypes import dtype_name
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...dispatch import launch
from ..shared.validate import check_device, check_tensor as _check_tensor
from .spec import ACTIVATIONS, MATMUL
from .variant import VARIANTS


def problem_of(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor], activation: str) -> Problem:
    """The Problem a (validated) call solves; the layout attribute is read off the strides."""
    shape = {"M": a.shape[-2], "N": b.shape[-1], "K": a.shape[-1]}
    if a.dim() == 3:
        shape["B"] = a.shape[0]
    layout = ("t" if a.stride(-1) != 1 else "n") + ("t" if b.stride(-1) != 1 else "n")
    allow_tf32 = a.dtype == torch.float32 and bool(torch.backends.cuda.matmul.allow_tf32)
    return MATMUL.problem(shape, a.dtype, {"bias": bias is not None, "activation": activation,
                                           "layout": layout, "allow_tf32": allow_tf32})


@torch.library.custom_op("warpsmith::matmul", mutates_args=())
def matmul_op(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor], activation: str) -> torch.Tensor:
    inputs = {"a": a, "b": b} if bias is None else {"a": a, "b": b, "bias": bias}
    return launch(problem_of(a, b, bias, activation), VARIANTS, inputs)


@matmul_op.register_fake
def _(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor], activation: str) -> torch.Tensor:
    return a.new_empty((*a.shape[:-1], b.shape[-1]))


def _activation_grad(z: torch.Tensor, activation: str) -> torch.Tensor:
    """d act(z) / dz, in fp32."""
    z = z.float()
    if activation == "relu":
        return (z > 0).float()
    if activation == "gelu":
        cdf = 0.5 * (1.0 + torch.erf(z * 0.7071067811865476))
        return cdf + z * torch.exp(-0.5 * z * z) * 0.3989422804014327
    if activation == "silu":
        s = torch.sigmoid(z)
        return s * (1 + z * (1 - s))
    return torch.ones_like(z)


def _setup(ctx, inputs, output) -> None:
    a, b, bias, activation = inputs
    ctx.save_for_backward(a, b, bias)
    ctx.activation = activation


def _backward(ctx, grad):
    a, b, bias = ctx.saved_tensors
    g = grad
    if ctx.activation != "none":  # recompute the pre-activation instead of storing it
        z = matmul_op(a, b, bias, "none")
        g = (grad.float() * _activation_grad(z, ctx.activation)).to(grad.dtype)
    grad_a = matmul_op(g, b.transpose(-1, -2), None, "none") if ctx.needs_input_grad[0] else None
    grad_b = None
    if ctx.needs_input_grad[1]:
        if b.dim() == 2 and a.dim() == 3:  # broadcast weight: sum over the batch
            grad_b = matmul_op(a.reshape(-1, a.shape[-1]).transpose(0, 1), g.reshape(-1, g.shape[-1]), None, "none")
        else:
            grad_b = matmul_op(a.transpose(-1, -2), g, None, "none")
    grad_bias = g.float().sum(dim=tuple(range(g.dim() - 1))).to(bias.dtype) if bias is not None and ctx.needs_input_grad[2] else None
    return grad_a, grad_b, grad_bias, None


matmul_op.register_autograd(_backward, setup_context=_setup)


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


__all__ = ["matmul_op", "problem_of", "matmul"]
