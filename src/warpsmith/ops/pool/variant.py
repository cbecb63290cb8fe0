"""Pooling variants: one ``gather`` variant per op (launchers, spaces, validity).

``gather``: programs over (blocks of BLOCK flat spatial positions, C, N); the max / avg forward over
(blocks of BLOCK output positions, blocks of ROWS planes n C + c), each a (ROWS, BLOCK) tile, so many
small planes (a CNN's late layers, KernelBench's capped sizes) are few programs. The forward computes
each output from its window; the backward is the gather form (each input element sums the
gradients of the windows that hold it, in a fixed order: deterministic, no atomics, no scatter
races). Knobs: ``BLOCK`` (positions per program), ``ROWS`` (planes per program: the max / avg forward
only; 1 elsewhere) and ``num_warps``. Inputs are read through their
strides (NCHW, channels-last or any other); outputs are allocated in the input's memory format,
as torch does.
"""
from __future__ import annotations

import math
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
from . import kernel as K
from .spec import DIMS, output_spatial, problem_error, spatial, window

OPS = ("max_pool", "max_pool_backward", "avg_pool", "avg_pool_backward", "adaptive_avg_pool",
       "adaptive_avg_pool_backward")
WARPS = (1, 2, 4, 8)
MAX_GRID_YZ = 65535  # CUDA's limit on grid axes 1 and 2 (C and N)
INT32_LIMIT = 2**31 - 4096  # flat spatial positions (and their block overshoot) are int32
TILE_LIMIT = 4096  # ROWS x BLOCK elements of a forward tile (~16 values live per element: registers)


@dataclass(frozen=True, kw_only=True)
class GatherKnobs(Knobs):
    BLOCK: int
    num_warps: int
    ROWS: int = 1  # planes per program (the max / avg forward's tile rows)


def _5d(t: torch.Tensor, dims: int) -> tuple[int, ...]:
    """Strides of ``t`` as (n, c, d, h, w), 0 for the absent dimensions."""
    st = list(t.stride())
    return tuple(st[:2] + [0] * (3 - dims) + st[2:])


