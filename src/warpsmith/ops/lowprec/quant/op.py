"""Public quantization functions, all four pipeline ops (specs spec.py, variants variant.py):
each validates, builds the problem and dispatches to the best verified tuned record for it, else the
heuristic default (the launch it had before tuning existed).

- :func:`quantize`: dynamic per-row (per-token), per-128-column-group (1x128 block) or per-tensor
  quantization to e4m3, e5m2 or int8, optionally fused with a preceding RMSNorm (``norm_weight``);
- :func:`quantize_static`: a saturating cast with a given per-tensor scale;
- :func:`dequantize`: ``q * scale`` back to a float dtype;
- :func:`stochastic_round`: fp32 -> bf16 or e4m3, unbiased, bit-reproducible for a seed.

Convention (reference.py): multiply to dequantize, fp32 scales, ``scale = amax / QMAX`` (1 where
amax == 0), saturating casts (e4m3 ±448, e5m2 ±57344, int8 ±127).
"""
from __future__ import annotations

from typing import Optional

import torch

from .... import dispatch
from ....core.errors import InvalidInputError
from ...shared.validate import check_device, check_tensor
from .limits import PHILOX_LIMIT, elements_fit
from .reference import BLOCK, DTYPE_OF, FORMATS
from .spec import DEQUANTIZE, GRANULARITIES, QUANTIZE, QUANTIZE_STATIC, STOCHASTIC_ROUND
from .variant import VARIANTS

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_FORMAT_OF = {v: k for k, v in DTYPE_OF.items()}


def _check_x(x: torch.Tensor) -> torch.Tensor:
    x = check_tensor("x", x)
    if x.dim() != 2 or x.numel() == 0:
        raise InvalidInputError("x", "a non-empty 2-D (M, N) tensor", f"shape {tuple(x.shape)}")
    if x.dtype not in _FLOATS:
        raise InvalidInputError("dtype of x", "float32, float16 or bfloat16", str(x.dtype))
    if x.stride(1) != 1:
        raise InvalidInputError("strides of x", "unit column stride", str(x.stride()))
    check_device("x", x)
    return x


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise InvalidInputError("format", "one of " + ", ".join(FORMATS), fmt)


