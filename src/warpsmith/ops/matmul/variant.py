"""GEMM variants: launchers, spaces, validity, guards and heuristics.

- ``tiled``: one program per output tile, grouped (L2-friendly) program order.
- ``splitk``: K cut into SPLIT_K slices computed by separate programs; partials reduced in
  a second pass in a fixed order (``REDUCE="workspace"``, deterministic) or accumulated with
  atomics (``REDUCE="atomic"``, declared non-deterministic).
- ``persistent``: a grid of PROGRAMS_PER_SM x SMs programs strides over all tiles.

Every variant has the guarded ``EVEN_K`` specialization (K masks dropped; needs
``K % BLOCK_K == 0``) and, for fp32, the ``PRECISION`` choice ieee/tf32 that the verifier
accepts only where the problem allows tf32.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...space import Bool, Enum, IntRange, Pow2, Space, fixed
from ...core.opspec import Problem
from ...targets import Target
from ..shared import kernel as common
from ..shared.launch import emulated, launch_target
from ...core.errors import InvalidInputError
from ...core.variant import Config, Guard, Variant, scratch
from ...cost.gemm_model import pipelined_fraction
from . import kernel as K
from .limits import INDEX_LIMIT, MAX_BLOCK

_EVEN_K = Guard("EVEN_K", "K % BLOCK_K == 0", lambda p, c: p.shape["K"] % c["BLOCK_K"] == 0,
                lambda shape, c: {**shape, "K": -(-shape["K"] // c["BLOCK_K"]) * c["BLOCK_K"]})
# registers besides the accumulator and operand tiles (indices, masks, addresses), and the persistent
# loop's extra state: fitted so the estimate bounds ptxas's counts from `warpsmith gpucheck` (sm_90)
_REG_OVERHEAD = 56
_PERSISTENT_REGS = 40


def index_span(rows: int, cols: int, stride_r: int, stride_c: int) -> int:
    """Largest element offset a tile may compute over a rows x cols operand (overshoot included)."""
    return (rows + MAX_BLOCK) * abs(stride_r) + (cols + MAX_BLOCK) * abs(stride_c)


def _pow2_cap(n: int, lo: int, hi: int) -> int:
    """Smallest power of two >= n, clamped to [lo, hi]."""
    return max(lo, min(hi, triton.next_power_of_2(n)))


def _emulate(problem: Problem, config: Mapping[str, Any]) -> bool:
    return emulated(problem.dtype, tf32=config["PRECISION"] == "tf32")


@dataclass(frozen=True, kw_only=True)
class TiledKnobs(Knobs):
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int
    num_warps: int
    num_stages: int
    EVEN_K: bool = False  # guarded: K % BLOCK_K == 0
    PRECISION: str = "ieee"  # or "tf32" (fp32 only)


@dataclass(frozen=True, kw_only=True)
class SplitKKnobs(TiledKnobs):
    SPLIT_K: int
    REDUCE: str = "workspace"  # or "atomic" (non-deterministic)


@dataclass(frozen=True, kw_only=True)
class PersistentKnobs(TiledKnobs):
    PROGRAMS_PER_SM: int


def tile_resources(v: Variant, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
    """Why a GEMM-like tile config does not fit ``target`` (shared memory, registers, a tile too small
    for its warps), or None: the one place of these rules for every tiled GEMM (matmul, conv, scaled)."""
    smem = v.smem_bytes(p, c)
    if smem > target.smem_per_block:
        return f"shared memory {smem} B > {target.smem_per_block} B on {target.name}"
    regs, cap = v.regs_per_thread(p, c, target), target.max_regs_per_thread(c["num_warps"])
    if regs > cap:
        return f"about {regs} registers per thread > {cap} at {c['num_warps']} warps on {target.name} (would spill)"
    if c["BLOCK_M"] * c["BLOCK_N"] < 16 * 16 * c["num_warps"] // 2:
        return f"tile {c['BLOCK_M']}x{c['BLOCK_N']} too small for {c['num_warps']} warps"
    return None


class _Gemm(Variant):
    op = "matmul"
    cost_model = "gemm"
    guards = (_EVEN_K,)
    kernel_modules = (K, common)

    # ---- space ------------------------------------------------------------------------
    def _base_space(self, p: Problem) -> dict:
        M, N, Kd = p.shape["M"], p.shape["N"], p.shape["K"]
        return {
            "BLOCK_M": Pow2(16, _pow2_cap(M, 16, 256), _pow2_cap(M, 16, 128)),
            "BLOCK_N": Pow2(16, _pow2_cap(N, 16, 256), _pow2_cap(N, 16, 128)),
            "BLOCK_K": Pow2(16, _pow2_cap(Kd, 16, 128), _pow2_cap(Kd, 16, 32 if p.dtype == torch.float32 else 64)),
            "GROUP_M": Enum((1, 2, 4, 8, 16), 8),
            "num_warps": Enum((2, 4, 8), 4),
            # with neither operand's leading stride a multiple of 16 elements, Triton pipelines no
            # load of the K loop (gemm_model.pipelined_fraction) and num_stages is a dead knob
            "num_stages": IntRange(1, 5, 3) if pipelined_fraction(p) > 0 else fixed(1),
            "EVEN_K": Bool(False) if Kd % 16 == 0 else fixed(False),
            "PRECISION": Enum(("ieee", "tf32"), "ieee") if p.dtype == torch.float32 else fixed("ieee"),
        }

    def space(self, problem: Problem, target: Target) -> Space:
        return Space(self._base_space(problem))

    # ---- validity (the one place for resource constraints) -------------------------------
    def smem_bytes(self, p: Problem, c: Mapping[str, Any]) -> int:
        e = p.dtype.itemsize
        return c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * e

    def regs_per_thread(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        """Estimated 32-bit registers per thread: the fp32 accumulator, the operand fragments where the
        MMA takes them from registers, plus, for each operand Triton cannot pipeline (gemm_model.pipelined_fraction), its tile held in registers and one 64-bit
        address per element (unaligned loads are not vectorized), plus a fixed overhead. Checked
        against ptxas's counts by ``warpsmith gpucheck``."""
        threads = c["num_warps"] * target.warp_size
        acc = c["BLOCK_M"] * c["BLOCK_N"] // threads
        tiles = (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] / threads  # operand elements per thread
        # Hopper's warpgroup MMA reads both operands from shared memory; the warp-level MMA (fewer than
        # 4 warps, M tiles under 64, other targets) holds their fragments in registers
        fma = p.dtype == torch.float32 and c["PRECISION"] == "ieee"  # no tensor cores: FMA outer products
        wgmma = target.arch == "sm_90" and c["num_warps"] % 4 == 0 and c["BLOCK_M"] >= 64 and not fma
        frags = 4 * tiles if fma else 0.0 if wgmma else tiles * p.dtype.itemsize / 4
        sync = 1.0 - pipelined_fraction(p)  # share of the operand tiles loaded synchronously
        loop_state = _PERSISTENT_REGS if self.name == "persistent" else 0
        return int(acc + frags + sync * tiles * (p.dtype.itemsize / 4 + 2) + _REG_OVERHEAD + loop_state)

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        return tile_resources(self, p, c, target)

    # ---- heuristic -------------------------------------------------------------------------
    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = self.space(p, target).default()
        cfg["EVEN_K"] = bool(p.shape["K"] % cfg["BLOCK_K"] == 0)
        # M == 1 is a constant to Triton (it specializes 1), and there ptxas spilled the 4-warp 16x128 tile
        # of the Llama decode shapes (gpucheck via benchmarks/matmul.py --dry-run); 8 warps do not spill
        cfg["num_warps"] = 8 if cfg["BLOCK_M"] * cfg["BLOCK_N"] >= 128 * 128 or p.shape["M"] == 1 else 4
        while self.smem_bytes(p, cfg) > target.smem_per_block and cfg["num_stages"] > 1:
            cfg["num_stages"] -= 1

        def spills() -> bool:
            return self.regs_per_thread(p, cfg, target) > target.max_regs_per_thread(cfg["num_warps"])

        while spills() and cfg["BLOCK_K"] > 16:  # registers: shallower operand tiles first
            cfg["BLOCK_K"] //= 2
            cfg["EVEN_K"] = bool(p.shape["K"] % cfg["BLOCK_K"] == 0)
        while spills() and max(cfg["BLOCK_M"], cfg["BLOCK_N"]) > 16:  # then smaller tiles
            cfg["BLOCK_M" if cfg["BLOCK_M"] >= cfg["BLOCK_N"] else "BLOCK_N"] //= 2
        while self.invalid(p, cfg, target) and cfg["num_warps"] > 2:  # small tiles: fewer warps
            cfg["num_warps"] //= 2
        return cfg

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self.name, self.typed(config), bool(problem.attrs["bias"]), problem.attrs["activation"])

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"M": config["BLOCK_M"], "N": config["BLOCK_N"], "K": config["BLOCK_K"]}

    # ---- launch helpers --------------------------------------------------------------------
    @staticmethod
    def _operands(inputs: Mapping[str, torch.Tensor], p: Problem, out: torch.Tensor | None):
        a, b, bias = inputs["a"], inputs["b"], inputs.get("bias")
        M, N, Kd = p.shape["M"], p.shape["N"], p.shape["K"]
        batch = p.shape.get("B", 1)
        if out is None:
            shape = (batch, M, N) if "B" in p.shape else (M, N)
            out = torch.empty(shape, dtype=p.dtype, device=a.device)
        sa = (a.stride(0) if a.dim() == 3 else 0, a.stride(-2), a.stride(-1))
        sb = (b.stride(0) if b.dim() == 3 else 0, b.stride(-2), b.stride(-1))
        sc = (out.stride(0) if out.dim() == 3 else 0, out.stride(-2), out.stride(-1))
        has_bias = bias is not None
        sbias = bias.stride(0) if has_bias else 0
        for name, span in (("a", index_span(M, Kd, sa[1], sa[2])), ("b", index_span(Kd, N, sb[1], sb[2])),
                           ("output", index_span(M, N, sc[1], sc[2])), ("bias", index_span(N, 0, sbias, 0))):
            if span >= INDEX_LIMIT:
                raise InvalidInputError(f"size of {name}", f"element offsets below 2^31 within one batch entry "
                                        "(the kernels index in 32 bits)", f"offsets up to {span}")
        return a, b, (bias if has_bias else out), out, (M, N, Kd, batch), sa, sb, sc, sbias, has_bias

    @staticmethod
    def _meta(p: Problem, c: Mapping[str, Any]) -> dict:
        return dict(BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], GROUP_M=c["GROUP_M"],
                    EVEN_K=bool(c["EVEN_K"]), IS_FP32=p.dtype == torch.float32, PRECISION=c["PRECISION"],
                    EMULATE=_emulate(p, c), num_warps=c["num_warps"], num_stages=c["num_stages"])

    @staticmethod
    def tiles(p: Problem, c: Mapping[str, Any]) -> int:
        return triton.cdiv(p.shape["M"], c["BLOCK_M"]) * triton.cdiv(p.shape["N"], c["BLOCK_N"])


