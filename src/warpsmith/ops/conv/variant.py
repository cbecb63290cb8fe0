"""Convolution variants: launchers, spaces, validity and heuristics.

- ``implicit_gemm``: tiles over (output pixels, output channels) per group, the reduction over
  C/G x window walked in the order LOOP names ("nested": window outside, channel blocks inside,
  the channels-last friendly order; "flat": the flattened index in blocks, for few channels per
  group), optionally split over SPLIT_K programs whose fp32 partials a second kernel sums in a
  fixed order before the epilogue (deterministic).
- ``pointwise``: the same kernel guarded for 1x1 windows with unit stride and no padding
  (``POINTWISE``: the window loop is one position); searched like any variant.
- ``depthwise`` (depthwise.py): a direct convolution for one input channel per group, first in
  ``VARIANTS`` so that dispatch without a record runs it wherever it is valid.
- ``phased``: a strided transposed conv by output phase (``conv_transpose_phase_kernel``): each
  phase's pixels reduce over only the taps that feed them; preferred over the implicit GEMM's
  gather form (which masks the stride holes) for every strided transposed conv.

Inputs are read in place through their strides (NCHW or channels-last); the output is allocated
in the input's memory format. The kernels index one sample in int32: :func:`sample_span` must be
below ``INDEX_LIMIT`` (the launcher refuses larger samples); the batch offset is int64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import INTERPRET, triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...core.variant import Config, Variant, scratch
from ...space import Enum, Pow2, Space, fixed
from ...targets import Target, current_device
from ..matmul import kernel as MK
from ..matmul.variant import tile_resources
from ..shared import kernel as common
from ..shared.launch import emulated
from . import kernel as K
from .limits import (INDEX_LIMIT, MAX_BLOCK, MAX_GROUPS, OUTPUT_ORDERS, WGRAD_REDUCE_BLOCK, fwd_limits,
                     phase_constants, wgrad_limits)
from .spec import CONV, geometry


def _pow2_cap(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, triton.next_power_of_2(n)))


def sample_span(t: torch.Tensor) -> int:
    """Largest element offset of one sample of ``t`` (dims after the first), plus a block of overshoot."""
    return sum((s - 1) * abs(st) for s, st in zip(t.shape[1:], t.stride()[1:])) + MAX_BLOCK * max(
        [abs(st) for st in t.stride()[1:]] + [1])


def _check(limits: list[tuple[str, Any, int]]) -> None:
    for what, value, bound in limits:
        if not value < bound:
            raise InvalidInputError(what, f"below {bound} (the conv kernels index in 32 bits within a sample; "
                                    "the proved launch contract, contract.py)", value)


def readable(t: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """An operand the kernels read in place, and the strides they get: a dimension of size 1 with
    stride 0 gets stride 1 (its index is always 0: the same addresses); a broadcast dimension (stride
    0, size > 1) is copied out, since the launch contract (contract.py) takes strides >= 1."""
    if any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride())):
        t = t.contiguous()
    return t, tuple(st if st > 0 else 1 for st in t.stride())


def nesting_strides(t: torch.Tensor) -> tuple[int, ...] | None:
    """Strides addressing the 5-D output ``t`` that nest in one of ``OUTPUT_ORDERS`` (each at least the
    extent times the stride of the dimension inside it: no two elements share an address), a size-1
    dimension getting the least stride that order needs (its index is always 0); None when ``t`` is
    laid out otherwise (overlapping or permuted: the launcher then writes a temporary)."""
    for order in OUTPUT_ORDERS.values():
        st, need = list(t.stride()), 1
        for d in order:
            if t.shape[d] == 1:
                st[d] = need
            elif st[d] < need:
                break
            need = t.shape[d] * st[d]
        else:
            return tuple(st)
    return None


def weight_nests(sw: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether weight strides ``sw`` (:func:`weight_strides`) of a ``(G, KG, CG, KD, KH, KW)`` weight nest,
    innermost (KW) first: each stride at least the extent times the stride inside it, so no two
    elements share an address (the weight-gradient contract's layout; a contiguous gradient nests)."""
    return sw[5] >= 1 and all(sw[d - 1] >= shape[d] * sw[d] for d in range(1, 6))


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
    st = readable(as_3d(w))[1]
    if transposed:  # (C, K/G, ...): group g's input channels are rows g C/G ...
        cg = w.shape[0] // groups
        return (cg * st[0], st[1], st[0], *st[2:])
    kg = w.shape[0] // groups
    return (kg * st[0], st[0], st[1], *st[2:])


