"""Weight-only int4 GEMM: ``y = x @ dequant(W) + bias`` with W packed in AutoAWQ or GPTQ v1 format.

Formats and their shape constraints: :mod:`.formats` (``N % 8 == 0``, ``K % G == 0``).

Inputs: ``x`` (M, K) fp16/bf16; ``qweight``, ``qzeros`` int32 and ``scales`` (K/G, N) in x's dtype as
the format lays them out; ``g_idx`` (K,) int32 for GPTQ with ``act_order``; ``bias`` (N,) optional.

The reference dequantizes with :func:`dequantize_reference`, written here from the formats'
definitions with explicit per-nibble bit operations (independent of :mod:`.formats`'s
vectorized packers and of the kernel), then multiplies. The **error contract is against the fp64
product of the dequantized weight** with x: the weight's quantization error is not the kernel's and
is not judged here. Kernels dequantize ``(q - z) * s`` in fp32 (exact: |q - z| <= 16 and ``s`` has at
most 11 significant bits) and round it once to x's dtype before the fp32-accumulated dot, so the
contract allows one rounding of each weight, ``u_operand = u(x dtype) / 2`` (``2 u_op |x| @ |W|`` in the
generic bound), plus the fp32 summation of K terms and the output's rounding; the working-dtype
reference rounds the weight the same way.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import torch

from ....core.error_contract import ErrorContract
from ....core.dtypes import UNIT_ROUNDOFF
from ....core.errors import InvalidInputError
from ....core.opspec import Axis, OpSpec, Problem, draw, on_device
from .formats import FORMATS, GROUP_SIZES, act_order_g_idx

# the formats' layouts, restated from their definitions (see formats.py's docstring)
_AWQ_COLUMN_OF_NIBBLE = (0, 2, 4, 6, 1, 3, 5, 7)


def dequantize_reference(format: str, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
                         group_size: int, g_idx: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The (K, N) weight ``(q - z) * s`` from packed tensors, one nibble position at a time.

    Computed in ``scales``' dtype (the fp64 oracle passes fp64 scales; ``q - z`` is an exact integer).
    """
    words = qweight.to(torch.int64) & 0xFFFFFFFF
    zwords = qzeros.to(torch.int64) & 0xFFFFFFFF
    N = scales.shape[1]
    if format == "awq":
        K = qweight.shape[0]
        q = torch.empty((K, N // 8, 8), dtype=torch.int64, device=qweight.device)
        z = torch.empty((qzeros.shape[0], N // 8, 8), dtype=torch.int64, device=qweight.device)
        for nibble in range(8):
            col = _AWQ_COLUMN_OF_NIBBLE[nibble]
            q[:, :, col] = (words >> (4 * nibble)) & 15
            z[:, :, col] = (zwords >> (4 * nibble)) & 15
        q, z = q.reshape(K, N), z.reshape(-1, N)
        group = torch.arange(K, device=qweight.device) // group_size
    elif format == "gptq":
        K = qweight.shape[0] * 8
        q = torch.empty((K // 8, 8, N), dtype=torch.int64, device=qweight.device)
        z = torch.empty((qzeros.shape[0], N // 8, 8), dtype=torch.int64, device=qweight.device)
        for nibble in range(8):
            q[:, nibble, :] = (words >> (4 * nibble)) & 15  # row 8r + nibble
            z[:, :, nibble] = ((zwords >> (4 * nibble)) & 15) + 1  # stored z - 1, column 8j + nibble
        q, z = q.reshape(K, N), z.reshape(-1, N)
        group = g_idx.long() if g_idx is not None else torch.arange(K, device=qweight.device) // group_size
    else:
        raise InvalidInputError("format", "one of " + ", ".join(FORMATS), format)
    return (q - z[group]).to(scales.dtype) * scales[group]


class Int4MatmulSpec(OpSpec):
    name = "int4_matmul"
    axes = (
        Axis("M", "rows of x (tokens)"),
        Axis("N", "output features (a multiple of 8)"),
        Axis("K", "input features, the reduction (a multiple of the group size)", reduction=True),
    )
    dtypes = (torch.float16, torch.bfloat16)
    attr_choices = {
        "format": FORMATS,
        "group_size": GROUP_SIZES,
        "act_order": (False, True),  # GPTQ only: groups given by g_idx
        "bias": (False, True),
    }

    def problem(self, shape, dtype, attrs=None) -> Problem:
        p = super().problem(shape, dtype, attrs)
        if p.attrs["act_order"] and p.attrs["format"] != "gptq":
            raise InvalidInputError("attribute act_order of int4_matmul", "False for format=awq", True)
        return p

    def _weights(self, p: Problem, gen: torch.Generator, device, scales: torch.Tensor) -> dict[str, torch.Tensor]:
        M, N, K, G = p.shape["M"], p.shape["N"], p.shape["K"], p.attrs["group_size"]
        if N % 8 or K % G:
            raise InvalidInputError(f"shape of {p.describe()}", f"N % 8 == 0 and K % {G} == 0",
                                    f"N={N}, K={K}")
        g = on_device(gen, device)
        gptq = p.attrs["format"] == "gptq"
        q = torch.randint(0, 16, (K, N), generator=g, device=device)
        z = torch.randint(1 if gptq else 0, 17 if gptq else 16, (K // G, N), generator=g, device=device)
        out = {"scales": scales}
        if gptq:
            nib = q.reshape(K // 8, 8, N) << (4 * torch.arange(8, device=device))[None, :, None]
            out["qweight"] = _bits32(nib.sum(1))
            zn = (z - 1).reshape(K // G, N // 8, 8) << (4 * torch.arange(8, device=device))
            out["qzeros"] = _bits32(zn.sum(-1))
            if p.attrs["act_order"]:
                out["g_idx"] = act_order_g_idx(torch.randperm(K, generator=g, device=device), G)
        else:
            order = list(_AWQ_COLUMN_OF_NIBBLE)
            nib = q.reshape(K, N // 8, 8)[:, :, order] << (4 * torch.arange(8, device=device))
            out["qweight"] = _bits32(nib.sum(-1))
            zn = z.reshape(K // G, N // 8, 8)[:, :, order] << (4 * torch.arange(8, device=device))
            out["qzeros"] = _bits32(zn.sum(-1))
        return out

    def large_scale(self, p: Problem) -> float:
        # |y| ~ sqrt(K) |x| |w| with |w| <= 16 * 0.025: aim at an eighth of the dtype's maximum
        return float(torch.finfo(p.dtype).max) / (8 * p.shape["K"] ** 0.5 * 0.4)

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        M, N, K, G = p.shape["M"], p.shape["N"], p.shape["K"], p.attrs["group_size"]
        scale = self.large_scale(p) if dist == "large" else 1.0
        x = draw((M, K), dist, gen, p.dtype, device, scale)
        s = (torch.rand((K // G, N), generator=on_device(gen, device), device=device) * 0.02 + 0.005).to(p.dtype)
        out = {"x": x, **self._weights(p, gen, device, s)}
        if p.attrs["bias"]:
            out["bias"] = draw((N,), "normal", gen, p.dtype, device)
        return out

    def exact_inputs(self, p: Problem, gen: torch.Generator,
                     device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        # x in [-2, 2], scales powers of two: every weight (|q - z| <= 16) and product is a small dyadic
        # number, every fp32 partial sum exact; the one final rounding is the same for any correct kernel
        M, N, K, G = p.shape["M"], p.shape["N"], p.shape["K"], p.attrs["group_size"]
        g = on_device(gen, device)
        x = torch.randint(-2, 3, (M, K), generator=g, device=device).to(p.dtype)
        s = (2.0 ** torch.randint(-2, 2, (K // G, N), generator=g, device=device)).to(p.dtype)
        out = {"x": x, **self._weights(p, gen, device, s)}
        if p.attrs["bias"]:
            out["bias"] = torch.randint(-2, 3, (N,), generator=g, device=device).to(p.dtype)
        return out

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["M"], p.shape["N"]), p.dtype),)

    def weight(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        """The dequantized (K, N) weight in the dtype of ``inputs["scales"]``."""
        return dequantize_reference(attrs["format"], inputs["qweight"], inputs["qzeros"], inputs["scales"],
                                    attrs["group_size"], inputs.get("g_idx"))

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        x = inputs["x"]
        y = torch.matmul(x, self.weight(inputs, attrs).to(x.dtype))
        if attrs.get("bias"):
            y = y + inputs["bias"]
        return y

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        s = torch.matmul(inputs64["x"].abs(), self.weight(inputs64, attrs).abs().to(inputs64["x"].dtype))
        if attrs.get("bias"):
            s = s + inputs64["bias"].abs()
        return s

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        return ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=UNIT_ROUNDOFF["float32"],
                             reduction_len=p.shape["K"] + (1 if p.attrs["bias"] else 0),
                             u_operand=UNIT_ROUNDOFF[dt] / 2)

    def flops(self, p: Problem) -> float:
        return 2.0 * p.shape["M"] * p.shape["N"] * p.shape["K"]

    def min_bytes(self, p: Problem) -> float:
        M, N, K, G = p.shape["M"], p.shape["N"], p.shape["K"], p.attrs["group_size"]
        e = p.dtype.itemsize
        groups = K // G
        packed = K * N // 2 + groups * N // 2 + groups * N * e + (4 * K if p.attrs["act_order"] else 0)
        return float(e * (M * K + M * N) + packed + (e * N if p.attrs["bias"] else 0))


def _bits32(words: torch.Tensor) -> torch.Tensor:
    words = words & 0xFFFFFFFF
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


INT4_MATMUL = Int4MatmulSpec()
