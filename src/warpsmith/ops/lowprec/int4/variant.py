"""Weight-only int4 GEMM variants: launchers, spaces, validity, guards, heuristics.

- ``gemv`` (M <= 16, decode): one program per (row, BLOCK_N columns, K slice); SPLIT_K slices summed
  by a second, fixed-order pass (deterministic), or written directly with one slice. The weight is
  re-read per row (from L2), so it is valid only for M <= 16.
- ``gemm`` (any M; the one for large M): (BLOCK_M, BLOCK_N) output tiles, the dequantized weight tile
  fed to ``tl.dot``.

Both carry the guard ``PACKED`` (always on): the formats' shape constraints ``N % 8 == 0`` and
``K % GROUP == 0`` (formats.py), so dispatch checks them and the verifier's odd shapes respect
them. Packed tensors are contiguous; x may have any strides; every offset is 32-bit
(``INDEX_LIMIT``: the launcher refuses larger operands).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ....core._triton import triton
from ....core.config import Knobs
from ....core.errors import InvalidInputError
from ....core.opspec import Problem
from ....core.variant import Config, Guard, Variant, scratch
from ....cost.memory_model import MemoryWork
from ....space import Enum, Pow2, Space, fixed
from ....targets import Target
from ...shared import kernel as common
from ...shared.launch import allocate, emulated
from . import kernel as K
from .limits import INDEX_LIMIT, MAX_BLOCK

GEMV_MAX_M = 16


def _fits(shape: dict[str, int], c: Mapping[str, Any]) -> dict[str, int]:
    g = c["GROUP"]
    return {**shape, "N": -(-shape["N"] // 8) * 8, "K": -(-shape["K"] // g) * g}


_PACKED = Guard("PACKED", "N % 8 == 0 and K % GROUP == 0 (the packed formats)",
                lambda p, c: p.shape["N"] % 8 == 0 and p.shape["K"] % c["GROUP"] == 0, _fits)


@dataclass(frozen=True, kw_only=True)
class GemmKnobs(Knobs):
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    num_warps: int
    num_stages: int
    GROUP: int  # the problem's group size (fixed): the guard reads it
    PACKED: bool = True


@dataclass(frozen=True, kw_only=True)
class GemvKnobs(Knobs):
    BLOCK_N: int
    BLOCK_K: int
    SPLIT_K: int
    num_warps: int
    GROUP: int
    PACKED: bool = True


def _pow2_cap(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, triton.next_power_of_2(n)))


class _Int4(Variant):
    op = "int4_matmul"
    cost_model = "memory"
    guards = (_PACKED,)
    kernel_modules = (K, common)

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {a: config[f"BLOCK_{a}"] for a in ("M", "N", "K") if f"BLOCK_{a}" in config}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self.name, config, problem.attrs)

    def _operands(self, inputs: Mapping[str, torch.Tensor], p: Problem, out: Any):
        x = inputs["x"]
        M, N, Kd = p.shape["M"], p.shape["N"], p.shape["K"]
        span = (M + MAX_BLOCK) * abs(x.stride(0)) + (Kd + MAX_BLOCK) * abs(x.stride(1))
        if span >= INDEX_LIMIT or (Kd + MAX_BLOCK) * (N + MAX_BLOCK) >= INDEX_LIMIT \
                or (M + MAX_BLOCK) * (N + MAX_BLOCK) >= INDEX_LIMIT:
            raise InvalidInputError("size of int4_matmul operands", "element offsets below 2^31 (32-bit indexing)",
                                    f"M={M}, N={N}, K={Kd}, x strides {tuple(x.stride())}")
        (y,) = allocate(out, ((( M, N), p.dtype),), x.device, unit_cols=True)
        if y.stride(0) != N:
            raise InvalidInputError("out", f"a contiguous ({M}, {N}) tensor", f"strides {tuple(y.stride())}")
        qw, qz, s = inputs["qweight"], inputs["qzeros"], inputs["scales"]
        gidx = inputs.get("g_idx", qw)  # a placeholder pointer where ACT_ORDER is off (never read)
        bias = inputs.get("bias", y) if p.attrs["bias"] else y
        return x, qw, qz, s, gidx, bias, y

    @staticmethod
    def _meta(p: Problem) -> dict:
        return dict(FORMAT=p.attrs["format"], GROUP=p.attrs["group_size"], ACT_ORDER=bool(p.attrs["act_order"]),
                    HAS_BIAS=bool(p.attrs["bias"]), EMULATE=emulated(p.dtype))

    def _bytes(self, p: Problem, weight_reads: int) -> float:
        M, N, Kd, G = p.shape["M"], p.shape["N"], p.shape["K"], p.attrs["group_size"]
        e = p.dtype.itemsize
        weight = Kd * N / 2 + (Kd // G) * N * (e + 0.5)
        return weight * weight_reads + e * (M * Kd + M * N)


class Int4Gemm(_Int4):
    name = "gemm"
    knobs = GemmKnobs

    def space(self, p: Problem, target: Target) -> Space:
        M, N, Kd = p.shape["M"], p.shape["N"], p.shape["K"]
        return Space({
            "BLOCK_M": Pow2(16, _pow2_cap(M, 16, 128), _pow2_cap(M, 16, 64)),
            "BLOCK_N": Pow2(16, _pow2_cap(N, 16, 256), _pow2_cap(N, 16, 64)),
            "BLOCK_K": Pow2(16, _pow2_cap(Kd, 16, 128), _pow2_cap(Kd, 16, 32)),
            "num_warps": Enum((2, 4, 8), 4),
            "num_stages": Enum((1, 2, 3, 4), 2),
            "GROUP": fixed(p.attrs["group_size"]),
            "PACKED": fixed(True),
        })

    def regs_per_thread(self, c: Mapping[str, Any], target: Target) -> int:
        """The fp32 accumulator, the x tile, and the weight tile with its words, zeros, scales and
        group indices (about 5 values per weight element in flight), plus overhead."""
        threads = c["num_warps"] * target.warp_size
        return int((c["BLOCK_M"] * c["BLOCK_N"] + c["BLOCK_M"] * c["BLOCK_K"] / 2
                    + 5 * c["BLOCK_K"] * c["BLOCK_N"]) / threads + 48)

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        regs, cap = self.regs_per_thread(c, target), target.max_regs_per_thread(c["num_warps"])
        if regs > cap:
            return f"about {regs} registers per thread > {cap} at {c['num_warps']} warps on {target.name} (would spill)"
        if c["BLOCK_M"] * c["BLOCK_N"] < 16 * 16 * c["num_warps"] // 2:
            return f"tile {c['BLOCK_M']}x{c['BLOCK_N']} too small for {c['num_warps']} warps"
        # Triton pipelines the gathered loads of a stage through shared memory: the x tile, and per weight
        # element its int32 word and zero word (fitted to ptxas's counts from `warpsmith gpucheck`, sm_90)
        smem = c["num_stages"] * (c["BLOCK_M"] * c["BLOCK_K"] * p.dtype.itemsize + c["BLOCK_K"] * c["BLOCK_N"] * 8)
        if smem > target.smem_per_block:
            return f"shared memory about {smem} B > {target.smem_per_block} B on {target.name}"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = self.space(p, target).default()
        if p.shape["M"] >= 256:
            cfg.update(BLOCK_M=_pow2_cap(p.shape["M"], 16, 128), BLOCK_N=_pow2_cap(p.shape["N"], 16, 128),
                       num_warps=8)
        while self.invalid(p, cfg, target) and cfg["BLOCK_K"] > 16:
            cfg["BLOCK_K"] //= 2
        while self.invalid(p, cfg, target) and cfg["num_warps"] > 2:
            cfg["num_warps"] //= 2
        return cfg

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> MemoryWork:
        tiles_m = triton.cdiv(p.shape["M"], c["BLOCK_M"])
        programs = tiles_m * triton.cdiv(p.shape["N"], c["BLOCK_N"])
        return MemoryWork(bytes_moved=self._bytes(p, tiles_m), programs=programs, num_warps=c["num_warps"],
                          block_bytes=c["BLOCK_K"] * (c["BLOCK_N"] / 2 + c["BLOCK_M"] * p.dtype.itemsize),
                          steps=triton.cdiv(p.shape["K"], c["BLOCK_K"]), regs_per_thread=self.regs_per_thread(c, target),
                          flops=2.0 * p.shape["M"] * p.shape["N"] * p.shape["K"],
                          math_kind="bf16" if p.dtype == torch.bfloat16 else "fp16")

    def launch(self, inputs, problem, config, out=None):
        x, qw, qz, s, gidx, bias, y = self._operands(inputs, problem, out)
        M, N, Kd = problem.shape["M"], problem.shape["N"], problem.shape["K"]
        grid = (triton.cdiv(N, config["BLOCK_N"]), triton.cdiv(M, config["BLOCK_M"]))
        K.int4_matmul_gemm_kernel[grid](
            x, qw, qz, s, gidx, bias, y, M, N, Kd, Kd // problem.attrs["group_size"], x.stride(0), x.stride(1),
            BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"],
            num_warps=config["num_warps"], num_stages=config["num_stages"], **self._meta(problem))
        return y


class Int4Gemv(_Int4):
    name = "gemv"
    knobs = GemvKnobs
    REDUCE_BLOCK = 256

    def space(self, p: Problem, target: Target) -> Space:
        N, Kd = p.shape["N"], p.shape["K"]
        return Space({
            "BLOCK_N": Pow2(16, _pow2_cap(N, 16, 256), _pow2_cap(N, 16, 64)),
            "BLOCK_K": Pow2(16, _pow2_cap(Kd, 16, 256), _pow2_cap(Kd, 16, 128)),
            "SPLIT_K": Enum((1, 2, 4, 8, 16), 1),
            "num_warps": Enum((1, 2, 4, 8), 4),
            "GROUP": fixed(p.attrs["group_size"]),
            "PACKED": fixed(True),
        })

    def k_per_split(self, p: Problem, c: Mapping[str, Any]) -> int:
        bk = c["BLOCK_K"]
        return triton.cdiv(triton.cdiv(p.shape["K"], c["SPLIT_K"]), bk) * bk

    def regs_per_thread(self, c: Mapping[str, Any], target: Target) -> int:
        threads = c["num_warps"] * target.warp_size
        return int(6 * c["BLOCK_K"] * c["BLOCK_N"] / threads + c["BLOCK_N"] / threads + 40)

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        if p.shape["M"] > GEMV_MAX_M:
            return f"M={p.shape['M']} > {GEMV_MAX_M}: the GEMV path re-reads the weight for every row"
        regs, cap = self.regs_per_thread(c, target), target.max_regs_per_thread(c["num_warps"])
        if regs > cap:
            return f"about {regs} registers per thread > {cap} at {c['num_warps']} warps on {target.name} (would spill)"
        if (c["SPLIT_K"] - 1) * self.k_per_split(p, c) >= p.shape["K"]:
            return (f"SPLIT_K={c['SPLIT_K']} leaves empty slices: K={p.shape['K']} in slices of "
                    f"{self.k_per_split(p, c)} (a multiple of BLOCK_K={c['BLOCK_K']})")
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = self.space(p, target).default()
        # enough programs to fill the machine: split K while the N tiles times rows are few
        programs = triton.cdiv(p.shape["N"], cfg["BLOCK_N"]) * p.shape["M"]
        while programs * cfg["SPLIT_K"] < 2 * target.sms and cfg["SPLIT_K"] < 16:
            cfg["SPLIT_K"] *= 2
        while self.invalid(p, cfg, target) and cfg["SPLIT_K"] > 1:
            cfg["SPLIT_K"] //= 2
        while self.invalid(p, cfg, target) and cfg["BLOCK_K"] > 16:
            cfg["BLOCK_K"] //= 2
        return cfg

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> MemoryWork:
        M, N = p.shape["M"], p.shape["N"]
        split = c["SPLIT_K"]
        partial = 8.0 * M * N * split if split > 1 else 0.0
        return MemoryWork(bytes_moved=self._bytes(p, M) + partial, programs=triton.cdiv(N, c["BLOCK_N"]) * split * M,
                          num_warps=c["num_warps"], block_bytes=c["BLOCK_K"] * c["BLOCK_N"] / 2,
                          steps=self.k_per_split(p, c) // c["BLOCK_K"], regs_per_thread=self.regs_per_thread(c, target),
                          launches=2 if split > 1 else 1, flops=2.0 * M * N * p.shape["K"])

    def launch(self, inputs, problem, config, out=None):
        x, qw, qz, s, gidx, bias, y = self._operands(inputs, problem, out)
        M, N, Kd = problem.shape["M"], problem.shape["N"], problem.shape["K"]
        split = config["SPLIT_K"]
        meta = self._meta(problem)
        if M * split * N >= INDEX_LIMIT:
            raise InvalidInputError("size of the split-K workspace", "M * SPLIT_K * N below 2^31 (32-bit indexing)",
                                    f"{M} * {split} * {N}")
        partial = scratch((M, split, N), torch.float32, x.device) if split > 1 else y
        grid = (triton.cdiv(N, config["BLOCK_N"]), split, M)
        K.int4_matmul_gemv_kernel[grid](
            x, qw, qz, s, gidx, bias, y, partial, M, N, Kd, Kd // problem.attrs["group_size"],
            self.k_per_split(problem, config), x.stride(0), x.stride(1),
            BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"], SPLIT_K=split, num_warps=config["num_warps"], **meta)
        if split > 1:
            K.int4_matmul_reduce_kernel[(triton.cdiv(N, self.REDUCE_BLOCK), M)](
                partial, bias, y, N, SPLIT_K=split, HAS_BIAS=meta["HAS_BIAS"], BLOCK=self.REDUCE_BLOCK,
                EMULATE=meta["EMULATE"], num_warps=4)
        return y


VARIANTS: tuple[Variant, ...] = (Int4Gemv(), Int4Gemm())