def output_extent(y5: torch.Tensor) -> tuple[int, int, int]:
    """(OD, OH, OW) the kernel covers: the allocated output's spatial sizes (output padding included)."""
    return tuple(y5.shape[2:])  # type: ignore[return-value]


def phase_taps(r: int, k: int, stride: int, pad: int, dil: int) -> int:
    """How many taps of a ``k``-wide window feed the output coordinates of phase ``r`` (as the kernel's
    ``phase_taps``): those ``t`` with ``r + pad - t dil`` divisible by ``stride``."""
    return sum(1 for t in range(k) if (r + pad - t * dil) % stride == 0)


def launch_conv(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None,
                residual: torch.Tensor | None, *, groups: int, transposed: bool, stride, pad, dil,
                activation: str, scale: float, config: Mapping[str, Any], phased: bool = False) -> torch.Tensor:
    """Launch the implicit-GEMM conv into ``y`` (any strides); per-axis (d, h, w) geometry tuples.
    ``phased`` (a transposed conv, no split-K): ``conv_transpose_phase_kernel``, one grid slice per
    output phase."""
    for name, t in (("x", x), ("w", w), ("output", y), ("residual", residual)):
        if t is not None and sample_span(t) >= INDEX_LIMIT:
            raise InvalidInputError(f"size of {name}", "element offsets within one sample below 2^31 "
                                    "(the kernels index a sample in 32 bits)", sample_span(t))
    out, y5 = y, as_3d(y)
    sy = nesting_strides(y5)
    if sy is None:  # an output laid out otherwise (overlapping, permuted): a contiguous temporary, copied back
        y = torch.empty(y.shape, dtype=y.dtype, device=y.device)
        y5 = as_3d(y)
        sy = nesting_strides(y5)
    (x5, sx), (w, _) = readable(as_3d(x)), readable(w)
    residual, bias = (readable(t)[0] if t is not None else None for t in (residual, bias))
    r5 = as_3d(residual) if residual is not None else y5
    sr = readable(r5)[1] if residual is not None else sy
    N, C, D, H, W = x5.shape
    CO, (OD, OH, OW) = y5.shape[1], output_extent(y5)
    KD, KH, KW = as_3d(w).shape[2:]
    CG, KG = C // groups, CO // groups
    sw = weight_strides(w, groups, transposed)
    sbias = readable(bias)[1][0] if bias is not None else 1
    c = config
    loop = c["LOOP"]
    kvol = KD * KH * KW
    total = kvol * triton.cdiv(CG, c["BLOCK_K"]) if loop == "nested" else triton.cdiv(CG * kvol, c["BLOCK_K"])
    split = 1 if phased else max(1, min(c["SPLIT_K"], total))
    per_split = triton.cdiv(total, split)
    split = triton.cdiv(total, per_split)
    M = N * OD * OH * OW
    _check(fwd_limits(N, groups, CG, KG, (D, H, W), (OD, OH, OW), (KD, KH, KW), tuple(stride), tuple(pad),
                      tuple(dil), sx, sw, sy, sr, sbias, split))
    tiles = triton.cdiv(M, c["BLOCK_M"]) * triton.cdiv(KG, c["BLOCK_N"])
    tf32 = c["PRECISION"] == "tf32"
    emulate = emulated(x.dtype, tf32=tf32)
    partial = scratch((split, M, CO), torch.float32, x.device) if split > 1 else y
    has_bias, has_res = bias is not None, residual is not None
    epi = dict(HAS_BIAS=has_bias, HAS_RES=has_res, ACTIVATION=activation, EMULATE=emulate)
    ystr, rstr = sy, sr
    if phased:
        if not transposed:
            raise InvalidInputError("phased conv", "a transposed conv", "a direct conv")
        phases = stride[0] * stride[1] * stride[2]
        if phases > MAX_GROUPS:
            raise InvalidInputError("stride product", f"at most {MAX_GROUPS} phases (grid axis 2)", phases)
        consts = [phase_constants(s_, d_) for s_, d_ in zip(stride, dil)]
        rows = N * math.prod(triton.cdiv(o, s_) for o, s_ in zip((OD, OH, OW), stride))
        grid = (triton.cdiv(rows, c["BLOCK_M"]) * triton.cdiv(KG, c["BLOCK_N"]), groups, phases)
        K.conv_transpose_phase_kernel[grid](
            x5, w, y, bias if has_bias else y, residual if has_res else y,
            N, CG, KG, D, H, W, OD, OH, OW, KD, KH, KW, *stride, *pad, *dil,
            *(g_ for g_, _ in consts), *(i_ for _, i_ in consts), float(scale),
            *sx, *sw, *ystr, *rstr, sbias,
            BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], LOOP=loop,
            IS_FP32=x.dtype == torch.float32, PRECISION=c["PRECISION"],
            num_warps=c["num_warps"], num_stages=c["num_stages"], **epi)
    else:
        K.conv_fwd_kernel[(tiles, groups, split)](
            x5, w, y, bias if has_bias else y, residual if has_res else y, partial,
            N, CG, KG, D, H, W, OD, OH, OW, KD, KH, KW, *stride, *pad, *dil, per_split, float(scale),
            *sx, *sw, *ystr, *rstr, sbias,
            BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], LOOP=loop, TRANSPOSED=transposed,
            SPLIT=split > 1, IS_FP32=x.dtype == torch.float32, PRECISION=c["PRECISION"],
            num_warps=c["num_warps"], num_stages=c["num_stages"], **epi)
        if split > 1:
            bm, bn = 32, 32
            K.conv_splitk_reduce_kernel[(triton.cdiv(M, bm), triton.cdiv(CO, bn))](
                partial, y, bias if has_bias else y, residual if has_res else y,
                M, CO, OD, OH, OW, split, float(scale), *ystr, *rstr, sbias,
                BLOCK_M=bm, BLOCK_N=bn, num_warps=4, **epi)
    if y is not out:
        out.copy_(y)
    return out


