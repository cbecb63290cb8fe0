"""Packed int4 weight formats (AutoAWQ GEMM, AutoGPTQ/GPTQModel v1): packers, unpackers, RTN quantization.

The product is ``y = x @ W`` with ``W`` (K, N) (``K`` = in_features, ``N`` = out_features: the
transpose of an ``nn.Linear`` weight), quantized in groups of ``G`` consecutive rows of ``K``::

    W[k, n] = (q[k, n] - z[g(k), n]) * s[g(k), n],   q, z in [0, 15],  g(k) = k // G (or g_idx[k])

**AWQ** (AutoAWQ ``WQLinear_GEMM``): ``qweight`` int32 (K, N/8), ``qzeros`` int32 (K/G, N/8), ``scales``
(K/G, N) fp16. Word ``j`` of a row packs columns ``8j .. 8j+7``, nibble ``i`` (bits ``4i .. 4i+3``)
holding column ``8j + AWQ_ORDER[i]``, ``AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]`` (so column ``8j + c``
sits in nibble ``AWQ_NIBBLE[c] = [0, 4, 1, 5, 2, 6, 3, 7][c]``); ``qzeros`` is packed the same way
and stores ``z`` itself.

**GPTQ** (v1, as AutoGPTQ and GPTQModel's ``format="gptq"`` write it): ``qweight`` int32 (K/8, N)
packed along K: word ``(r, n)`` holds ``q[8r + i, n]`` in nibble ``i``; ``qzeros`` int32 (K/G, N/8)
packed along N in plain order (nibble ``i`` of word ``j`` is column ``8j + i``) and storing
``z - 1`` (the historical offset: a stored nibble ``t`` means ``z = t + 1``, so ``z`` ranges over
``[1, 16]`` and ``z = 0`` cannot be stored); ``scales`` (K/G, N); ``g_idx`` int32 (K,), the group of
each row (``k // G`` without act-order; a permuted assignment with it).

Shape constraints the formats impose: ``N % 8 == 0`` (both pack 8 columns of zeros per word, AWQ
also of weights), ``K % G == 0`` (whole groups; then ``K % 8 == 0`` for GPTQ's K-packing too, as
``G`` is 32, 64 or 128).

This module is the kernel's side of the formats (vectorized shifts); the independent reference
dequantization the error contract uses is :func:`warpsmith.ops.lowprec.int4.spec.dequantize_reference`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ....core.errors import InvalidInputError

FORMATS = ("awq", "gptq")
GROUP_SIZES = (128, 32, 64)
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of an AWQ word holds column 8j + AWQ_ORDER[i]
AWQ_NIBBLE = tuple(AWQ_ORDER.index(c) for c in range(8))  # column 8j + c sits in nibble AWQ_NIBBLE[c]
_SHIFTS = torch.arange(0, 32, 4)


@dataclass
class Int4Weight:
    """A packed int4 weight in one of :data:`FORMATS` (the tensors a checkpoint stores)."""

    format: str
    qweight: torch.Tensor
    qzeros: torch.Tensor
    scales: torch.Tensor
    group_size: int
    g_idx: Optional[torch.Tensor] = None

    @property
    def in_features(self) -> int:
        return self.qweight.shape[0] * (8 if self.format == "gptq" else 1)

    @property
    def out_features(self) -> int:
        return self.scales.shape[1]


def check_format(format: str, group_size: int) -> None:
    if format not in FORMATS:
        raise InvalidInputError("format", "one of " + ", ".join(FORMATS), format)
    if group_size not in GROUP_SIZES:
        raise InvalidInputError("group_size", "one of " + ", ".join(map(str, sorted(GROUP_SIZES))), group_size)


def check_dims(K: int, N: int, group_size: int) -> None:
    """The formats' shape constraints (module docstring)."""
    if N % 8:
        raise InvalidInputError("N (out_features)", "a multiple of 8 (8 nibbles per packed int32)", N)
    if K % group_size:
        raise InvalidInputError("K (in_features)", f"a multiple of the group size {group_size}", K)


def _to_int32(words: torch.Tensor) -> torch.Tensor:
    """int64 values in [0, 2^32) -> the int32 with the same bits."""
    words = words & 0xFFFFFFFF
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def _nibbles(name: str, t: torch.Tensor, lo: int = 0, hi: int = 15) -> torch.Tensor:
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        raise InvalidInputError(f"dtype of {name}", "an integer tensor", str(t.dtype))
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < lo or int(t.max()) > hi):
        raise InvalidInputError(f"values of {name}", f"integers in [{lo}, {hi}]",
                                f"values in [{int(t.min())}, {int(t.max())}]")
    return t


