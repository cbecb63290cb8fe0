"""Cross-entropy variants: launchers, spaces, validity and heuristics.

- ``cross_entropy``: ``single`` holds ROWS whole rows in registers (one read of the logits);
  ``looped`` runs an online logsumexp over BLOCK_V chunks (any V, 256k included). Both write the
  per-row loss and the per-row logsumexp as its two fp32 parts (row max, log of the shifted sum),
  which the backward reuses; ``mean``/``sum`` add a one-program reduction (fixed order:
  deterministic).
- ``cross_entropy_backward``: ``single`` (one BLOCK_V >= V block per row) and ``looped``; both read
  the logits and the saved statistics once and write the gradient once. Given ``out=`` the logits
  themselves, the gradient is written in place (each element is read before it is overwritten by
  the same program); the verified kernel is the same, only the output pointer differs.
- ``fused_linear_cross_entropy`` (and its backward): see fused.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...cost.memory_model import MemoryWork
from ...space import Enum, Pow2, Space
from ...core.opspec import Problem
from ...targets import Target
from ..shared import kernel as common
from ..shared.launch import emulated
from ...core.variant import Config, Variant, scratch
from . import kernel as K
from .limits import INDEX_LIMIT, MAX_BLOCK_V, REDUCE_BLOCK

MAX_ELEMS_PER_THREAD = 64  # fp32 values of a block one thread holds before registers spill
WARPS = (1, 2, 4, 8, 16)


def np2(n: int) -> int:
    return triton.next_power_of_2(n)


def emulate(dtype: torch.dtype) -> bool:
    """Round fp32 -> bf16 to nearest under the interpreter (see ops/shared/kernel.py)."""
    return emulated(dtype)


def block_invalid(rows: int, block_v: int, num_warps: int) -> str | None:
    """The register limit of a (rows, block_v) fp32 block spread over num_warps warps."""
    per_thread = rows * block_v // (32 * num_warps)
    if per_thread > MAX_ELEMS_PER_THREAD:
        return f"{rows}x{block_v} block over {num_warps} warps: {per_thread} values per thread > {MAX_ELEMS_PER_THREAD}"
    return None


def default_warps(rows: int, block_v: int) -> int:
    """About 8 values per thread, 1 to 16 warps."""
    return max(1, min(16, rows * block_v // 256))


def check_2d(name: str, t: torch.Tensor, M: int, V: int) -> None:
    """Shape (M, V), and the kernels' 32-bit offsets within a row (a block may overshoot V by MAX_BLOCK_V)."""
    if tuple(t.shape) != (M, V):
        raise InvalidInputError(f"shape of {name}", str((M, V)), str(tuple(t.shape)))
    if (V + MAX_BLOCK_V) * abs(t.stride(1)) >= INDEX_LIMIT or t.stride(0) < 0:
        raise InvalidInputError(f"strides of {name}", "offsets within a row below 2^31 (32-bit indexing) "
                                "and a non-negative row stride", str(t.stride()))


def row_major(t: torch.Tensor) -> bool:
    """Unit column stride and disjoint rows: every element has its own address."""
    return (t.shape[1] == 1 or t.stride(1) == 1) and (t.shape[0] == 1 or t.stride(0) >= t.shape[1])


def check_out(out: torch.Tensor, logits: torch.Tensor) -> None:
    """``out`` is row-major with disjoint rows (every element written by one lane: no race), and a buffer
    disjoint from the logits or exactly the logits (in place); a partial overlap would race."""
    if not row_major(out):
        raise InvalidInputError("strides of the gradient",
                                f"row-major with disjoint rows (stride (>= {out.shape[1]}, 1))", str(out.stride()))
    if out.data_ptr() == logits.data_ptr() and out.stride() == logits.stride():
        return
    if out.untyped_storage().data_ptr() == logits.untyped_storage().data_ptr():
        raise InvalidInputError("out", "a buffer disjoint from the logits, or the logits themselves (in place)",
                                "a partially overlapping view")


@dataclass(frozen=True, kw_only=True)
class SingleKnobs(Knobs):
    ROWS: int
    num_warps: int


@dataclass(frozen=True, kw_only=True)
class LoopedKnobs(SingleKnobs):
    BLOCK_V: int