class TiledGemm(_Gemm):
    name = "tiled"
    knobs = TiledKnobs

    def launch(self, inputs, problem, config, out=None):
        a, b, bias, out, (M, N, Kd, batch), sa, sb, sc, sbias, has_bias = self._operands(inputs, problem, out)
        grid = (self.tiles(problem, config), batch)
        K.matmul_tiled_kernel[grid](
            a, b, out, bias, M, N, Kd, *sa, *sb, *sc, sbias,
            HAS_BIAS=has_bias, ACTIVATION=problem.attrs["activation"], **self._meta(problem, config))
        return out


class SplitKSlices:
    """K cut into SPLIT_K slices of whole BLOCK_K steps: none may be empty (the one place of that
    rule, for every split-K GEMM: this family's and the scaled GEMM's)."""

    def k_per_split(self, p: Problem, c: Mapping[str, Any]) -> int:
        bk = c["BLOCK_K"]
        return triton.cdiv(triton.cdiv(p.shape["K"], c["SPLIT_K"]), bk) * bk

    def invalid(self, p, c, target):
        why = super().invalid(p, c, target)
        if why:
            return why
        if (c["SPLIT_K"] - 1) * self.k_per_split(p, c) >= p.shape["K"]:
            return (f"SPLIT_K={c['SPLIT_K']} leaves empty slices: K={p.shape['K']} in slices of "
                    f"{self.k_per_split(p, c)} (a multiple of BLOCK_K={c['BLOCK_K']})")
        return None

    def default_config(self, p, target):
        cfg = super().default_config(p, target)
        while self.invalid(p, cfg, target) and cfg["SPLIT_K"] > 2:
            cfg["SPLIT_K"] //= 2
        return cfg


