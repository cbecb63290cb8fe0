"""Convolution variants: launchers, spaces, validity and heuristics.

- ``implicit_gemm``: tiles over (output pixels, output channels) per group, the reduction over
  C/G x window walked in the order LOOP names ("nested": window outside, channel blocks inside,
  the channels-last friendly order; "flat": the flattened index in blocks, for few channels per
  group), optionally split over SPLIT_K programs whose fp32 partials a second kernel sums in a
  fixed order before the epilogue (deterministic).
- ``pointwise``: the same kernel guarded for 1x1 windows with unit stride and no padding
  (``POINTWISE``: the window loop is one position); searched like any variant.

Inputs are read in place through their strides (NCHW or channels-last); the output is allocated
in the input's memory format. The kernels index one sample in int32: :func:`sample_span` must be
below ``INDEX_LIMIT`` (the launcher refuses larger samples); the batch offset is int64.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...core.variant import Config, Variant, scratch
from ...space import Enum, Pow2, Space, fixed
from ...targets import Target
from ..matmul.variant import tile_resources
from ..shared import kernel as common
from ..shared.launch import emulated
from . import kernel as K
from .spec import CONV, geometry

INDEX_LIMIT = 2**31
MAX_BLOCK = 256


def _pow2_cap(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, triton.next_power_of_2(n)))


def sample_span(t: torch.Tensor) -> int:
    """Largest element offset of one sample of ``t`` (dims after the first), plus a block of overshoot."""
    return sum((s - 1) * abs(st) for s, st in zip(t.shape[1:], t.stride()[1:])) + MAX_BLOCK * max(
        [abs(st) for st in t.stride()[1:]] + [1])


def as_3d(t: torch.Tensor) -> torch.Tensor:
    """A 3-, 4- or 5-D (N, C, spatial...) tensor as a 5-D view (singleton depth/height), no copy."""
    while t.dim() < 5:
        t = t.unsqueeze(2)
    return t


def memory_format_like(x: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An empty tensor of ``shape`` in ``x``'s memory format (channels-last where ``x`` is), as torch's conv."""
    nd = x.dim()
    if nd == 4 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
        return torch.empty(shape, dtype=dtype, device=x.device, memory_format=torch.channels_last)
    if nd == 5 and x.is_contiguous(memory_format=torch.channels_last_3d) and not x.is_contiguous():
        return torch.empty(shape, dtype=dtype, device=x.device, memory_format=torch.channels_last_3d)
    if nd == 3 and x.stride(1) == 1 and x.shape[1] > 1 and not x.is_contiguous():
        return torch.empty((shape[0], shape[2], shape[1]), dtype=dtype, device=x.device).transpose(1, 2)
    return torch.empty(shape, dtype=dtype, device=x.device)


@dataclass(frozen=True, kw_only=True)
class ConvKnobs(Knobs):
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    LOOP: str
    SPLIT_K: int
    num_warps: int
    num_stages: int
    PRECISION: str = "ieee"


def weight_strides(w: torch.Tensor, groups: int, transposed: bool) -> tuple[int, ...]:
    """Strides addressing the weight as ``w[g, k, c, t]`` (see kernel.py): (swg, swn, swc, swd, swh, sww)."""
    w5 = as_3d(w)
    if transposed:  # (C, K/G, ...): group g's input channels are rows g C/G ...
        cg = w.shape[0] // groups
        return (cg * w5.stride(0), w5.stride(1), w5.stride(0), *w5.stride()[2:])
    kg = w.shape[0] // groups
    return (kg * w5.stride(0), w5.stride(0), w5.stride(1), *w5.stride()[2:])


def output_extent(y5: torch.Tensor) -> tuple[int, int, int]:
    """(OD, OH, OW) the kernel covers: the allocated output's spatial sizes (output padding included)."""
    return tuple(y5.shape[2:])  # type: ignore[return-value]