def quantize(x: torch.Tensor, fmt: str = "e4m3", granularity: str = "row",
             norm_weight: Optional[torch.Tensor] = None, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic quantization of ``x`` (after an RMSNorm of its rows when ``norm_weight`` is given).

    Args:
        x: (M, N) float32/float16/bfloat16, unit column stride.
        fmt: "e4m3", "e5m2" or "int8".
        granularity: "row" (one scale per row: per token), "block" (one per 1x128 column group) or
            "tensor" (one scale for the whole tensor, from its amax: two passes over x, three launches).
        norm_weight: optional (N,) RMSNorm weight: ``y = x / sqrt(mean(x^2) + eps) * w`` is quantized
            (one kernel: the norm is never written out).
        eps: the RMSNorm epsilon.

    Returns:
        (q, scale): q (M, N) of the format's dtype; scale fp32 (M, 1), (M, ceil(N/128)) or (1,), so that
        ``q * scale`` approximates y (the scaled GEMM's ``scale_a`` for that granularity).
    """
    x = _check_x(x)
    _check_format(fmt)
    if granularity not in GRANULARITIES:
        raise InvalidInputError("granularity", "one of " + ", ".join(GRANULARITIES), granularity)
    M, N = x.shape
    if norm_weight is not None:
        norm_weight = check_tensor("norm_weight", norm_weight)
        if tuple(norm_weight.shape) != (N,) or norm_weight.device != x.device or norm_weight.stride(0) != 1:
            raise InvalidInputError("norm_weight", f"a contiguous ({N},) tensor on {x.device}",
                                    f"{tuple(norm_weight.shape)} on {norm_weight.device}")
    problem = QUANTIZE.problem({"M": M, "N": N}, x.dtype, {"format": fmt, "granularity": granularity,
                                                          "norm": norm_weight is not None, "eps": float(eps)})
    inputs = {"x": x} if norm_weight is None else {"x": x, "weight": norm_weight}
    q, scale = dispatch.launch(problem, VARIANTS, inputs)
    return q, scale


def quantize_static(x: torch.Tensor, scale: torch.Tensor, fmt: str = "e4m3") -> torch.Tensor:
    """Saturating cast with a given per-tensor scale: ``q = clamp(round(x / scale), -QMAX, QMAX)``.

    Args:
        x: (M, N) float32/float16/bfloat16, unit column stride.
        scale: (1,) float32, the dequantization scale (``x ~ q * scale``).
        fmt: "e4m3" (saturates at ±448, never NaN), "e5m2" (±57344, never inf) or "int8" (±127).

    Returns:
        q: (M, N) of the format's dtype.
    """
    x = _check_x(x)
    _check_format(fmt)
    scale = check_tensor("scale", scale)
    if tuple(scale.shape) != (1,) or scale.dtype != torch.float32 or scale.device != x.device:
        raise InvalidInputError("scale", f"a (1,) float32 tensor on {x.device}",
                                f"{tuple(scale.shape)} {scale.dtype} on {scale.device}")
    M, N = x.shape
    problem = QUANTIZE_STATIC.problem({"M": M, "N": N}, x.dtype, {"format": fmt})
    q = dispatch.launch(problem, VARIANTS, {"x": x, "scale": scale})
    return q


def dequantize(q: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """``q * scale`` in ``out_dtype``; the granularity is read from the scale's shape against q's, each
    allowed shape stated: (1,) per tensor, (M, 1) per row, (M, ceil(N/128)) per 1x128 block.

    Args:
        q: (M, N) e4m3/e5m2/int8, unit column stride.
        scale: fp32, one of the shapes above.
        out_dtype: float32, float16 or bfloat16.
    """
    q = check_tensor("q", q)
    if q.dtype not in _FORMAT_OF or q.dim() != 2 or q.numel() == 0 or q.stride(1) != 1:
        raise InvalidInputError("q", "a non-empty 2-D float8_e4m3fn/float8_e5m2/int8 tensor, unit column stride",
                                f"{tuple(q.shape)} {q.dtype} strides {q.stride()}")
    M, N = q.shape
    shapes = {(1,): "tensor", (M, 1): "row", (M, -(-N // BLOCK)): "block"}
    scale = check_tensor("scale", scale)
    if tuple(scale.shape) not in shapes or scale.dtype != torch.float32 or scale.device != q.device:
        raise InvalidInputError("scale", f"float32 on {q.device} of shape (1,), ({M}, 1) or ({M}, {-(-N // BLOCK)})",
                                f"{tuple(scale.shape)} {scale.dtype} on {scale.device}")
    if out_dtype not in _FLOATS:
        raise InvalidInputError("out_dtype", "float32, float16 or bfloat16", str(out_dtype))
    check_device("q", q)
    kind = shapes[tuple(scale.shape)]
    problem = DEQUANTIZE.problem({"M": M, "N": N}, out_dtype, {"format": _FORMAT_OF[q.dtype], "scaling": kind})
    out = dispatch.launch(problem, VARIANTS, {"q": q, "scale": scale})
    return out


def stochastic_round(x: torch.Tensor, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """fp32 -> ``dtype`` (torch.bfloat16 or torch.float8_e4m3fn) with unbiased stochastic rounding.

    Each element goes to the representable neighbour above |x| with probability (|x| - lo) / (hi - lo),
    else to the one below, so the expectation is x. The draw for element i is Philox(seed, i): the
    same seed gives the same bits. e4m3 saturates at ±448; bf16 keeps NaN and ±inf.

    Args:
        x: float32, any shape, contiguous.
        dtype: torch.bfloat16 or torch.float8_e4m3fn.
        seed: a non-negative integer below 2^31.
    """
    x = check_tensor("x", x)
    if x.dtype != torch.float32 or not x.is_contiguous():
        raise InvalidInputError("x", "a contiguous float32 tensor", f"{x.dtype}, contiguous={x.is_contiguous()}")
    if dtype not in (torch.bfloat16, torch.float8_e4m3fn):
        raise InvalidInputError("dtype", "torch.bfloat16 or torch.float8_e4m3fn", str(dtype))
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise InvalidInputError("seed", "an integer in [0, 2^31)", seed)
    check_device("x", x)
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=dtype, device=x.device)
    if not elements_fit(x.numel()):
        raise InvalidInputError("number of elements of x", f"at most {PHILOX_LIMIT} (distinct Philox counters)",
                                x.numel())
    problem = STOCHASTIC_ROUND.problem({"N": x.numel()}, torch.float32,
                                       {"target": "bf16" if dtype == torch.bfloat16 else "e4m3", "seed": seed})
    y = dispatch.launch(problem, VARIANTS, {"x": x.reshape(-1)}).reshape(x.shape)
    return y


__all__ = ["quantize", "quantize_static", "dequantize", "stochastic_round", "GRANULARITIES"]