WGRAD_MAX_SPLITS = 16
WGRAD_MIN_ITERS = 8  # pixel blocks (BLOCK_K each) a split sums at least


def gather_gemm_registers(dtype: torch.dtype, c: Mapping[str, Any], target: Target, per_a: float, per_b: float,
                          extra_acc: int = 0) -> int:
    """Registers per thread of an implicit GEMM tile (BLOCK_M x BLOCK_K times BLOCK_K x BLOCK_N): the fp32
    accumulator, the operand fragments (fp32 FMA: 8 per element; MMA: the operand bytes), ``per_a`` /
    ``per_b`` registers per element of each operand for a gather's addresses, coordinates and masks,
    ``extra_acc`` more accumulator-sized tiles, and 64 for the index math."""
    threads = c["num_warps"] * target.warp_size
    acc = c["BLOCK_M"] * c["BLOCK_N"] // threads
    a_el = c["BLOCK_M"] * c["BLOCK_K"] / threads
    b_el = c["BLOCK_N"] * c["BLOCK_K"] / threads
    fma = dtype == torch.float32 and c["PRECISION"] == "ieee"
    frags = 8 * (a_el + b_el) if fma else (a_el + b_el) * dtype.itemsize / 4
    return int(acc + frags + per_a * a_el + per_b * b_el + 64 + extra_acc * acc)


