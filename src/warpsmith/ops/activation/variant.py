"""Gated activation variants (swiglu, geglu and their backwards): one tiled variant per op.

``tiled``: (BLOCK_M rows x BLOCK_H columns) tiles. Knobs: ``BLOCK_H`` (columns per tile),
``BLOCK_M`` (rows per tile), ``num_warps`` and ``PROGRAMS_PER_SM`` (0: one program per tile on a
2-D grid; k > 0: a persistent grid of k x SMs programs striding over the tiles). A packed
(M, 2H) input (or gradient) is passed as its two (M, H) halves, views with row stride 2H: the
same kernels serve both forms. Inputs need a unit column stride (the public ops make a
contiguous copy otherwise); rows may have any stride.
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
from .spec import ACTIVATION_OPS, kernel_activation
from ...targets import Target
from ..shared import kernel as common
from ..shared.launch import allocate, emulated, launch_target
from ...core.variant import Config, Variant, is_pow2, next_pow2, persistent_programs
from . import kernel as K
from .limits import MAX_BLOCK_H, MAX_BLOCK_M

OPS = ("swiglu", "swiglu_backward", "geglu", "geglu_backward")
WARPS = (1, 2, 4, 8, 16)
PROGRAMS_PER_SM = (0, 1, 2, 4, 8)  # 0: not persistent
MAX_ELEMS_PER_THREAD = 32  # fp32 elements of one operand a thread holds (forward 3, backward 5 live)
MAX_GRID_Y = 65535  # CUDA's limit on grid axis 1 (the column tiles of the 2-D grid)
COL_LIMIT = 2**31  # column offsets are int32 (row offsets are int64)


@dataclass(frozen=True, kw_only=True)
class TiledKnobs(Knobs):
    BLOCK_M: int
    BLOCK_H: int
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

    # ---- space, validity, heuristic ---------------------------------------------------------
    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        return Space({
            "BLOCK_H": Pow2(16, max(16, min(MAX_BLOCK_H, next_pow2(problem.shape["H"]))), d["BLOCK_H"]),
            "BLOCK_M": Pow2(1, max(1, min(MAX_BLOCK_M, next_pow2(problem.shape["M"]))), d["BLOCK_M"]),
            "num_warps": Enum(WARPS, d["num_warps"]),
            "PROGRAMS_PER_SM": Enum(PROGRAMS_PER_SM, d["PROGRAMS_PER_SM"]),
        })

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        bh, bm, nw = c["BLOCK_H"], c["BLOCK_M"], c["num_warps"]
        if not (is_pow2(bh) and is_pow2(bm)):
            return f"BLOCK_H={bh} and BLOCK_M={bm} must be powers of two"
        if nw not in WARPS or c["PROGRAMS_PER_SM"] not in PROGRAMS_PER_SM:
            return f"num_warps={nw} / PROGRAMS_PER_SM={c['PROGRAMS_PER_SM']} not in {WARPS} / {PROGRAMS_PER_SM}"
        tile, threads = bm * bh, 32 * nw
        if tile > MAX_ELEMS_PER_THREAD * threads:
            return (f"{tile} elements per tile need {tile // threads} per thread with {nw} warps "
                    f"(budget {MAX_ELEMS_PER_THREAD})")
        if nw > 1 and tile < threads:
            return f"{nw} warps for a {bm}x{bh} tile would leave whole warps idle"
        tiles_h = triton.cdiv(p.shape["H"], bh)
        if not c["PROGRAMS_PER_SM"] and tiles_h > MAX_GRID_Y:
            return f"{tiles_h} column tiles exceed the grid's second axis ({MAX_GRID_Y}); use a larger BLOCK_H"
        if triton.cdiv(p.shape["M"], bm) * tiles_h >= 2**31:
            return "more than 2^31 tiles (tile numbers are int32)"
        if p.shape["H"] + bh >= COL_LIMIT:
            return f"H={p.shape['H']} too large for int32 column offsets"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        H, M = p.shape["H"], p.shape["M"]
        bh = max(16, min(1024, next_pow2(H)))
        bm = max(1, min(MAX_BLOCK_M, next_pow2(M), 2048 // bh))
        tile = bm * bh
        nw = max(1, min(16, tile // 256))  # about 8 elements per thread (16-byte loads in fp16)
        cfg = {"BLOCK_H": bh, "BLOCK_M": bm, "num_warps": nw, "PROGRAMS_PER_SM": 0}
        while self.invalid(p, cfg, target) and cfg["BLOCK_H"] < MAX_BLOCK_H:  # very wide rows: fewer column tiles
            cfg["BLOCK_H"] *= 2
            cfg["num_warps"] = max(1, min(16, cfg["BLOCK_M"] * cfg["BLOCK_H"] // 256))
        if self.invalid(p, cfg, target):  # still over the 2-D grid's column limit: a 1-D persistent grid
            cfg["PROGRAMS_PER_SM"] = 4
        return cfg

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"M": config["BLOCK_M"], "H": config["BLOCK_H"]}

    # ---- cost model -------------------------------------------------------------------------
    def programs(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        tiles = triton.cdiv(p.shape["M"], c["BLOCK_M"]) * triton.cdiv(p.shape["H"], c["BLOCK_H"])
        return persistent_programs(tiles, c["PROGRAMS_PER_SM"], target)

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        M, H, e = p.shape["M"], p.shape["H"], p.dtype.itemsize
        reads, writes = (3, 2) if self.backward else (2, 1)
        tiles = triton.cdiv(M, c["BLOCK_M"]) * triton.cdiv(H, c["BLOCK_H"])
        programs = self.programs(p, c, target)
        per_thread = -(-c["BLOCK_M"] * c["BLOCK_H"] // (32 * c["num_warps"]))
        # partial tiles move only their valid elements; a tile's loads are in flight together
        return MemoryWork(
            bytes_moved=float((reads + writes) * M * H * e), programs=programs, num_warps=c["num_warps"],
            block_bytes=float(reads * min(c["BLOCK_M"], M) * min(c["BLOCK_H"], H) * e),
            steps=float(-(-tiles // programs)), regs_per_thread=(reads + writes + 2) * per_thread + 20,
            flops=0.0)

    # ---- launch -----------------------------------------------------------------------------
    def _views(self, inputs: Mapping[str, torch.Tensor], p: Problem) -> list[torch.Tensor]:
        """(dy,) gate, up as (M, H) views with unit column stride."""
        M, H = p.shape["M"], p.shape["H"]
        names = (("dy",) if self.backward else ()) + (("x",) if p.attrs["packed"] else ("gate", "up"))
        views = []
        for name in names:
            t = inputs.get(name)
            shape = (M, 2 * H) if name == "x" else (M, H)
            if not isinstance(t, torch.Tensor):
                raise InvalidInputError(f"input {name} of {self.op}", "a torch.Tensor", type(t).__name__)
            if tuple(t.shape) != shape or t.dtype != p.dtype:
                raise InvalidInputError(f"input {name}", f"a {shape} {p.dtype} tensor", f"{tuple(t.shape)} {t.dtype}")
            if t.shape[1] > 1 and t.stride(1) != 1:
                raise InvalidInputError(f"column stride of {name}", "1", t.stride(1))
            if views and t.device != views[0].device:
                raise InvalidInputError(f"device of {name}", str(views[0].device), str(t.device))
            views += [t[:, :H], t[:, H:]] if name == "x" else [t]
        return views

    def _outputs(self, p: Problem, out: Any, device: torch.device) -> tuple[Any, list[torch.Tensor]]:
        """(what launch returns, the (M, H) views the kernel writes)."""
        outs = allocate(out, _outputs_of(self.op, p), device, unit_cols=True)
        H = p.shape["H"]
        views = [outs[0][:, :H], outs[0][:, H:]] if self.backward and p.attrs["packed"] else list(outs)
        return (outs[0] if len(outs) == 1 else outs), views

    def launch(self, inputs, problem, config, out=None, target: Target | None = None):

        ins = self._views(inputs, problem)
        result, outs = self._outputs(problem, out, ins[0].device)
        M, H = problem.shape["M"], problem.shape["H"]
        meta = dict(BLOCK_M=config["BLOCK_M"], BLOCK_H=config["BLOCK_H"],
                    ACT=kernel_activation(self.op, problem.attrs),
                    EMULATE=emulated(problem.dtype), num_warps=config["num_warps"])
        if config["PROGRAMS_PER_SM"]:
            grid = (self.programs(problem, config, launch_target(target)),)
        else:
            grid = (triton.cdiv(M, config["BLOCK_M"]), triton.cdiv(H, config["BLOCK_H"]))
        persistent = bool(config["PROGRAMS_PER_SM"])
        if self.backward:
            dy, g, u = ins
            dg, du = outs
            kernel = K.gated_bwd_persistent_kernel if persistent else K.gated_bwd_kernel
            kernel[grid](dy, g, u, dg, du, M, H, stride_dym=dy.stride(0), stride_gm=g.stride(0),
                         stride_um=u.stride(0), stride_dgm=dg.stride(0), stride_dum=du.stride(0), **meta)
        else:
            g, u = ins
            (y,) = outs
            kernel = K.gated_fwd_persistent_kernel if persistent else K.gated_fwd_kernel
            kernel[grid](g, u, y, M, H, stride_gm=g.stride(0), stride_um=u.stride(0), stride_ym=y.stride(0), **meta)
        return result

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self.backward, bool(problem.attrs["packed"]), kernel_activation(self.op, problem.attrs),
                          config)


def _outputs_of(op: str, p: Problem):
    return {s.name: s for s in ACTIVATION_OPS}[op].outputs(p)


VARIANTS: tuple[Variant, ...] = tuple(Tiled(op) for op in OPS)
