"""Scaled GEMM variants: launchers, spaces, validity and heuristics.

- ``tiled``: one program per output tile (grouped order), scales applied in the kernel.
- ``splitk``: for small M (decode): K cut into SPLIT_K slices, each slice's *scaled* fp32 partial
  product written to a workspace, summed in a fixed order by the matmul family's reduction kernel
  (which adds bias and activation): deterministic.

Validity (:meth:`_Scaled.invalid`, the one place): block scaling needs BLOCK_K <= 128 (a power of
two, so a K tile never straddles two scale blocks); 8-bit dots need BLOCK_K >= 32; on Hopper
(``sm_90``) both operands must be K-major (layout ``nt``: A row-major, B = W^T of a row-major
weight W), the layout wgmma takes 8-bit operands in: the layout guard of every variant there (the
public op copies a non-K-major operand once into that layout on such a GPU).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ....core._triton import INTERPRET, triton
from ....core.config import Knobs
from ....core.errors import InvalidInputError
from ....core.opspec import Problem
from ....core.variant import Config, Variant, scratch
from ....space import Enum, IntRange, Pow2, Space
from ....targets import Target
from ...matmul import kernel as MK
from ...matmul.limits import INDEX_LIMIT
from ...matmul.variant import SplitKSlices, index_span, tile_resources
from ...shared import kernel as common
from ...shared.launch import emulated
from . import kernel as K
from ..quant.reference import BLOCK
from .spec import operand_formats

_REG_OVERHEAD = 56
_BLOCK_SCALED_VOLUME = 128 * 64 * 64  # largest block-scaled tile that compiled without spills


def _pow2_cap(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, triton.next_power_of_2(n)))


@dataclass(frozen=True, kw_only=True)
class ScaledKnobs(Knobs):
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int
    num_warps: int
    num_stages: int


@dataclass(frozen=True, kw_only=True)
class ScaledSplitKKnobs(ScaledKnobs):
    SPLIT_K: int


class _Scaled(Variant):
    op = "scaled_matmul"
    cost_model = "gemm"
    kernel_modules = (K, MK, common)

    def _base_space(self, p: Problem) -> dict:
        M, N, Kd = p.shape["M"], p.shape["N"], p.shape["K"]
        kmax = 128 if p.attrs["scaling"] == "block" else 256
        return {
            "BLOCK_M": Pow2(16, _pow2_cap(M, 16, 256), _pow2_cap(M, 16, 128)),
            "BLOCK_N": Pow2(16, _pow2_cap(N, 16, 256), _pow2_cap(N, 16, 128)),
            "BLOCK_K": Pow2(32, _pow2_cap(Kd, 32, kmax), _pow2_cap(Kd, 32, 128)),
            "GROUP_M": Enum((1, 4, 8, 16), 8),
            "num_warps": Enum((2, 4, 8), 4),
            "num_stages": IntRange(1, 5, 3),
        }

    def space(self, problem: Problem, target: Target) -> Space:
        return Space(self._base_space(problem))

    def smem_bytes(self, p: Problem, c: Mapping[str, Any]) -> int:
        return c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"]  # one byte per operand element

    def regs_per_thread(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        """fp32/int32 accumulator (two with block scaling: the running sum and the tile's partial), operand
        fragments where the MMA reads registers (not Hopper's wgmma), and a fixed overhead."""
        threads = c["num_warps"] * target.warp_size
        acc = c["BLOCK_M"] * c["BLOCK_N"] // threads * (2 if p.attrs["scaling"] == "block" else 1)
        wgmma = target.arch == "sm_90" and c["num_warps"] % 4 == 0 and c["BLOCK_M"] >= 64
        frags = 0 if wgmma else (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] // threads // 4
        return acc + frags + _REG_OVERHEAD

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        if p.attrs["scaling"] == "block" and c["BLOCK_K"] > BLOCK:
            return f"block scaling needs BLOCK_K <= {BLOCK} (one scale block per K tile), got {c['BLOCK_K']}"
        if p.attrs["scaling"] == "block" and c["BLOCK_M"] * c["BLOCK_N"] * c["BLOCK_K"] > _BLOCK_SCALED_VOLUME:
            # measured by `warpsmith gpucheck` (sm_90, Triton 3.9): block-scaled 128x128x128 at 8 warps spills
            # 1116 B per thread, 128x128x64 200 B (the per-tile partial product and its scaled sum are both live)
            return (f"block-scaled tile {c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} would spill "
                    f"(BLOCK_M x BLOCK_N x BLOCK_K must stay at most 128 x 64 x 64)")
        if c["BLOCK_K"] < 32:
            return f"8-bit dots need BLOCK_K >= 32, got {c['BLOCK_K']}"
        if target.arch == "sm_90" and p.attrs["layout"] != "nt":
            return (f"on {target.name} (sm_90) 8-bit wgmma operands must be K-major (layout nt), "
                    f"got layout {p.attrs['layout']}")
        return tile_resources(self, p, c, target)

    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = self.space(p, target).default()
        cfg["num_warps"] = 8 if cfg["BLOCK_M"] * cfg["BLOCK_N"] >= 128 * 128 else 4
        while p.attrs["scaling"] == "block" and cfg["BLOCK_M"] * cfg["BLOCK_N"] * cfg["BLOCK_K"] > _BLOCK_SCALED_VOLUME:
            if cfg["BLOCK_K"] > 64:  # see invalid()
                cfg["BLOCK_K"] //= 2
            else:
                cfg["BLOCK_M" if cfg["BLOCK_M"] >= cfg["BLOCK_N"] else "BLOCK_N"] //= 2
        while self.smem_bytes(p, cfg) > target.smem_per_block and cfg["num_stages"] > 1:
            cfg["num_stages"] -= 1
        while self.invalid(p, cfg, target) and max(cfg["BLOCK_M"], cfg["BLOCK_N"]) > 16 and \
                "registers" in (self.invalid(p, cfg, target) or ""):
            cfg["BLOCK_M" if cfg["BLOCK_M"] >= cfg["BLOCK_N"] else "BLOCK_N"] //= 2
        while (self.invalid(p, cfg, target) or "").startswith("tile") and cfg["num_warps"] > 2:
            cfg["num_warps"] //= 2
        return cfg

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self.name, config, problem.attrs)

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"M": config["BLOCK_M"], "N": config["BLOCK_N"], "K": config["BLOCK_K"]}

    # ---- launch helpers ------------------------------------------------------------------------
    @staticmethod
    def _operands(inputs: Mapping[str, torch.Tensor], p: Problem, out: torch.Tensor | None):
        a, b, sa, sb, bias = inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], inputs.get("bias")
        M, N, Kd = p.shape["M"], p.shape["N"], p.shape["K"]
        if out is None:
            out = torch.empty((M, N), dtype=p.dtype, device=a.device)
        scaling = p.attrs["scaling"]
        if scaling == "row":
            ssa, ssb = (sa.stride(0), 0), (0, sb.stride(1))
        elif scaling == "block":
            ssa, ssb = (sa.stride(0), sa.stride(1)), (sb.stride(0), sb.stride(1))
        else:
            ssa, ssb = (0, 0), (0, 0)
        sbias = bias.stride(0) if bias is not None else 0
        kb, nb = triton.cdiv(Kd, BLOCK), triton.cdiv(N, BLOCK)  # the block scales' grid
        scale_spans = {"row": ((M, 0, ssa[0], 0), (N, 0, ssb[1], 0)),
                       "block": ((M, kb, *ssa), (kb, nb, *ssb))}.get(scaling, ())
        for name, span in (("a", index_span(M, Kd, a.stride(0), a.stride(1))),
                           ("b", index_span(Kd, N, b.stride(0), b.stride(1))),
                           ("output", index_span(M, N, out.stride(0), out.stride(1))),
                           ("bias", index_span(N, 0, sbias, 0)),
                           *((f"scale_{ab}", index_span(*dims)) for ab, dims in zip("ab", scale_spans))):
            if span >= INDEX_LIMIT:
                raise InvalidInputError(f"size of {name}", "element offsets below 2^31 (the kernels index in 32 bits)",
                                        f"offsets up to {span}")
        strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), *ssa, *ssb)
        return a, b, sa, sb, (bias if bias is not None else out), out, strides, sbias, bias is not None

    @staticmethod
    def _meta(p: Problem, c: Mapping[str, Any]) -> dict:
        fa, fb = operand_formats(p.attrs)
        return dict(BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], GROUP_M=c["GROUP_M"],
                    SCALING=p.attrs["scaling"], IS_INT=p.attrs["format"] == "int8",
                    NAN_A=INTERPRET and fa == "e4m3", NAN_B=INTERPRET and fb == "e4m3",  # the interpreter's e4m3 NaN
                    num_warps=c["num_warps"], num_stages=c["num_stages"])

    @staticmethod
    def tiles(p: Problem, c: Mapping[str, Any]) -> int:
        return triton.cdiv(p.shape["M"], c["BLOCK_M"]) * triton.cdiv(p.shape["N"], c["BLOCK_N"])