def adaptive_bounds(p: Problem, backward: bool) -> tuple[int, int, int]:
    """Loop bounds: the longest adaptive window (forward), or the most windows that hold one input."""
    out = []
    for L, O in zip(spatial(p), output_spatial(p)):
        out.append(min(O, -(-O // L) + 1) if backward else min(L, -(-L // O) + 1))
    return tuple(out)  # type: ignore[return-value]


def empty_like_format(t: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``shape`` laid out like ``t`` (channels-last stays channels-last)."""
    if t.dim() >= 4 and t.dim() == len(shape):
        for fmt in (torch.channels_last, torch.channels_last_3d):
            try:
                if t.is_contiguous(memory_format=fmt) and not t.is_contiguous():
                    return torch.empty(shape, dtype=dtype, device=t.device, memory_format=fmt)
            except RuntimeError:
                continue
    if t.dim() == 3 and t.stride(1) == 1 and t.shape[1] > 1 and t.stride(2) != 1:  # 1-D, C innermost
        return torch.empty((shape[0], shape[2], shape[1]), dtype=dtype, device=t.device).transpose(1, 2)
    return torch.empty(shape, dtype=dtype, device=t.device)


class Gather(Variant):
    name = "gather"
    knobs = GatherKnobs
    cost_model = "memory"
    kernel_modules = (K, common)
    ops = OPS

    def __init__(self, op: str) -> None:
        super().__init__(op)
        self.backward = op.endswith("_backward")
        self.kind = op.removesuffix("_backward")

    @property
    def tiled(self) -> bool:
        """Whether the launch takes (ROWS, BLOCK) tiles: the max / avg forward (``pool_fwd_kernel``)."""
        return not self.backward and self.kind != "adaptive_avg_pool"

    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        s = {"BLOCK": Pow2(32, 1024, d["BLOCK"]), "num_warps": Enum(WARPS, d["num_warps"])}
        if self.tiled:
            s["ROWS"] = Pow2(1, 64, d["ROWS"])
        return Space(s)

    def planes(self, p: Problem) -> int:
        return p.shape["N"] * p.shape["C"]

    def positions(self, p: Problem) -> int:
        """Flat spatial positions per plane the grid covers (outputs forward, inputs backward)."""
        return math.prod(spatial(p) if self.backward else output_spatial(p))

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        why = problem_error(p)
        if why:
            return why
        rows = c.get("ROWS", 1)
        if not self.tiled and rows != 1:
            return f"ROWS={rows}: only the max / avg forward takes rows of planes (expected 1)"
        if self.tiled:
            if triton.cdiv(self.planes(p), rows) > MAX_GRID_YZ:
                return (f"N C = {self.planes(p)} planes in blocks of ROWS={rows} over the grid's axis limit "
                        f"{MAX_GRID_YZ}")
            if rows * c["BLOCK"] > TILE_LIMIT:
                return f"ROWS x BLOCK = {rows} x {c['BLOCK']} over the tile limit {TILE_LIMIT}"
            if rows > 1 and rows >= 2 * self.planes(p):
                return f"ROWS={rows} for {self.planes(p)} planes (half the tile idle)"
        elif p.shape["C"] > MAX_GRID_YZ or p.shape["N"] > MAX_GRID_YZ:
            return f"N={p.shape['N']} or C={p.shape['C']} over the grid's axis limit {MAX_GRID_YZ}"
        if max(math.prod(spatial(p)), math.prod(output_spatial(p))) + c["BLOCK"] > INT32_LIMIT:
            return "more than 2^31 spatial positions per plane (int32 positions)"
        if c["BLOCK"] * rows < 32 * c["num_warps"]:
            return f"BLOCK={c['BLOCK']} x ROWS={rows} leaves warps of {c['num_warps']} idle"
        return None

    def default_config(self, problem: Problem, target: Target) -> Config:
        cap = 128 if problem.op.endswith("_backward") else 256  # Triton 3.6 spills the backward at 256
        block = max(32, min(cap, triton.next_power_of_2(self.positions(problem))))
        cfg = {"BLOCK": block}
        tile = block
        if self.tiled:  # the fewest rows the grid needs; more where a plane leaves most of a block idle
            need = triton.next_power_of_2(triton.cdiv(self.planes(problem), MAX_GRID_YZ))
            fill = max(1, block // triton.next_power_of_2(max(1, self.positions(problem))))
            cfg["ROWS"] = max(need, min(fill, triton.next_power_of_2(max(1, self.planes(problem))), 64))
            tile = block * cfg["ROWS"]
        cfg["num_warps"] = max(1, min(4, tile // 32 if cap == 128 else tile // 64))
        return cfg

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"W": config["BLOCK"]}

    def programs(self, p: Problem, c: Mapping[str, Any]) -> int:
        return triton.cdiv(self.positions(p), c["BLOCK"]) * triton.cdiv(self.planes(p), c.get("ROWS", 1))

    def volume(self, p: Problem) -> int:
        if self.kind == "adaptive_avg_pool":
            return math.prod(adaptive_bounds(p, self.backward))
        return math.prod(window(p)["kernel"])

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        e = p.dtype.itemsize
        planes = p.shape["N"] * p.shape["C"]
        ins, outs = math.prod(spatial(p)) * planes, math.prod(output_spatial(p)) * planes
        idx = 8 * outs if self.kind == "max_pool" and (self.backward or p.attrs.get("return_indices")) else 0
        by = (outs * e + idx + ins * e) if self.backward else (ins * e + outs * e + idx)
        tile = c["BLOCK"] * c.get("ROWS", 1)
        per_thread = -(-tile // (32 * c["num_warps"]))
        return MemoryWork(bytes_moved=float(by), programs=self.programs(p, c), num_warps=c["num_warps"],
                          block_bytes=float(tile * e), steps=float(self.volume(p)),
                          regs_per_thread=32 + 16 * per_thread)  # fitted to gpucheck: ~16 live per position

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, problem, config)

    # ---- launch -------------------------------------------------------------------------------
    def _check(self, name: str, t: Any, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if not isinstance(t, torch.Tensor):
            raise InvalidInputError(name, "a torch.Tensor", type(t).__name__)
        if tuple(t.shape) != tuple(shape):
            raise InvalidInputError(f"shape of {name}", str(tuple(shape)), str(tuple(t.shape)))
        if t.dtype != dtype:
            raise InvalidInputError(f"dtype of {name}", str(dtype), str(t.dtype))
        return t

    def scalars(self, p: Problem) -> tuple[int, ...]:
        """(K*, S*, P*, DIL*, DIVISOR) of a max / avg pool launch."""
        w = window(p)
        return (*w["kernel"], *w["stride"], *w["padding"], *w["dilation"], int(p.attrs.get("divisor_override", 0)))

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
               out: Any = None, target: Target | None = None) -> Any:
        from .spec import get_spec

        p, c = problem, self.typed(config)
        why = problem_error(p)
        if why:
            raise InvalidInputError(f"problem {p.describe()}", "a valid pooling", why)
        spec = get_spec(self.op)
        dims = p.attrs["dims"]
        x = self._check("x", inputs.get("x"), spec.in_shape(p), p.dtype)
        D, H, W = spatial(p)
        OD, OH, OW = output_spatial(p)
        grid = (triton.cdiv(self.positions(p), c.BLOCK), p.shape["C"], p.shape["N"])
        if self.tiled:
            grid = (triton.cdiv(self.positions(p), c.BLOCK), triton.cdiv(self.planes(p), c.ROWS))
        meta = dict(BLOCK=c.BLOCK, EMULATE=emulated(p.dtype), num_warps=c.num_warps)
        shapes = spec.outputs(p)
        if out is not None:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outs) != len(shapes):
                raise InvalidInputError("out", f"{len(shapes)} tensor(s)", len(outs))
            for i, (o, (shape, dt)) in enumerate(zip(outs, shapes)):
                self._check(f"output {i}", o, shape, dt)
        if not self.backward:
            outs = outs if out is not None else [empty_like_format(x, s, dt) for s, dt in shapes]
            y = outs[0]
            if self.kind == "adaptive_avg_pool":
                K.adaptive_fwd_kernel[grid](x, y, D, H, W, OD, OH, OW, *adaptive_bounds(p, False),
                                            *_5d(x, dims), *_5d(y, dims), **meta)
            else:
                idx = outs[1] if len(outs) > 1 else y
                if len(outs) > 1 and idx.stride() != y.stride():
                    raise InvalidInputError("strides of the indices output", str(y.stride()), str(idx.stride()))
                K.pool_fwd_kernel[grid](x, y, idx, p.shape["N"], p.shape["C"], D, H, W, OD, OH, OW, *self.scalars(p),
                                        *_5d(x, dims), *_5d(y, dims), ROWS=c.ROWS, IS_MAX=self.kind == "max_pool", COUNT_PAD=bool(p.attrs.get("count_include_pad")),
                                        HAS_DIVISOR=bool(p.attrs.get("divisor_override")),
                                        RETURN_INDICES=len(outs) > 1, **meta)
            return tuple(outs)
        dy = self._check("dy", inputs.get("dy"), spec.out_shape(p), p.dtype)
        dx = outs[0] if out is not None else empty_like_format(x, spec.in_shape(p), p.dtype)
        if self.kind == "adaptive_avg_pool":
            K.adaptive_bwd_kernel[grid](dy, dx, D, H, W, OD, OH, OW, *adaptive_bounds(p, True),
                                        *_5d(dy, dims), *_5d(dx, dims), **meta)
            return dx
        idx = dy
        if self.kind == "max_pool":
            idx = self._check("indices", inputs.get("indices"), spec.out_shape(p), torch.int64)
            if idx.stride() != dy.stride():
                idx = torch.empty_strided(dy.shape, dy.stride(), dtype=torch.int64, device=dy.device).copy_(idx)
        K.pool_bwd_kernel[grid](dy, idx, dx, D, H, W, OD, OH, OW, *self.scalars(p), *_5d(dy, dims), *_5d(dx, dims),
                                IS_MAX=self.kind == "max_pool", COUNT_PAD=bool(p.attrs.get("count_include_pad")),
                                HAS_DIVISOR=bool(p.attrs.get("divisor_override")), **meta)
        return dx


VARIANTS: tuple[Variant, ...] = tuple(Gather(op) for op in OPS)
__all__ = ["Gather", "VARIANTS", "OPS", "DIMS"]
