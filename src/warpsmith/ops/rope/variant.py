"""RoPE variants (``rope`` and ``rope_backward``, one kernel with a BACKWARD flag).

``tiled``: (BLOCK_H heads x BLOCK_S tokens x BLOCK_R pairs) tiles over the Hq + Hk heads of q and
k together (one launch); the cos/sin rows of a tile are loaded once for all its heads. Knobs:
``BLOCK_H`` (heads per tile: more heads, fewer re-reads of cos/sin), ``BLOCK_S`` (tokens per tile),
``BLOCK_R`` (pairs per loop step; the dims past the rotary part are copied in steps of
2 BLOCK_R), ``num_warps`` and ``PROGRAMS_PER_SM`` (0: a 3-D grid, one program per tile; k > 0: a
persistent grid of about k x SMs programs, each batch entry's share striding over its tiles).
q, k, cos, sin, positions and the outputs may have any strides (a batch-1 cos/sin/positions
broadcasts over the batch).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...space import Enum, Pow2, Space
from ...core.opspec import Problem
from .spec import ROPE_OPS, head_dim, table_rows
from ...targets import Target
from ..shared import kernel as common
from ...core.dtypes import param_dtype
from ..shared.launch import allocate, emulated, launch_target
from ...core.variant import Config, Variant, is_pow2, next_pow2
from . import kernel as K

OPS = ("rope", "rope_backward")
WARPS = (1, 2, 4, 8)
PROGRAMS_PER_SM = (0, 1, 2, 4, 8)  # 0: not persistent
MAX_PAIRS_PER_THREAD = 16  # fp32 pairs a thread holds per step (x1, x2, o1, o2 live, plus cos/sin)
MAX_BLOCK_S = 64
MAX_BLOCK_H = 64
MAX_BLOCK_R = 128
MAX_GRID_Z = 65535  # CUDA's limit on grid axis 2 (the batch of the 3-D grid)
INDEX_LIMIT = 2**31  # token, head and pair indices are computed in int32 before widening




def _spec(op: str):
    return {s.name: s for s in ROPE_OPS}[op]


@dataclass(frozen=True, kw_only=True)
class TiledKnobs(Knobs):
    BLOCK_S: int
    BLOCK_H: int
    BLOCK_R: int
    num_warps: int
    PROGRAMS_PER_SM: int = 0  # 0: one program per tile; else a persistent grid


class Tiled(Variant):
    name = "tiled"
    knobs = TiledKnobs
    cost_model = "memory"
    kernel_modules = (K, common)

    ops = OPS

    def __init__(self, op: str) -> None:
        super().__init__(op)
        self.backward = op.endswith("_backward")
        self.names = ("dq_out", "dk_out") if self.backward else ("q", "k")

    # ---- space, validity, heuristic ---------------------------------------------------------
    @staticmethod
    def _heads(p: Problem) -> int:
        return p.shape["Hq"] + p.shape["Hk"]

    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        r_hi = max(1, min(MAX_BLOCK_R, next_pow2(problem.shape["R2"])))
        return Space({
            "BLOCK_H": Pow2(1, max(1, min(MAX_BLOCK_H, next_pow2(self._heads(problem)))), d["BLOCK_H"]),
            "BLOCK_S": Pow2(1, max(1, min(MAX_BLOCK_S, next_pow2(problem.shape["S"]))), d["BLOCK_S"]),
            "BLOCK_R": Pow2(min(8, r_hi), r_hi, d["BLOCK_R"]),
            "num_warps": Enum(WARPS, d["num_warps"]),
            "PROGRAMS_PER_SM": Enum(PROGRAMS_PER_SM, d["PROGRAMS_PER_SM"]),
        })

    def tiles(self, p: Problem, c: Mapping[str, Any]) -> int:
        return p.shape["B"] * triton.cdiv(p.shape["S"], c["BLOCK_S"]) * triton.cdiv(self._heads(p), c["BLOCK_H"])

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        bh, bs, br, nw = c["BLOCK_H"], c["BLOCK_S"], c["BLOCK_R"], c["num_warps"]
        if not all(is_pow2(v) for v in (bh, bs, br)):
            return f"BLOCK_H={bh}, BLOCK_S={bs} and BLOCK_R={br} must be powers of two"
        if nw not in WARPS or c["PROGRAMS_PER_SM"] not in PROGRAMS_PER_SM:
            return f"num_warps={nw} / PROGRAMS_PER_SM={c['PROGRAMS_PER_SM']} not in {WARPS} / {PROGRAMS_PER_SM}"
        tile, threads = bh * bs * br, 32 * nw
        if tile > MAX_PAIRS_PER_THREAD * threads:
            return (f"{tile} pairs per step need {tile // threads} per thread with {nw} warps "
                    f"(budget {MAX_PAIRS_PER_THREAD})")
        if nw > 1 and 2 * tile < threads:
            return f"{nw} warps for a {bh}x{bs}x{br} tile would leave whole warps idle"
        if p.shape["B"] > MAX_GRID_Z:  # the spec's axis bound; the grids put the batch on axis 2 (or 1)
            return f"B={p.shape['B']} exceeds the grid's limit ({MAX_GRID_Z})"
        if self.tiles(p, c) // p.shape["B"] >= INDEX_LIMIT:
            return "more than 2^31 tiles per batch entry (tile numbers are int32)"
        if max(p.shape["S"] + bs, self._heads(p) + bh, head_dim(p) + 2 * br, table_rows(p)) >= INDEX_LIMIT:
            return "sizes beyond int32 indices"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        br = max(1, min(64, next_pow2(p.shape["R2"])))
        bh = max(1, min(16, next_pow2(self._heads(p))))
        bs = max(1, min(MAX_BLOCK_S, next_pow2(p.shape["S"]), 1024 // (bh * br)))
        nw = max(1, min(8, bh * bs * br // 128))  # about 4 pairs (8 elements) per thread
        return {"BLOCK_H": bh, "BLOCK_S": bs, "BLOCK_R": br, "num_warps": nw, "PROGRAMS_PER_SM": 0}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"S": config["BLOCK_S"], "Hq": config["BLOCK_H"], "Hk": config["BLOCK_H"], "R2": config["BLOCK_R"]}

    # ---- cost model -------------------------------------------------------------------------
    def per_batch(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        """Programs per batch entry: all its tiles, or (persistent) its share of k x SMs programs."""
        tiles = self.tiles(p, c) // p.shape["B"]
        if not c["PROGRAMS_PER_SM"]:
            return tiles
        return max(1, min(tiles, -(-c["PROGRAMS_PER_SM"] * target.sms // p.shape["B"])))

    def programs(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        return self.per_batch(p, c, target) * p.shape["B"]

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        B, S, r2, D = p.shape["B"], p.shape["S"], p.shape["R2"], head_dim(p)
        e = p.dtype.itemsize
        te = param_dtype(p.attrs["table_dtype"], p.dtype).itemsize
        head_blocks = triton.cdiv(self._heads(p), c["BLOCK_H"])
        table = 2 * B * S * r2 * te * head_blocks  # every head block of a token reads its cos/sin rows
        pos = 8 * B * S * head_blocks if p.attrs["positions"] == "given" else 0
        programs = self.programs(p, c, target)
        steps_per_tile = triton.cdiv(r2, c["BLOCK_R"]) + triton.cdiv(D - 2 * r2, 2 * c["BLOCK_R"])
        hb, bs, br = min(c["BLOCK_H"], self._heads(p)), min(c["BLOCK_S"], S), min(c["BLOCK_R"], r2)
        per_thread = -(-c["BLOCK_H"] * c["BLOCK_S"] * c["BLOCK_R"] // (32 * c["num_warps"]))
        return MemoryWork(
            bytes_moved=float(2 * B * S * self._heads(p) * D * e + table + pos), programs=programs,
            num_warps=c["num_warps"], block_bytes=float(2 * hb * bs * br * e + 2 * bs * br * te),
            steps=float(steps_per_tile * -(-self.tiles(p, c) // programs)),
            regs_per_thread=8 * per_thread + 80)  # overhead fitted to ptxas's counts (warpsmith gpucheck)

    # ---- launch -----------------------------------------------------------------------------
    def _operands(self, inputs: Mapping[str, torch.Tensor], p: Problem):
        B, S, r2, D = p.shape["B"], p.shape["S"], p.shape["R2"], head_dim(p)
        xs = []
        for name, h in zip(self.names, (p.shape["Hq"], p.shape["Hk"])):
            t = inputs.get(name)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != (B, h, S, D) or t.dtype != p.dtype:
                raise InvalidInputError(f"input {name} of {self.op}", f"a {(B, h, S, D)} {p.dtype} tensor",
                                        f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else t)
            xs.append(t)
        per_token = p.attrs["cos_sin"] == "per_token"
        tdt = (param_dtype(p.attrs["table_dtype"], p.dtype),)
        tables = []
        for name in ("cos", "sin"):
            t = inputs.get(name)
            ok_shape = isinstance(t, torch.Tensor) and (
                (t.dim() == 3 and t.shape[0] in (1, B) and tuple(t.shape[1:]) == (S, r2)) if per_token
                else tuple(t.shape) == (table_rows(p), r2))
            if not ok_shape or t.dtype not in tdt:
                want = f"(B or 1, {S}, {r2})" if per_token else f"({table_rows(p)}, {r2})"
                raise InvalidInputError(f"input {name} of {self.op}", f"a {want} {tdt[0]} tensor",
                                        f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else t)
            tables.append(t)
        pos = inputs.get("positions")
        if p.attrs["positions"] == "given":
            if (not isinstance(pos, torch.Tensor) or pos.dim() != 2 or pos.shape[0] not in (1, B) or pos.shape[1] != S
                    or pos.dtype not in (torch.int32, torch.int64)):
                raise InvalidInputError(f"positions of {self.op}", f"a (B or 1, {S}) int32 or int64 tensor",
                                        f"{tuple(pos.shape)} {pos.dtype}" if isinstance(pos, torch.Tensor) else pos)
        else:
            pos = None
        for t in xs[1:] + tables + ([pos] if pos is not None else []):
            if t.device != xs[0].device:
                raise InvalidInputError("device of the rope inputs", str(xs[0].device), str(t.device))
        return xs, tables, pos

    def _outputs(self, p: Problem, out: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return allocate(out, _spec(self.op).outputs(p), device)

    def launch(self, inputs, problem, config, out=None, target: Target | None = None):

        (x, y), (cos, sin), pos = self._operands(inputs, problem)
        xo, yo = self._outputs(problem, out, x.device)
        B, S = problem.shape["B"], problem.shape["S"]

        def table_strides(t):
            if t.dim() == 3:
                return (t.stride(0) if t.shape[0] > 1 else 0, t.stride(1), t.stride(2))
            return (0, t.stride(0), t.stride(1))

        pos_strides = ((pos.stride(0) if pos.shape[0] > 1 else 0), pos.stride(1)) if pos is not None else (0, 0)
        args = [x, y, xo, yo, cos, sin, pos if pos is not None else cos]
        sizes = [S, problem.shape["Hq"], problem.shape["Hk"], problem.shape["R2"], head_dim(problem),
                 table_rows(problem) if problem.attrs["cos_sin"] == "table" else S]
        strides = [*x.stride(), *y.stride(), *xo.stride(), *yo.stride(), *table_strides(cos), *table_strides(sin),
                   *pos_strides]
        meta = dict(BLOCK_S=config["BLOCK_S"], BLOCK_H=config["BLOCK_H"], BLOCK_R=config["BLOCK_R"],
                    LAYOUT=problem.attrs["layout"], HAS_POS=pos is not None, BACKWARD=self.backward,
                    EMULATE=emulated(problem.dtype), num_warps=config["num_warps"])
        if config["PROGRAMS_PER_SM"]:
            grid = (self.per_batch(problem, config, launch_target(target)), B)
            K.rope_persistent_kernel[grid](*args, *sizes, *strides, **meta)
        else:
            grid = (triton.cdiv(S, config["BLOCK_S"]), triton.cdiv(self._heads(problem), config["BLOCK_H"]), B)
            K.rope_kernel[grid](*args, *sizes, *strides, **meta)
        return xo, yo

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(problem, config, self.backward)


VARIANTS: tuple[Variant, ...] = tuple(Tiled(op) for op in OPS)
