"""``warpsmith.ops.int4_matmul``: validate, then call the ``warpsmith::int4_matmul`` custom op (inference only)."""
from __future__ import annotations

from typing import Optional

import torch

from ....core.errors import InvalidInputError
from ....core.opspec import Problem
from ....dispatch import launch
from ...shared.validate import check_device, check_dtype, check_like, check_tensor
from .formats import check_dims, check_format, check_g_idx
from .spec import INT4_MATMUL
from .variant import VARIANTS


def problem_of(x2: torch.Tensor, N: int, format: str, group_size: int, act_order: bool, has_bias: bool) -> Problem:
    """The Problem a (validated) 2-D call solves."""
    return INT4_MATMUL.problem({"M": x2.shape[0], "N": N, "K": x2.shape[1]}, x2.dtype,
                               {"format": format, "group_size": group_size, "act_order": act_order, "bias": has_bias})


@torch.library.custom_op("warpsmith::int4_matmul", mutates_args=())
def int4_matmul_op(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
                   g_idx: Optional[torch.Tensor], bias: Optional[torch.Tensor], group_size: int,
                   format: str) -> torch.Tensor:
    x2 = x.reshape(-1, x.shape[-1])
    N = scales.shape[1]
    inputs = {"x": x2, "qweight": qweight.contiguous(), "qzeros": qzeros.contiguous(), "scales": scales.contiguous()}
    if g_idx is not None:
        inputs["g_idx"] = g_idx.contiguous()
    if bias is not None:
        inputs["bias"] = bias.contiguous()
    y = launch(problem_of(x2, N, format, group_size, g_idx is not None, bias is not None), VARIANTS, inputs)
    return y.reshape(*x.shape[:-1], N)


@int4_matmul_op.register_fake
def _(x, qweight, qzeros, scales, g_idx, bias, group_size, format):
    return x.new_empty((*x.shape[:-1], scales.shape[1]))


def check_weight(format: str, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
                 group_size: int, K: int, g_idx: Optional[torch.Tensor] = None) -> int:
    """Check packed tensors against their format for ``K`` input features; returns N."""
    check_format(format, group_size)
    for name, t in (("qweight", qweight), ("qzeros", qzeros), ("scales", scales)):
        check_tensor(name, t)
        if t.dim() != 2:
            raise InvalidInputError(f"shape of {name}", "a 2-D tensor", tuple(t.shape))
    check_dtype("qweight", qweight, (torch.int32,))
    check_dtype("qzeros", qzeros, (torch.int32,))
    check_dtype("scales", scales, (torch.float16, torch.bfloat16, torch.float32))
    N = scales.shape[1]
    check_dims(K, N, group_size)
    want = (K, N // 8) if format == "awq" else (K // 8, N)
    check_like("qweight", qweight, "scales", scales, shape=want, dtype=False)
    check_like("qzeros", qzeros, "scales", scales, shape=(K // group_size, N // 8), dtype=False)
    check_like("scales", scales, "scales", scales, shape=(K // group_size, N))
    if g_idx is not None:
        if format != "gptq":
            raise InvalidInputError("g_idx", "None for format='awq' (act-order is GPTQ's)", "a tensor")
        check_g_idx(check_tensor("g_idx", g_idx), K, group_size)
        check_like("g_idx", g_idx, "scales", scales, dtype=False)
    return N


def int4_matmul(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, group_size: int,
                format: str = "awq", g_idx: Optional[torch.Tensor] = None,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x @ W + bias`` with ``W`` an int4 weight packed by AutoAWQ (GEMM) or GPTQ (v1).

    ``W[k, n] = (q[k, n] - z[g, n]) * s[g, n]`` with ``g = k // group_size`` (or ``g_idx[k]``); see
    :mod:`warpsmith.ops.lowprec.int4.formats` for the exact layouts. Forward only (no autograd).

    Args:
        x: (..., K) float16 or bfloat16, any strides of its last two dims after flattening.
        qweight: int32, (K, N/8) for ``"awq"``, (K/8, N) for ``"gptq"``.
        scales: (K/G, N) float16, bfloat16 or float32.
        zeros: the packed zero points ``qzeros``, int32 (K/G, N/8) (GPTQ: storing ``z - 1``).
        group_size: G, 32, 64 or 128; ``K % G == 0``, ``N % 8 == 0``.
        format: "awq" or "gptq".
        g_idx: GPTQ act-order: (K,) integer groups in [0, K/G) (values checked; None: ``k // G``).
        bias: optional (N,) in x's dtype.

    Returns:
        (..., N) in x's dtype.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices, or g_idx values (nothing is computed).
    """
    x = check_tensor("x", x)
    check_dtype("x", x, INT4_MATMUL.dtypes)
    if x.dim() < 1 or x.numel() == 0:
        raise InvalidInputError("x", "a non-empty (..., K) tensor", tuple(x.shape))
    N = check_weight(format, qweight, zeros, scales, group_size, x.shape[-1], g_idx)
    check_like("scales", scales, "x", x, dtype=False)
    if g_idx is not None:
        g_idx = g_idx.to(torch.int32)
    if bias is not None:
        check_like("bias", check_tensor("bias", bias), "x", x, shape=(N,))
    check_device("x", x)
    return int4_matmul_op(x, qweight, zeros, scales, g_idx, bias, group_size, format)


__all__ = ["int4_matmul_op", "int4_matmul", "problem_of", "check_weight"]