class _Xent(Variant):
    cost_model = "memory"
    kernel_modules = (K, common)
    single = True

    @property
    def knobs(self) -> type[Knobs]:  # type: ignore[override]
        return SingleKnobs if self.single else LoopedKnobs

    # ---- space, validity, heuristic --------------------------------------------------------
    def block_v(self, p: Problem, c: Mapping[str, Any]) -> int:
        return np2(p.shape["V"]) if self.single else c["BLOCK_V"]

    def space(self, problem: Problem, target: Target) -> Space:
        M, V = problem.shape["M"], problem.shape["V"]
        d = self.default_config(problem, target)
        frags: dict[str, Any] = {"num_warps": Enum(WARPS, d["num_warps"])}
        if self.single:
            frags["ROWS"] = Pow2(1, max(1, min(16, np2(M))), d["ROWS"])
        else:
            frags["ROWS"] = Pow2(1, max(1, min(4, np2(M))), d["ROWS"])
            frags["BLOCK_V"] = Pow2(min(64, np2(V)), min(np2(V), MAX_BLOCK_V), d["BLOCK_V"])
        return Space(frags)

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        return block_invalid(c["ROWS"], self.block_v(p, c), c["num_warps"])

    def default_config(self, p: Problem, target: Target) -> Config:
        M, V = p.shape["M"], p.shape["V"]
        if self.single:
            bv = np2(V)
            rows = max(1, min(16, np2(M), 4096 // bv))
            return {"ROWS": rows, "num_warps": default_warps(rows, bv)}
        bv = max(min(64, np2(V)), min(np2(V), 4096))
        return {"ROWS": 1, "BLOCK_V": bv, "num_warps": default_warps(1, bv)}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        blocks = {"M": config["ROWS"]}
        if not self.single:
            blocks["V"] = config["BLOCK_V"]
        return blocks

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, problem, config)

    def regs(self, p: Problem, c: Mapping[str, Any]) -> int:
        return 2 * c["ROWS"] * self.block_v(p, c) // (32 * c["num_warps"]) + 24


class CrossEntropy(_Xent):
    """Forward: per-row loss and logsumexp, then the reduction."""

    op = "cross_entropy"

    def __init__(self, single: bool) -> None:
        self.single, self.name = single, "single" if single else "looped"

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> MemoryWork:
        M, V, e = p.shape["M"], p.shape["V"], p.dtype.itemsize
        reduced = p.attrs["reduction"] != "none"
        bv = self.block_v(p, c)
        moved = M * V * e + 8 * M + 8 * M + (4 * M + 12 * M if reduced else e * M)
        return MemoryWork(bytes_moved=moved, programs=triton.cdiv(M, c["ROWS"]) + int(reduced),
                          num_warps=c["num_warps"], block_bytes=c["ROWS"] * bv * e, steps=triton.cdiv(V, bv),
                          regs_per_thread=self.regs(p, c), launches=1 + int(reduced))

    def launch(self, inputs, problem, config, out=None):
        x, t = inputs["logits"], inputs["target"]
        M, V = problem.shape["M"], problem.shape["V"]
        check_2d("logits", x, M, V)
        reduction = problem.attrs["reduction"]
        if out is None:
            loss = torch.empty(() if reduction != "none" else (M,), dtype=problem.dtype, device=x.device)
            stats = torch.empty((M, 2), dtype=torch.float32, device=x.device)
        else:
            loss, stats = out
        if tuple(stats.shape) != (M, 2) or not stats.is_contiguous():
            raise InvalidInputError("stats output", f"a contiguous ({M}, 2) float32 tensor", tuple(stats.shape))
        rows_out = loss if reduction == "none" else scratch((M,), torch.float32, x.device)
        eps = float(problem.attrs["label_smoothing"])
        rows, bv = config["ROWS"], self.block_v(problem, config)
        K.xent_fwd_kernel[(triton.cdiv(M, rows),)](
            x, t, rows_out, stats, x, stats,
            M, V, int(problem.attrs["ignore_index"]), eps,
            x.stride(0), x.stride(1), t.stride(0), rows_out.stride(0), 0, 0, 0,
            ROWS=rows, BLOCK_V=bv, SINGLE=self.single, SMOOTH=eps > 0, WRITE_LOSS=True, WRITE_STATS=True,
            WRITE_GRAD=False, SCALE=0, EMULATE=emulate(problem.dtype), num_warps=config["num_warps"])
        if reduction != "none":
            reduce_rows(rows_out, t, loss, problem.attrs["ignore_index"], reduction == "mean")
        return loss, stats


def reduce_rows(rows_out: torch.Tensor, t: torch.Tensor, out: torch.Tensor, ignore_index: int, mean: bool) -> None:
    """out = sum (or mean over non-ignored targets) of the fp32 row losses."""
    K.xent_reduce_kernel[(1,)](rows_out, t, out, rows_out.shape[0], int(ignore_index), t.stride(0),
                               MEAN=mean, BLOCK=REDUCE_BLOCK, EMULATE=emulate(out.dtype), num_warps=4)


def grad_scale(t: torch.Tensor, g: torch.Tensor, ignore_index: int, reduction: str) -> tuple[torch.Tensor, int, int]:
    """(scale tensor, SCALE kind, stride) for the gradient kernels: g per row (none), g (sum), or
    g / count of non-ignored rows (mean; one small kernel, no host sync)."""
    if reduction == "none":
        return g, 2, g.stride(0)
    if reduction == "sum":
        return g, 1, 0
    s = scratch((1,), torch.float32, t.device)
    K.xent_scale_kernel[(1,)](t, g, s, t.shape[0], int(ignore_index), t.stride(0), BLOCK=REDUCE_BLOCK, num_warps=4)
    return s, 1, 0


class CrossEntropyBackward(_Xent):
    """dlogits = scale * (softmax - smoothed one-hot), from the logits and the saved statistics."""

    op = "cross_entropy_backward"

    def __init__(self, single: bool) -> None:
        self.single, self.name = single, "single" if single else "looped"

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> MemoryWork:
        M, V, e = p.shape["M"], p.shape["V"], p.dtype.itemsize
        mean = p.attrs["reduction"] == "mean"
        bv = self.block_v(p, c)
        moved = 2 * M * V * e + 16 * M + (e * M if p.attrs["reduction"] == "none" else 8 * M * int(mean))
        return MemoryWork(bytes_moved=moved, programs=triton.cdiv(M, c["ROWS"]) + int(mean),
                          num_warps=c["num_warps"], block_bytes=c["ROWS"] * bv * e, steps=triton.cdiv(V, bv),
                          regs_per_thread=self.regs(p, c), launches=1 + int(mean))

    def launch(self, inputs, problem, config, out=None):
        x, t, stats, g = inputs["logits"], inputs["target"], inputs["stats"], inputs["grad"]
        M, V = problem.shape["M"], problem.shape["V"]
        check_2d("logits", x, M, V)
        if stats.dtype != torch.float32 or tuple(stats.shape) != (M, 2) or not stats.is_contiguous():
            raise InvalidInputError("stats", f"a contiguous float32 tensor of shape ({M}, 2)",
                                    f"{stats.dtype} {tuple(stats.shape)} stride {stats.stride()}")
        if out is None:
            out = torch.empty((M, V), dtype=problem.dtype, device=x.device)
        check_2d("out", out, M, V)
        check_out(out, x)
        reduction = problem.attrs["reduction"]
        s, kind, stride_s = grad_scale(t, g, problem.attrs["ignore_index"], reduction)
        eps = float(problem.attrs["label_smoothing"])
        rows, bv = config["ROWS"], self.block_v(problem, config)
        K.xent_bwd_kernel[(triton.cdiv(M, rows),)](
            x, t, stats, s, out, M, V, 0, V, int(problem.attrs["ignore_index"]), eps,
            x.stride(0), x.stride(1), t.stride(0), stride_s, out.stride(0), out.stride(1),
            ROWS=rows, BLOCK_V=bv, SMOOTH=eps > 0, SCALE=kind, EMULATE=emulate(problem.dtype),
            num_warps=config["num_warps"])
        return out


def _fused_variants() -> tuple[Variant, ...]:
    from .fused_variant import VARIANTS as FUSED

    return FUSED


VARIANTS: tuple[Variant, ...] = (CrossEntropy(True), CrossEntropy(False),
                                 CrossEntropyBackward(True), CrossEntropyBackward(False)) + _fused_variants()