class SplitKGemm(SplitKSlices, _Gemm):
    name = "splitk"
    knobs = SplitKKnobs

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        c = self.typed(config)
        return {"M": c.BLOCK_M, "N": c.BLOCK_N, "K": c.BLOCK_K * c.SPLIT_K}
    REDUCE_BLOCK = 1024

    def space(self, problem: Problem, target: Target) -> Space:
        frags = self._base_space(problem)
        frags["SPLIT_K"] = Enum((2, 4, 8, 16), 4)
        frags["REDUCE"] = Enum(("workspace", "atomic"), "workspace")
        return Space(frags)


    def is_deterministic(self, config):
        return config["REDUCE"] != "atomic"

    def launch(self, inputs, problem, config, out=None):
        a, b, bias, out, (M, N, Kd, batch), sa, sb, sc, sbias, has_bias = self._operands(inputs, problem, out)
        split, atomic = config["SPLIT_K"], config["REDUCE"] == "atomic"
        if atomic:
            partial = torch.zeros((batch, 1, M, N), dtype=torch.float32, device=a.device)
        else:
            partial = scratch((batch, split, M, N), torch.float32, a.device)
        grid = (self.tiles(problem, config), split, batch)
        meta = self._meta(problem, config)
        K.matmul_splitk_kernel[grid](
            a, b, partial, M, N, Kd, self.k_per_split(problem, config), *sa, *sb, ATOMIC=atomic, **meta)
        rgrid = (triton.cdiv(M * N, self.REDUCE_BLOCK), batch)
        K.matmul_splitk_reduce_kernel[rgrid](
            partial, out, bias, M, N, 1 if atomic else split, *sc, sbias,
            BLOCK=self.REDUCE_BLOCK, HAS_BIAS=has_bias, ACTIVATION=problem.attrs["activation"],
            EMULATE=meta["EMULATE"], num_warps=4)
        return out


class PersistentGemm(_Gemm):
    name = "persistent"
    knobs = PersistentKnobs

    def space(self, problem: Problem, target: Target) -> Space:
        frags = self._base_space(problem)
        frags["PROGRAMS_PER_SM"] = Enum((1, 2), 1)
        return Space(frags)

    def programs(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        return max(1, min(self.tiles(p, c) * p.shape.get("B", 1), c["PROGRAMS_PER_SM"] * target.sms))

    def launch(self, inputs, problem, config, out=None, target: Target | None = None):

        a, b, bias, out, (M, N, Kd, batch), sa, sb, sc, sbias, has_bias = self._operands(inputs, problem, out)
        grid = (self.programs(problem, config, launch_target(target)),)
        K.matmul_persistent_kernel[grid](
            a, b, out, bias, M, N, Kd, batch, *sa, *sb, *sc, sbias,
            HAS_BIAS=has_bias, ACTIVATION=problem.attrs["activation"], **self._meta(problem, config))
        return out


VARIANTS: tuple[Variant, ...] = (TiledGemm(), SplitKGemm(), PersistentGemm())