def launch_conv(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None,
                residual: torch.Tensor | None, *, groups: int, transposed: bool, stride, pad, dil,
                activation: str, scale: float, config: Mapping[str, Any]) -> torch.Tensor:
    """Launch the implicit-GEMM conv into ``y`` (any strides); per-axis (d, h, w) geometry tuples."""
    for name, t in (("x", x), ("w", w), ("output", y), ("residual", residual)):
        if t is not None and sample_span(t) >= INDEX_LIMIT:
            raise InvalidInputError(f"size of {name}", "element offsets within one sample below 2^31 "
                                    "(the kernels index a sample in 32 bits)", sample_span(t))
    x5, y5 = as_3d(x), as_3d(y)
    r5 = as_3d(residual) if residual is not None else y5
    N, C, D, H, W = x5.shape
    CO, (OD, OH, OW) = y5.shape[1], output_extent(y5)
    KD, KH, KW = as_3d(w).shape[2:]
    CG, KG = C // groups, CO // groups
    c = config
    loop = c["LOOP"]
    kvol = KD * KH * KW
    total = kvol * triton.cdiv(CG, c["BLOCK_K"]) if loop == "nested" else triton.cdiv(CG * kvol, c["BLOCK_K"])
    split = max(1, min(c["SPLIT_K"], total))
    per_split = triton.cdiv(total, split)
    split = triton.cdiv(total, per_split)
    M = N * OD * OH * OW
    tiles = triton.cdiv(M, c["BLOCK_M"]) * triton.cdiv(KG, c["BLOCK_N"])
    tf32 = c["PRECISION"] == "tf32"
    emulate = emulated(x.dtype, tf32=tf32)
    partial = scratch((split, M, CO), torch.float32, x.device) if split > 1 else y
    has_bias, has_res = bias is not None, residual is not None
    epi = dict(HAS_BIAS=has_bias, HAS_RES=has_res, ACTIVATION=activation, EMULATE=emulate)
    ystr, rstr = y5.stride(), r5.stride()
    sbias = bias.stride(0) if has_bias else 0
    K.conv_fwd_kernel[(tiles, groups, split)](
        x5, w, y, bias if has_bias else y, residual if has_res else y, partial,
        N, CG, KG, D, H, W, OD, OH, OW, KD, KH, KW, *stride, *pad, *dil, per_split, float(scale),
        *x5.stride(), *weight_strides(w, groups, transposed), *ystr, *rstr, sbias,
        BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], LOOP=loop, TRANSPOSED=transposed,
        SPLIT=split > 1, IS_FP32=x.dtype == torch.float32, PRECISION=c["PRECISION"],
        num_warps=c["num_warps"], num_stages=c["num_stages"], **epi)
    if split > 1:
        bm, bn = 32, 32
        K.conv_splitk_reduce_kernel[(triton.cdiv(M, bm), triton.cdiv(CO, bn))](
            partial, y, bias if has_bias else y, residual if has_res else y,
            M, CO, OD, OH, OW, split, float(scale), *ystr, *rstr, sbias,
            BLOCK_M=bm, BLOCK_N=bn, num_warps=4, **epi)
    return y


def launch_wgrad(a: torch.Tensor, b: torch.Tensor, dw: torch.Tensor, *, groups: int, transposed: bool,
                 stride, pad, dil, config: Mapping[str, Any]) -> torch.Tensor:
    """Weight gradient into ``dw``: ``a`` plays the output (KG channels per group), ``b`` the gathered input."""
    for name, t in (("a", a), ("b", b), ("weight", dw)):
        if sample_span(t) >= INDEX_LIMIT:
            raise InvalidInputError(f"size of {name}", "element offsets within one sample below 2^31", sample_span(t))
    a5, b5 = as_3d(a), as_3d(b)
    N, KGt, OD, OH, OW = a5.shape
    _, CGt, D, H, W = b5.shape
    KD, KH, KW = as_3d(dw).shape[2:]
    KG, CG = KGt // groups, CGt // groups
    c = config
    tiles = triton.cdiv(KG, c["BLOCK_M"]) * triton.cdiv(CG * KD * KH * KW, c["BLOCK_N"])
    # dw is addressed as dw[g, k, c, t] with k the rows of a: the forward weight layout (K, C/G) when a
    # is dy, the transposed layout (C, K/G) when a is x; both are "rows of a first"
    K.conv_wgrad_kernel[(tiles, groups)](
        a5, b5, dw, N, KG, CG, D, H, W, OD, OH, OW, KD, KH, KW, *stride, *pad, *dil,
        *a5.stride(), *b5.stride(), *weight_strides(dw, groups, False),
        BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], IS_FP32=a.dtype == torch.float32,
        PRECISION=c["PRECISION"], EMULATE=emulated(a.dtype, tf32=c["PRECISION"] == "tf32"),
        num_warps=c["num_warps"], num_stages=c["num_stages"])
    return dw


