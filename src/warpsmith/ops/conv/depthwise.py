"""The ``depthwise`` conv variant: a direct convolution (``depthwise_kernel.conv_depthwise_kernel``)
for forward, non-transposed convolutions with one input channel per group (``groups == C_in``,
channel multiplier ``KG = C_out / groups >= 1``).

- Space: BLOCK_P (output pixels per tile), BLOCK_C (output channels per tile, the vectorized axis),
  ORDER (how the program id splits into pixel and channel tiles), num_warps.
- Validity: C / G == 1, not transposed; the spec's dtypes (fp16, bf16, fp32: fp32 products and
  sums, never tf32, so a problem that allows tf32 still gets ieee results); a tile of at least one
  element per thread; the estimated registers within the target's (``work``, the memory model's
  register check).
- Cost model ``memory`` (cost/memory_model.py): DRAM bytes = x read once + w once + y written
  (+ residual, bias). Assumed: the KD x KH x KW re-reads of each x element by the window's taps
  (and by the neighbouring pixel tiles whose windows overlap) hit L1/L2, not DRAM; a tile's halo
  is small against L2 for the layer sizes this targets. Each tap is one dependent step of
  BLOCK_P x BLOCK_C loads; FLOPs 2 x pixels x C_out x window in fp32 (CUDA cores), the floor on
  the time where the window is large (7x7 in bf16 moves 4 bytes per 98 flops).
- Launch contract: :func:`depthwise_limits`, one definition the launcher checks on its integers
  (``_check``) and the symbolic contract (contract.py) states over symbols.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...core.variant import Config, Variant
from ...space import Enum, Pow2, Space
from ...targets import Target
from ..shared import kernel as common
from ..shared.launch import emulated
from . import depthwise_kernel as DK
from . import kernel as K
from .limits import INDEX_LIMIT, MAX_BLOCK, _gather_span, _geometry_limits, _pixel_span
from .spec import CONV, geometry
from .variant import _check, as_3d, memory_format_like, nesting_strides, readable, sample_span

ORDERS = ("pixels", "channels")
WARPS = (1, 2, 4, 8)
GRID_LIMIT = 2**31  # programs on grid axis 0 (CUDA's x extent is 2^31 - 1)


def _cdiv(a: Any, b: Any) -> Any:
    """Ceiling division of integers, or of z3 terms (``/`` is z3's integer division)."""
    return -(-a // b) if isinstance(a, int) and isinstance(b, int) else (a + b - 1) / b


def depthwise_weight_strides(w: torch.Tensor) -> tuple[int, int, int, int]:
    """Strides addressing the (C_out, 1, KD, KH, KW) weight as ``w[co, 0, kd, kh, kw]``: (swo, swd, swh, sww)."""
    st = readable(as_3d(w))[1]
    return (st[0], *st[2:])


def depthwise_limits(N: Any, G: Any, KG: Any, I: tuple, O: tuple, KS: tuple, stride: tuple, pad: tuple,
                     dil: tuple, sx: tuple, sw: tuple, sy: tuple, sr: tuple, sbias: Any, block_p: Any,
                     block_c: Any) -> list[tuple[str, Any, int]]:
    """``conv_depthwise_kernel``'s preconditions, each ``(what, value, bound)`` meaning ``value < bound``:
    the 32-bit quantities it computes on any lane (pixel and channel indices, the program id, every
    within-sample offset, masked lanes included; the batch offset is int64) and the spec's geometry
    ranges. Integers (the launcher checks them) or z3 terms (the contract's domain): one definition.
    ``G``: groups (= input channels), ``KG``: the channel multiplier; ``sx``, ``sy``, ``sr``: (n, c, d,
    h, w) strides; ``sw``: :func:`depthwise_weight_strides`; tuples are (d, h, w); ``block_p``,
    ``block_c``: the tile (at most ``MAX_BLOCK`` each)."""
    M, CO = N * O[0] * O[1] * O[2], G * KG
    return [
        ("output pixels", M + MAX_BLOCK, INDEX_LIMIT),
        ("output channels", CO + MAX_BLOCK, INDEX_LIMIT),
        ("programs", _cdiv(M, block_p) * _cdiv(CO, block_c), GRID_LIMIT),
        ("input offsets", _gather_span(G, sx[1], I, O, KS, stride, pad, dil, sx[2:]), INDEX_LIMIT),
        ("weight offsets", (CO + MAX_BLOCK) * sw[0] + sum((KS[i] * sw[1 + i] for i in range(3)), 0 * sw[0]),
         INDEX_LIMIT),
        ("output offsets", _pixel_span(CO, O, sy), INDEX_LIMIT),
        ("residual offsets", _pixel_span(CO, O, sr), INDEX_LIMIT),
        ("bias offsets", (CO + MAX_BLOCK) * sbias, INDEX_LIMIT),
    ] + _geometry_limits(stride, pad, dil)


def launch_depthwise(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None,
                     residual: torch.Tensor | None, *, stride, pad, dil, activation: str, scale: float,
                     config: Mapping[str, Any]) -> torch.Tensor:
    """The depthwise conv into ``y`` (any strides): ``x`` (N, C, ...), ``w`` (C KG, 1, window...); per-axis
    (d, h, w) geometry tuples."""
    x5, w5, out = as_3d(x), as_3d(w), y
    N, C = x5.shape[:2]
    CO = w5.shape[0]
    if w5.shape[1] != 1 or CO % C or y.shape[1] != CO or y.shape[0] != N:
        raise InvalidInputError("depthwise operands", "x (N, C, ...), w (C KG, 1, ...), y (N, C KG, ...)",
                                f"x {tuple(x.shape)}, w {tuple(w.shape)}, y {tuple(y.shape)}")
    for name, t in (("x", x), ("w", w), ("output", y), ("residual", residual)):
        if t is not None and sample_span(t) >= INDEX_LIMIT:
            raise InvalidInputError(f"size of {name}", "element offsets within one sample below 2^31 "
                                    "(the kernels index a sample in 32 bits)", sample_span(t))
    y5 = as_3d(y)
    sy = nesting_strides(y5)
    if sy is None:  # an output laid out otherwise (overlapping, permuted): a contiguous temporary, copied back
        y = torch.empty(y.shape, dtype=y.dtype, device=y.device)
        y5 = as_3d(y)
        sy = nesting_strides(y5)
    (x5, sx), w5 = readable(x5), readable(w5)[0]
    residual, bias = (readable(t)[0] if t is not None else None for t in (residual, bias))
    r5 = as_3d(residual) if residual is not None else y5
    sr = readable(r5)[1] if residual is not None else sy
    D, H, W = x5.shape[2:]
    OD, OH, OW = y5.shape[2:]
    KD, KH, KW = w5.shape[2:]
    sw = depthwise_weight_strides(w5)
    sbias = readable(bias)[1][0] if bias is not None else 1
    c = config
    bp, bc = c["BLOCK_P"], c["BLOCK_C"]
    if max(bp, bc) > MAX_BLOCK:
        raise InvalidInputError("depthwise tile", f"BLOCK_P and BLOCK_C at most {MAX_BLOCK}", (bp, bc))
    KG = CO // C
    _check(depthwise_limits(N, C, KG, (D, H, W), (OD, OH, OW), (KD, KH, KW), tuple(stride), tuple(pad),
                            tuple(dil), sx, sw, sy, sr, sbias, bp, bc))
    M = N * OD * OH * OW
    grid = (triton.cdiv(M, bp) * triton.cdiv(CO, bc),)
    has_bias, has_res = bias is not None, residual is not None
    DK.conv_depthwise_kernel[grid](
        x5, w5, y, bias if has_bias else y, residual if has_res else y,
        N, KG, CO, D, H, W, OD, OH, OW, KD, KH, KW, *stride, *pad, *dil, float(scale),
        *sx, *sw, *sy, *sr, sbias,
        BLOCK_P=bp, BLOCK_C=bc, ORDER=c["ORDER"], HAS_BIAS=has_bias, HAS_RES=has_res, ACTIVATION=activation,
        EMULATE=emulated(x.dtype), num_warps=c["num_warps"])
    if y is not out:
        out.copy_(y)
    return out


@dataclass(frozen=True, kw_only=True)
class DepthwiseKnobs(Knobs):
    BLOCK_P: int
    BLOCK_C: int
    ORDER: str
    num_warps: int


def depthwise_reason(p: Problem) -> str | None:
    """Why ``p`` is outside the depthwise kernel's domain, or None."""
    if p.attrs["transposed"]:
        return "depthwise runs direct (not transposed) convolutions only"
    G = p.shape.get("G", 1)
    if p.shape["C"] // G != 1:
        return f"depthwise needs one input channel per group (C / G = {p.shape['C'] // G})"
    if p.dtype not in CONV.dtypes:
        return f"depthwise runs {CONV.dtypes}, not {p.dtype}"
    return None


class DepthwiseConv(Variant):
    op = "conv"
    name = "depthwise"
    cost_model = "memory"
    knobs = DepthwiseKnobs
    kernel_modules = (DK, K, common)

    @staticmethod
    def extents(p: Problem) -> tuple[int, int, int]:
        """(output pixels, output channels, window volume)."""
        g = geometry(p)
        o, ks = g["O"], g["KS"]
        return p.shape["N"] * o[0] * o[1] * o[2], p.shape["K"], ks[0] * ks[1] * ks[2]

    def space(self, p: Problem, target: Target) -> Space:
        M, CO, _ = self.extents(p)
        d = self._heuristic(p)
        return Space({
            "BLOCK_P": Pow2(1, max(d["BLOCK_P"], min(MAX_BLOCK, triton.next_power_of_2(M))), d["BLOCK_P"]),
            "BLOCK_C": Pow2(1, max(d["BLOCK_C"], min(128, triton.next_power_of_2(CO))), d["BLOCK_C"]),
            "ORDER": Enum(ORDERS, d["ORDER"]),
            "num_warps": Enum(WARPS, d["num_warps"]),
        })

    @staticmethod
    def _heuristic(p: Problem) -> Config:
        """Channels-last: up to 64 channels wide (a 128-byte run in bf16) by enough pixels for 4096
        elements; NCHW: pixels are contiguous, so fewer channels and more pixels per tile."""
        M, CO, _ = DepthwiseConv.extents(p)
        cl = bool(p.attrs["channels_last"])
        bc = min(triton.next_power_of_2(CO), 64 if cl else 8)
        bp = min(triton.next_power_of_2(M), max(1, 4096 // bc), MAX_BLOCK)
        bp = max(bp, 32 // bc)  # at least a warp's worth of elements (lanes past the pixels are masked)
        warps = max(1, min(4, bp * bc // 256))
        return {"BLOCK_P": bp, "BLOCK_C": bc, "ORDER": "pixels", "num_warps": warps}

    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = self._heuristic(p)
        while self.rejection(p, cfg, target) and cfg["num_warps"] > 1:
            cfg["num_warps"] //= 2
        return cfg

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        why = depthwise_reason(p)
        if why:
            return why
        if max(c["BLOCK_P"], c["BLOCK_C"]) > MAX_BLOCK:
            return f"BLOCK_P and BLOCK_C at most {MAX_BLOCK}"
        if c["BLOCK_P"] * c["BLOCK_C"] < c["num_warps"] * target.warp_size:
            return f"tile {c['BLOCK_P']}x{c['BLOCK_C']} smaller than {c['num_warps']} warps"
        M, CO, _ = self.extents(p)
        if _cdiv(M, c["BLOCK_P"]) * _cdiv(CO, c["BLOCK_C"]) >= GRID_LIMIT:
            return "more programs than grid axis 0 holds"
        return None

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        M, CO, kvol = self.extents(p)
        e = p.dtype.itemsize
        xs = CONV.shapes(p)["x"]
        x_el = 1
        for s in xs:
            x_el *= s
        by = (x_el + CO * kvol + M * CO * (2 if p.attrs["residual"] else 1) + (CO if p.attrs["bias"] else 0)) * e
        per_thread = -(-c["BLOCK_P"] * c["BLOCK_C"] // (c["num_warps"] * target.warp_size))
        programs = _cdiv(M, c["BLOCK_P"]) * _cdiv(CO, c["BLOCK_C"])
        # accumulator, the loaded x tile, its 64-bit addresses per element, index math: an upper bound of
        # the 18 configs `warpsmith gpucheck --ops conv --sample 2` compiles for sm_90 (elements per thread
        # -> registers: 32 -> 128 in bf16, 167 in fp32; 16 -> 143; 8 -> 40 to 94; 4 and 2 -> 61; 1 -> 32)
        regs = 64 + 5 * per_thread
        return MemoryWork(bytes_moved=float(by), programs=programs, num_warps=c["num_warps"],
                          block_bytes=float(c["BLOCK_P"] * c["BLOCK_C"] * e), steps=float(kvol),
                          regs_per_thread=regs, flops=2.0 * M * CO * kvol, math_kind="fp32")

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"K": config["BLOCK_C"]}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import depthwise_for_config

        return depthwise_for_config(self.typed(config), problem)

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
               out: Any = None) -> torch.Tensor:
        p, a = problem, problem.attrs
        why = depthwise_reason(p)
        if why:
            raise InvalidInputError(f"problem {p.describe()}", "a depthwise convolution", why)
        g = geometry(p)
        x, w = inputs["x"], inputs["w"]
        shape = CONV.outputs(p)[0][0]
        if out is None:
            out = memory_format_like(x, shape, p.dtype)
        elif tuple(out.shape) != shape or out.dtype != p.dtype:
            raise InvalidInputError("out", f"a {shape} {p.dtype} tensor", f"{tuple(out.shape)} {out.dtype}")
        return launch_depthwise(x, w, out, inputs.get("bias"), inputs.get("residual"), stride=g["S"], pad=g["P"],
                                dil=g["DL"], activation=a["activation"], scale=a["scale"], config=self.typed(config))