def wgrad_config(P: int, KG: int, NCOL: int, groups: int, target: Target, interpret: bool) -> dict:
    """The weight gradient's launch: a reduction over all P = N x output pixels into a small dw, so few
    tiles (a 64-channel 3x3 layer: 9 tiles of 64 x 64) and long loops; split-K spreads that loop over
    about two programs per SM (a power of two, at most 16 splits, each at least WGRAD_MIN_ITERS blocks),
    summed in a fixed order (deterministic). The default of the searched variant (wgrad.py) and the
    launch of geometries outside its spec; under the interpreter small tiles (the interpreter's cost is
    per program and step). One stage: the gathered loads are not pipelined (as the forward's)."""
    if interpret:
        cfg = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 1, "PRECISION": "ieee"}
    else:
        cfg = {"BLOCK_M": 64 if KG >= 64 else 32, "BLOCK_N": 64 if NCOL >= 64 else 32, "BLOCK_K": 32,
               "num_warps": 4, "num_stages": 1, "PRECISION": "ieee"}
    programs = triton.cdiv(KG, cfg["BLOCK_M"]) * triton.cdiv(NCOL, cfg["BLOCK_N"]) * groups
    iters = triton.cdiv(P, cfg["BLOCK_K"])
    want = triton.cdiv(2 * target.sms, programs)
    split = max(1, min(WGRAD_MAX_SPLITS, want, iters // WGRAD_MIN_ITERS))
    cfg["SPLIT_K"] = 1 << (split.bit_length() - 1)  # a power of two (the searched values)
    return cfg


def launch_wgrad(a: torch.Tensor, b: torch.Tensor, dw: torch.Tensor, *, groups: int, transposed: bool,
                 stride, pad, dil, config: Mapping[str, Any] | None = None) -> torch.Tensor:
    """Weight gradient into ``dw``: ``a`` plays the output (KG channels per group), ``b`` the gathered input.
    ``config``: tiles, warps, stages, precision and SPLIT_K (default :func:`wgrad_config`); with
    SPLIT_K > 1 the splits' fp32 partials are summed in order by the matmul family's reduction kernel
    into a contiguous (G KG, CG x window) gradient (a contiguous temporary where ``dw`` is not that)."""
    for name, t in (("a", a), ("b", b), ("weight", dw)):
        if sample_span(t) >= INDEX_LIMIT:
            raise InvalidInputError(f"size of {name}", "element offsets within one sample below 2^31", sample_span(t))
    (a5, sa), (b5, sb) = readable(as_3d(a)), readable(as_3d(b))
    N, KGt, OD, OH, OW = a5.shape
    _, CGt, D, H, W = b5.shape
    KD, KH, KW = as_3d(dw).shape[2:]
    KG, CG = KGt // groups, CGt // groups
    out = dw
    sw = weight_strides(dw, groups, False)
    if not weight_nests(sw, (groups, KG, CG, KD, KH, KW)):  # overlapping or permuted: a contiguous temporary
        dw = torch.empty(dw.shape, dtype=dw.dtype, device=dw.device)
        sw = weight_strides(dw, groups, False)
    _check(wgrad_limits(N, groups, CG, KG, (D, H, W), (OD, OH, OW), (KD, KH, KW), tuple(stride), tuple(pad),
                        tuple(dil), sa, sb, sw))
    ncol = CG * KD * KH * KW
    c = config or wgrad_config(N * OD * OH * OW, KG, ncol, groups, current_device().target, INTERPRET)
    tiles = triton.cdiv(KG, c["BLOCK_M"]) * triton.cdiv(ncol, c["BLOCK_N"])
    iters = triton.cdiv(N * OD * OH * OW, c["BLOCK_K"])
    ips = triton.cdiv(iters, c.get("SPLIT_K", 1))
    splits = triton.cdiv(iters, ips)  # every split non-empty
    partial = scratch((splits, groups * KG, ncol), torch.float32, a.device) if splits > 1 else dw
    if splits > 1 and not dw.is_contiguous():  # the reduction writes the gradient row-major
        dw = torch.empty(dw.shape, dtype=dw.dtype, device=dw.device)
    # dw is addressed as dw[g, k, c, t] with k the rows of a: the forward weight layout (K, C/G) when a
    # is dy, the transposed layout (C, K/G) when a is x; both are "rows of a first"
    K.conv_wgrad_kernel[(tiles, groups, splits)](
        a5, b5, dw, partial, N, KG, CG, D, H, W, OD, OH, OW, KD, KH, KW, *stride, *pad, *dil, *sa, *sb, *sw, ips,
        BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], IS_FP32=a.dtype == torch.float32,
        PRECISION=c["PRECISION"], EMULATE=emulated(a.dtype, tf32=c["PRECISION"] == "tf32"), SPLIT=splits > 1,
        num_warps=c["num_warps"], num_stages=c["num_stages"])
    if splits > 1:
        MK.matmul_splitk_reduce_kernel[(triton.cdiv(groups * KG * ncol, WGRAD_REDUCE_BLOCK), 1)](
            partial, dw, dw, groups * KG, ncol, splits, 0, ncol, 1, 0, BLOCK=WGRAD_REDUCE_BLOCK,
            HAS_BIAS=False, ACTIVATION="none", EMULATE=emulated(dw.dtype), num_warps=4)
    if dw is not out:
        out.copy_(dw)
    return out


class ImplicitGemmConv(Variant):
    op = "conv"
    name = "implicit_gemm"
    phased = False  # launch conv_transpose_phase_kernel (PhasedTransposedConv)
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
        addresses (about 3), plus a fixed overhead for the index math, and for a transposed conv the
        exact redo's two tiles (``exact_products``). Fitted so the defaults of the
        `warpsmith gpucheck --ops conv` problems do not spill on sm_90."""
        # the exact redo's flag and count tiles (kernel.py): two accumulator-sized tiles
        return gather_gemm_registers(p.dtype, c, target, 8, 3, 2 if p.attrs["transposed"] else 0)

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
                           activation=a["activation"], scale=a["scale"], config=config, phased=self.phased)


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


class PhasedTransposedConv(ImplicitGemmConv):
    """A strided transposed conv by output phase (``conv_transpose_phase_kernel``): each phase's pixels
    reduce over C/G x only the taps that feed them, about 1 / (stride product) of the window, where the
    implicit GEMM walks the whole window and masks the stride holes. No split-K."""

    name = "phased"
    phased = True

    @staticmethod
    def gemm_shape(p: Problem) -> tuple[int, int, int, int]:
        """As the implicit GEMM's, the reduction being the taps a phase reads, averaged over the phases
        (C/G x the product over axes of the mean of :func:`phase_taps`), at least 1."""
        M, N, _, G = ImplicitGemmConv.gemm_shape(p)
        g = geometry(p)
        taps = 1.0
        for k, s_, pd, dl in zip(g["KS"], g["S"], g["P"], g["DL"]):
            taps *= sum(phase_taps(r, k, s_, pd, dl) for r in range(s_)) / s_
        return M, N, max(1, round(p.shape["C"] // G * taps)), G

    def regs_per_thread(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        """The implicit GEMM's estimate plus the phase's index state (three axes of first tap, step,
        count, base; the row coordinates of the phase grid): fitted on `gpucheck --ops conv`, sm_90."""
        return super().regs_per_thread(p, c, target) + 64

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        g = geometry(p)
        if not p.attrs["transposed"]:
            return "phased is for transposed convs"
        if g["S"] == (1, 1, 1):
            return "unit stride: no stride holes to skip (the implicit GEMM is the same work)"
        if math.prod(g["S"]) > MAX_GROUPS:
            return f"stride product {math.prod(g['S'])} exceeds {MAX_GROUPS} phases (grid axis 2)"
        if c["SPLIT_K"] != 1:
            return "phased has no split-K"
        return super().invalid(p, c, target)

    def space(self, p: Problem, target: Target) -> Space:
        s = super().space(p, target)
        return Space({**s.fragments, "SPLIT_K": fixed(1)})

    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = super().default_config(p, target)
        cfg["SPLIT_K"] = 1
        return cfg

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import phased_for_config

        return phased_for_config(self.typed(config), problem)


from .depthwise import DepthwiseConv  # noqa: E402  (it builds on this module's helpers)

# in order of preference for the heuristic default (dispatch without a record): depthwise where it is
# valid (one input channel per group, direct), the phased kernel for a strided transposed conv, else
# the implicit GEMM
VARIANTS: tuple[Variant, ...] = (DepthwiseConv(), PhasedTransposedConv(), ImplicitGemmConv(), PointwiseConv())