class ImplicitGemmConv(Variant):
    op = "conv"
    name = "implicit_gemm"
    cost_model = "conv"
    knobs = ConvKnobs
    kernel_modules = (K, common)

    @staticmethod
    def gemm_shape(p: Problem) -> tuple[int, int, int, int]:
        """(M, N, K, groups) of the implicit GEMM: output pixels, channels per group, reduction."""
        g = geometry(p)
        o = g["O"]
        G = p.shape.get("G", 1)
        return p.shape["N"] * o[0] * o[1] * o[2], p.shape["K"] // G, CONV.reduction_len(p), G

    def gemm_problem(self, p: Problem) -> Problem:
        """The equivalent GEMM for the cost model: (M pixels) x (N channels per group) x (K = C/G x
        window), batched over groups. Its A operand is the im2col matrix the kernel gathers: the
        window's overlap (window volume / stride product re-reads of each input element) counts."""
        from ..matmul.spec import MATMUL

        M, N, Kr, G = self.gemm_shape(p)
        attrs = {"bias": bool(p.attrs["bias"]), "allow_tf32": bool(p.attrs["allow_tf32"])}
        return MATMUL.problem({"M": M, "N": N, "K": Kr, "B": G} if G > 1 else {"M": M, "N": N, "K": Kr},
                              p.dtype, attrs)

    def space(self, p: Problem, target: Target) -> Space:
        M, N, Kr, G = self.gemm_shape(p)
        cg = p.shape["C"] // G
        return Space({
            "BLOCK_M": Pow2(16, _pow2_cap(M, 16, 256), _pow2_cap(M, 16, 128)),
            "BLOCK_N": Pow2(16, _pow2_cap(N, 16, 256), _pow2_cap(N, 16, 64)),
            "BLOCK_K": Pow2(16, _pow2_cap(Kr, 16, 128), _pow2_cap(cg if cg >= 16 else Kr, 16, 32)),
            "LOOP": Enum(("nested", "flat"), "nested" if cg >= 16 else "flat"),
            "SPLIT_K": Enum((1, 2, 4, 8, 16), 1),
            "num_warps": Enum((2, 4, 8), 4),
            # the gathered (masked, computed-address) loads are not ones Triton's pipeliner takes (the
            # compiler's facts say num_stages has no effect, and the search then drops every config)
            "num_stages": fixed(1),
            "PRECISION": Enum(("ieee", "tf32"), "ieee") if p.dtype == torch.float32 else fixed("ieee"),
        })

    def smem_bytes(self, p: Problem, c: Mapping[str, Any]) -> int:
        return c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * p.dtype.itemsize

    def regs_per_thread(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        """Accumulator, operand tiles, and the gather's per-element state: the input tile's 64-bit
        addresses and its coordinates and masks (about 8 registers per element), the weight tile's
        addresses (about 3), plus a fixed overhead for the index math. Fitted so the defaults of the
        `warpsmith gpucheck --ops conv` problems do not spill on sm_90."""
        threads = c["num_warps"] * target.warp_size
        acc = c["BLOCK_M"] * c["BLOCK_N"] // threads
        a_el = c["BLOCK_M"] * c["BLOCK_K"] / threads
        b_el = c["BLOCK_N"] * c["BLOCK_K"] / threads
        fma = p.dtype == torch.float32 and c["PRECISION"] == "ieee"
        frags = 8 * (a_el + b_el) if fma else (a_el + b_el) * p.dtype.itemsize / 4
        return int(acc + frags + 8 * a_el + 3 * b_el + 64)

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        why = tile_resources(self, p, c, target)
        if why:
            return why
        M, N, Kr, G = self.gemm_shape(p)
        if c["SPLIT_K"] > 1 and c["SPLIT_K"] * c["BLOCK_K"] > Kr:
            return f"SPLIT_K={c['SPLIT_K']} x BLOCK_K={c['BLOCK_K']} exceeds the reduction length {Kr}"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = self.space(p, target).default()
        cfg["num_warps"] = 8 if cfg["BLOCK_M"] * cfg["BLOCK_N"] >= 128 * 128 else 4
        while self.invalid(p, cfg, target) and cfg["BLOCK_K"] > 16:
            cfg["BLOCK_K"] //= 2
        while self.invalid(p, cfg, target) and max(cfg["BLOCK_M"], cfg["BLOCK_N"]) > 16:
            cfg["BLOCK_M" if cfg["BLOCK_M"] >= cfg["BLOCK_N"] else "BLOCK_N"] //= 2
        while self.invalid(p, cfg, target) and cfg["num_warps"] > 2:
            cfg["num_warps"] //= 2
        return cfg

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"K": config["BLOCK_N"], "C": config["BLOCK_K"]}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self.typed(config), problem)

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
               out: Any = None) -> torch.Tensor:
        p, a = problem, problem.attrs
        g = geometry(p)
        x, w = inputs["x"], inputs["w"]
        shape = CONV.outputs(p)[0][0]
        if out is None:
            out = memory_format_like(x, shape, p.dtype)
        elif tuple(out.shape) != shape or out.dtype != p.dtype:
            raise InvalidInputError("out", f"a {shape} {p.dtype} tensor", f"{tuple(out.shape)} {out.dtype}")
        return launch_conv(x, w, out, inputs.get("bias"), inputs.get("residual"), groups=a["groups"],
                           transposed=a["transposed"], stride=g["S"], pad=g["P"], dil=g["DL"],
                           activation=a["activation"], scale=a["scale"], config=config)


class PointwiseConv(ImplicitGemmConv):
    """1x1 windows, unit stride, no padding: a GEMM over pixels; the window loop has one position."""

    name = "pointwise"

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        g = geometry(p)
        if g["KS"] != (1, 1, 1) or g["S"] != (1, 1, 1) or any(g["P"]) or any(g["PE"]):
            return "pointwise needs a 1x1 window, unit stride and no padding"
        if c["LOOP"] != "nested":
            return "pointwise walks channels only (LOOP=nested)"
        return super().invalid(p, c, target)

    def space(self, p: Problem, target: Target) -> Space:
        s = super().space(p, target)
        return Space({**s.fragments, "LOOP": fixed("nested")})

    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = super().default_config(p, target)
        cfg["LOOP"] = "nested"
        return cfg


VARIANTS: tuple[Variant, ...] = (ImplicitGemmConv(), PointwiseConv())