class TiledScaled(_Scaled):
    name = "tiled"
    knobs = ScaledKnobs

    def launch(self, inputs, problem, config, out=None):
        a, b, sa, sb, bias, out, strides, sbias, has_bias = self._operands(inputs, problem, out)
        M, N, Kd = problem.shape["M"], problem.shape["N"], problem.shape["K"]
        K.scaled_mm_kernel[(self.tiles(problem, config),)](
            a, b, sa, sb, out, bias, M, N, Kd, *strides, out.stride(0), out.stride(1), sbias,
            HAS_BIAS=has_bias, ACTIVATION=problem.attrs["activation"], EMULATE=emulated(problem.dtype),
            **self._meta(problem, config))
        return out


class SplitKScaled(SplitKSlices, _Scaled):
    name = "splitk"
    knobs = ScaledSplitKKnobs
    REDUCE_BLOCK = 1024

    def space(self, problem: Problem, target: Target) -> Space:
        frags = self._base_space(problem)
        frags["SPLIT_K"] = Enum((2, 4, 8, 16), 4)
        return Space(frags)

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"M": config["BLOCK_M"], "N": config["BLOCK_N"], "K": config["BLOCK_K"] * config["SPLIT_K"]}

    def launch(self, inputs, problem, config, out=None):
        a, b, sa, sb, bias, out, strides, sbias, has_bias = self._operands(inputs, problem, out)
        M, N, Kd = problem.shape["M"], problem.shape["N"], problem.shape["K"]
        split = config["SPLIT_K"]
        partial = scratch((split, M, N), torch.float32, a.device)
        K.scaled_mm_splitk_kernel[(self.tiles(problem, config), split)](
            a, b, sa, sb, partial, M, N, Kd, self.k_per_split(problem, config), *strides,
            **self._meta(problem, config))
        MK.matmul_splitk_reduce_kernel[(triton.cdiv(M * N, self.REDUCE_BLOCK), 1)](
            partial, out, bias, M, N, split, 0, out.stride(0), out.stride(1), sbias,
            BLOCK=self.REDUCE_BLOCK, HAS_BIAS=has_bias, ACTIVATION=problem.attrs["activation"],
            EMULATE=emulated(problem.dtype), num_warps=4)
        return out


VARIANTS: tuple[Variant, ...] = (TiledScaled(), SplitKScaled())