def _pack_cols(v: torch.Tensor, order: tuple[int, ...]) -> torch.Tensor:
    """(R, C) nibbles -> (R, C/8) int32, nibble i of word j = column 8j + order[i]."""
    R, C = v.shape
    v = v.reshape(R, C // 8, 8)[:, :, list(order)]
    return _to_int32((v << _SHIFTS.to(v.device)).sum(-1))


def _unpack_cols(words: torch.Tensor, order: tuple[int, ...]) -> torch.Tensor:
    """Inverse of :func:`_pack_cols`."""
    nib = (words.to(torch.int64)[:, :, None] >> _SHIFTS.to(words.device)) & 0xF  # (R, C/8, 8): nibble i
    out = torch.empty_like(nib)
    out[:, :, list(order)] = nib
    return out.reshape(words.shape[0], -1)


def _check_parts(w_int: torch.Tensor, zeros: torch.Tensor, scales: torch.Tensor, group_size: int) -> tuple[int, int]:
    if w_int.dim() != 2:
        raise InvalidInputError("w_int", "a 2-D (K, N) tensor", tuple(w_int.shape))
    K, N = w_int.shape
    check_dims(K, N, group_size)
    for name, t in (("zeros", zeros), ("scales", scales)):
        if tuple(t.shape) != (K // group_size, N):
            raise InvalidInputError(f"shape of {name}", f"(K/G, N) = ({K // group_size}, {N})", tuple(t.shape))
    if not scales.is_floating_point():
        raise InvalidInputError("dtype of scales", "a floating dtype", str(scales.dtype))
    return K, N


def pack_awq(w_int: torch.Tensor, zeros: torch.Tensor, scales: torch.Tensor, group_size: int) -> Int4Weight:
    """Pack quantized values into AutoAWQ's GEMM format.

    Args:
        w_int: (K, N) integers in [0, 15].
        zeros: (K/G, N) integers in [0, 15].
        scales: (K/G, N) floating (AutoAWQ stores fp16).
        group_size: G, one of 32, 64, 128.

    Returns:
        The packed weight (``scales`` kept as given).
    """
    check_format("awq", group_size)
    _check_parts(w_int, zeros, scales, group_size)
    return Int4Weight("awq", _pack_cols(_nibbles("w_int", w_int), AWQ_ORDER),
                      _pack_cols(_nibbles("zeros", zeros), AWQ_ORDER), scales, group_size)


def pack_gptq(w_int: torch.Tensor, zeros: torch.Tensor, scales: torch.Tensor, group_size: int,
              g_idx: Optional[torch.Tensor] = None) -> Int4Weight:
    """Pack quantized values into the GPTQ v1 format (zeros stored as ``z - 1``).

    Args:
        w_int: (K, N) integers in [0, 15].
        zeros: (K/G, N) the true zero points, integers in [1, 16] (v1 cannot store 0).
        scales: (K/G, N) floating.
        group_size: G, one of 32, 64, 128.
        g_idx: optional (K,) group of each row, values in [0, K/G) (act-order); None means ``k // G``.

    Returns:
        The packed weight; ``g_idx`` is always set (int32), ``k // G`` when none was given.
    """
    check_format("gptq", group_size)
    K, N = _check_parts(w_int, zeros, scales, group_size)
    q = _nibbles("w_int", w_int)
    z = _nibbles("zeros", zeros, 1, 16) - 1
    qweight = _to_int32((q.reshape(K // 8, 8, N) << _SHIFTS.to(q.device)[None, :, None]).sum(1))
    if g_idx is None:
        g_idx = torch.arange(K, device=w_int.device) // group_size
    g_idx = check_g_idx(g_idx, K, group_size)
    return Int4Weight("gptq", qweight, _pack_cols(z, tuple(range(8))), scales, group_size, g_idx)


def check_g_idx(g_idx: torch.Tensor, K: int, group_size: int) -> torch.Tensor:
    """``g_idx`` as int32 after checking shape (K,) and values in [0, K/G)."""
    if not isinstance(g_idx, torch.Tensor) or tuple(g_idx.shape) != (K,) or g_idx.is_floating_point():
        raise InvalidInputError("g_idx", f"an integer tensor of shape ({K},)",
                                getattr(g_idx, "shape", type(g_idx).__name__))
    if g_idx.numel() and (int(g_idx.min()) < 0 or int(g_idx.max()) >= K // group_size):
        raise InvalidInputError("values of g_idx", f"groups in [0, {K // group_size})",
                                f"values in [{int(g_idx.min())}, {int(g_idx.max())}]")
    return g_idx.to(torch.int32).contiguous()


def unpack(weight: Int4Weight) -> tuple[torch.Tensor, torch.Tensor]:
    """(q (K, N), true zeros (K/G, N)) as int64, from either format."""
    if weight.format == "awq":
        return _unpack_cols(weight.qweight, AWQ_ORDER), _unpack_cols(weight.qzeros, AWQ_ORDER)
    nib = (weight.qweight.to(torch.int64)[:, None, :] >> _SHIFTS.to(weight.qweight.device)[None, :, None]) & 0xF
    return nib.reshape(-1, weight.qweight.shape[1]), _unpack_cols(weight.qzeros, tuple(range(8))) + 1


def dequantize(weight: Int4Weight, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (K, N) weight ``(q - z[g]) * s[g]`` in ``dtype`` (computed in float64, rounded once)."""
    q, z = unpack(weight)
    K = q.shape[0]
    g = weight.g_idx.long() if weight.g_idx is not None else torch.arange(K, device=q.device) // weight.group_size
    return ((q - z[g]).to(torch.float64) * weight.scales.to(torch.float64)[g]).to(dtype)


def act_order_g_idx(perm: torch.Tensor, group_size: int) -> torch.Tensor:
    """GPTQ's act-order groups: rows quantized in the order ``perm`` form groups of G consecutive
    rows of that order, so ``g_idx[perm[i]] = i // G``."""
    g_idx = torch.empty_like(perm)
    g_idx[perm] = torch.arange(perm.numel(), device=perm.device) // group_size
    return g_idx.to(torch.int32)


def quantize_int4(w: torch.Tensor, group_size: int = 128, format: str = "awq", *, sym: Optional[bool] = None,
                  g_idx: Optional[torch.Tensor] = None, scale_dtype: torch.dtype = torch.float16) -> Int4Weight:
    """Round-to-nearest int4 quantization of a (K, N) weight into a packed format.

    Asymmetric by default for AWQ (``s = (max - min) / 15``, ``z = round(-min / s)``, min <= 0 <= max
    per group and column, as AutoAWQ's RTN), symmetric for GPTQ (its default ``sym=True``:
    ``s = 2 max|w| / 15``, ``z = 8``). GPTQ v1 cannot store ``z = 0``: an asymmetric GPTQ zero of 0 is
    raised to 1 (values in that group then clip at ``14 s`` above the minimum). ``q`` is computed
    with the scale rounded to ``scale_dtype``, so dequantization is the nearest grid point.

    Args:
        w: (K, N) floating (for an ``nn.Linear``, ``linear.weight.t()``).
        group_size: 32, 64 or 128; ``K % group_size == 0`` and ``N % 8 == 0``.
        format: "awq" or "gptq".
        sym: symmetric quantization (default: False for AWQ, True for GPTQ).
        g_idx: GPTQ only: (K,) groups (e.g. :func:`act_order_g_idx`); default ``k // G``.
        scale_dtype: dtype the scales are stored in.

    Returns:
        The packed :class:`Int4Weight`.
    """
    check_format(format, group_size)
    if not isinstance(w, torch.Tensor) or w.dim() != 2 or not w.is_floating_point():
        raise InvalidInputError("w", "a floating 2-D (K, N) tensor", getattr(w, "shape", type(w).__name__))
    K, N = w.shape
    check_dims(K, N, group_size)
    if g_idx is not None and format != "gptq":
        raise InvalidInputError("g_idx", "None for AWQ (act-order is GPTQ's)", "a tensor")
    sym = format == "gptq" if sym is None else sym
    ng = K // group_size
    g = (check_g_idx(g_idx, K, group_size).long() if g_idx is not None
         else torch.arange(K, device=w.device) // group_size)
    w64 = w.detach().to(torch.float64)
    idx = g[:, None].expand(K, N)
    init = torch.zeros((ng, N), dtype=torch.float64, device=w.device)
    wmax = init.scatter_reduce(0, idx, w64, "amax", include_self=True)  # include 0: min <= 0 <= max
    wmin = init.scatter_reduce(0, idx, w64, "amin", include_self=True)
    if sym:
        amax = torch.maximum(wmax, -wmin)
        scales = (2 * amax / 15).clamp(min=1e-5).to(scale_dtype)
        zeros = torch.full((ng, N), 8, dtype=torch.int64, device=w.device)
    else:
        scales = ((wmax - wmin) / 15).clamp(min=1e-5).to(scale_dtype)
        zeros = torch.round(-wmin / scales.to(torch.float64)).clamp(1 if format == "gptq" else 0, 15).to(torch.int64)
    s64 = scales.to(torch.float64)
    q = (torch.round(w64 / s64[g]) + zeros[g]).clamp(0, 15).to(torch.int64)
    if format == "awq":
        return pack_awq(q, zeros, scales, group_size)
    return pack_gptq(q, zeros, scales, group_size, g_idx)
