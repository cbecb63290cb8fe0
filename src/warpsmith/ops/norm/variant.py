"""Normalization variants (RMSNorm, LayerNorm and their backwards): launchers, spaces, validity.

Forward (ops ``rms_norm``, ``layer_norm``):

- ``row``: ROWS_PER_PROGRAM whole rows per program, each row in registers (BLOCK_N = next power
  of two >= N, not a knob); invalid where the tile needs more registers than a thread has.
- ``persistent``: the same tiles, with a grid of PROGRAMS_PER_SM x SMs programs striding over them.
- ``looped``: one row per program in chunks of BLOCK_N (a knob; any N): a statistics pass, then
  an output pass that re-reads the row.

Backward (``rms_norm_backward``, ``layer_norm_backward``): the same three, where each program
also reduces its rows' dw/db into one fp32 partial row of a workspace that a second kernel sums
in a fixed order (REDUCE="workspace"), or adds it atomically into one row (REDUCE="atomic",
declared non-deterministic). ``looped`` here takes ROWS_PER_PROGRAM rows per program too, so the
workspace has cdiv(M, ROWS_PER_PROGRAM) rows.

Every variant has ``num_warps``. The search chooses; the registry's default is the first of
``VARIANTS`` whose heuristic default fits (row, then persistent, then looped for the forward;
persistent first for the backward, whose workspace is then smallest).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...cost.memory_model import MemoryWork
from ...space import Enum, Pow2, Space, fixed
from ...core.opspec import Problem
from ...targets import Target
from ..shared import kernel as common
from ...core.dtypes import param_dtype as dtype_param
from ..shared.launch import emulated, launch_target
from ...core.variant import Config, Variant, next_pow2, persistent_programs, scratch
from . import kernel as K
from .limits import REDUCE_BLOCK_N, REDUCE_BLOCK_P, REDUCE_WARPS

# addresses, masks, loop state; a persistent grid's row loop holds more. Fitted so the estimates bound
# ptxas's counts from `warpsmith gpucheck` (sm_90) near the per-thread limit
REG_OVERHEAD = 44
PERSISTENT_REGS = 24
WARPS = (1, 2, 4, 8, 16, 32)
MAX_THREADS = 1024


def _check_2d(name: str, t: torch.Tensor, M: int, N: int, dtype: torch.dtype | None, output: bool = False) -> None:
    """Inputs: any row stride, unit column stride. Outputs: contiguous (contract.py)."""
    if tuple(t.shape) != (M, N):
        raise InvalidInputError(f"shape of {name}", str((M, N)), str(tuple(t.shape)))
    if dtype is not None and t.dtype != dtype:
        raise InvalidInputError(f"dtype of {name}", str(dtype), str(t.dtype))
    if output and not t.is_contiguous():
        raise InvalidInputError(f"strides of {name}", "a contiguous output", str(tuple(t.stride())))
    if N > 1 and t.stride(1) != 1:
        raise InvalidInputError(f"strides of {name}", "unit stride along the row (the last dimension)",
                                str(tuple(t.stride())))


def _check_1d(name: str, t: torch.Tensor, n: int, dtype: torch.dtype | None = None) -> None:
    if tuple(t.shape) != (n,):
        raise InvalidInputError(f"shape of {name}", str((n,)), str(tuple(t.shape)))
    if dtype is not None and t.dtype != dtype:
        raise InvalidInputError(f"dtype of {name}", str(dtype), str(t.dtype))
    if n > 1 and t.stride(0) != 1:
        raise InvalidInputError(f"stride of {name}", "1 (contiguous)", t.stride(0))


def param_dtype(p: Problem) -> torch.dtype:
    """dtype of the weight, the bias and their gradients: x's, or fp32 (``weight_dtype``)."""
    return dtype_param(p.attrs["weight_dtype"], p.dtype)


@dataclass(frozen=True, kw_only=True)
class RowKnobs(Knobs):
    """The knobs of ``row`` (and, with the ones below, of every norm variant)."""
    num_warps: int
    ROWS_PER_PROGRAM: int = 1


@dataclass(frozen=True, kw_only=True)
class PersistentKnobs(RowKnobs):
    PROGRAMS_PER_SM: int


@dataclass(frozen=True, kw_only=True)
class LoopedKnobs(RowKnobs):
    BLOCK_N: int


@dataclass(frozen=True, kw_only=True)
class RowBackwardKnobs(RowKnobs):
    REDUCE: str = "workspace"


@dataclass(frozen=True, kw_only=True)
class PersistentBackwardKnobs(RowBackwardKnobs):
    PROGRAMS_PER_SM: int


@dataclass(frozen=True, kw_only=True)
class LoopedBackwardKnobs(RowBackwardKnobs):
    BLOCK_N: int


def _outputs(out: Any, count: int) -> list[torch.Tensor | None]:
    if out is None:
        return [None] * count
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != count:
        raise InvalidInputError("out", f"{count} output tensor(s)", f"{len(outs)}")
    return outs


class _Norm(Variant):
    """Shared by every normalization variant; ``kind`` is "rms" or "layer"."""

    cost_model = "memory"
    kernel_modules = (K, common)
    backward = False
    looped = False
    live = 2  # fp32 values per tile element held at once (x and a temporary)

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.op = ("rms_norm" if kind == "rms" else "layer_norm") + ("_backward" if self.backward else "")

    # ---- space ----------------------------------------------------------------------------
    def _rows_frag(self, p: Problem, default: int) -> Pow2:
        hi = min(64, next_pow2(p.shape["M"]))
        return Pow2(1, hi, min(default, hi))

    def block_n(self, p: Problem, c: Mapping[str, Any]) -> int:
        return c["BLOCK_N"] if self.looped else next_pow2(p.shape["N"])

    def rows(self, c: Mapping[str, Any]) -> int:
        return self.typed(c).ROWS_PER_PROGRAM

    def _default_warps(self, p: Problem, c: Mapping[str, Any], per_thread: int) -> int:
        elems = self.rows(c) * self.block_n(p, c)
        return max(1, min(16, elems // (32 * per_thread)))

    # ---- validity (the one place for resource constraints) -------------------------------------
    def regs_per_thread(self, p: Problem, c: Mapping[str, Any], warp_size: int = 32) -> int:
        threads = c["num_warps"] * warp_size
        per_thread = -(-self.rows(c) * self.block_n(p, c) // threads)
        live = self.live + (1 if p.attrs.get("residual") else 0)
        return live * per_thread + REG_OVERHEAD + (PERSISTENT_REGS if isinstance(self, _PersistentGrid) else 0)

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        threads = c["num_warps"] * target.warp_size
        if threads > MAX_THREADS:
            return f"{c['num_warps']} warps of {target.warp_size} threads > {MAX_THREADS} threads per program"
        return None  # registers: Variant.register_rejection, against the target's per-thread limit

    def _fit_warps(self, p: Problem, cfg: Config, target: Target) -> Config:
        while cfg["num_warps"] < 16 and not self.invalid(p, cfg, target) and \
                self.register_rejection(p, cfg, target):
            cfg["num_warps"] *= 2
        return cfg

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        out = {"M": self.rows(config)}
        if self.looped:
            out["N"] = config["BLOCK_N"]
        return out

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, problem, config)

    # ---- shared launch helpers ----------------------------------------------------------------
    def _meta(self, p: Problem, c: Mapping[str, Any]) -> dict:
        meta = dict(BLOCK_N=self.block_n(p, c), IS_RMS=self.kind == "rms",
                    EMULATE=emulated(p.dtype), num_warps=c["num_warps"])
        if not (self.looped and not self.backward):
            meta["ROWS"] = self.rows(c)
        return meta


# =============================================================================================
# forward
# =============================================================================================
class _NormForward(_Norm):
    def stats_count(self) -> int:
        return 1 if self.kind == "rms" else 2

    def launch(self, inputs, problem, config, out=None, target: Target | None = None):
        p = problem
        M, N = p.shape["M"], p.shape["N"]
        x = inputs["x"]
        _check_2d("x", x, M, N, p.dtype)
        res, w, b = inputs.get("residual"), inputs.get("weight"), inputs.get("bias")
        has_res, has_w, has_b = bool(p.attrs["residual"]), bool(p.attrs["weight"]), bool(p.attrs.get("bias"))
        for name, t, needed in (("residual", res, has_res), ("weight", w, has_w), ("bias", b, has_b)):
            if needed and t is None:
                raise InvalidInputError(name, f"a tensor (the problem has {name}=True)", None)
        if has_res:
            _check_2d("residual", res, M, N, p.dtype)
        if has_w:
            _check_1d("weight", w, N, param_dtype(p))
        if has_b:
            _check_1d("bias", b, N, param_dtype(p))
        count = 1 + int(has_res) + self.stats_count()
        outs = _outputs(out, count)
        shapes = [((M, N), p.dtype)] * (1 + int(has_res)) + [((M,), torch.float32)] * self.stats_count()
        for i, (shape, dt) in enumerate(shapes):
            if outs[i] is None:
                outs[i] = torch.empty(shape, dtype=dt, device=x.device)
            elif len(shape) == 2:
                _check_2d(f"output {i}", outs[i], M, N, dt, output=True)
            else:
                _check_1d(f"output {i}", outs[i], M, dt)
        y = outs[0]
        s = outs[1] if has_res else y
        mean = outs[-2] if self.kind == "layer" else outs[-1]
        rstd = outs[-1]
        args = (x, res if has_res else x, w if has_w else x, b if has_b else x, y, s, mean, rstd,
                M, N, float(p.attrs["eps"]),
                x.stride(0), res.stride(0) if has_res else 0, y.stride(0), s.stride(0) if has_res else 0)
        meta = dict(HAS_W=has_w, HAS_B=has_b, HAS_RES=has_res, **self._meta(p, config))
        self._run(args, meta, p, config, target)
        return tuple(outs)

    def work(self, problem: Problem, config: Mapping[str, Any], target: Target) -> MemoryWork:
        p, c = problem, config
        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        res = bool(p.attrs["residual"])
        pe = param_dtype(p).itemsize
        params = (int(p.attrs["weight"]) + int(bool(p.attrs.get("bias")))) * N * pe
        streams = 2 + 2 * int(res) + (1 if self.looped else 0)  # x, y (+ residual, s) (+ the re-read)
        return MemoryWork(
            bytes_moved=float(streams * M * N * e + params + 4 * M * self.stats_count()),
            programs=self.programs(p, c, target), num_warps=c["num_warps"],
            block_bytes=float(self.rows(c) * self.block_n(p, c) * e * (2 if res else 1)),
            steps=self.steps(p, c, target), regs_per_thread=self.regs_per_thread(p, c))

    def steps(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> float:
        return 1.0

    def programs(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> int:
        return triton.cdiv(p.shape["M"], self.rows(c))


class RowNorm(_NormForward):
    name = "row"
    knobs = RowKnobs
    DEFAULT_PER_THREAD = 8  # row elements a thread holds in the default config

    def space(self, problem: Problem, target: Target) -> Space:
        return Space({"ROWS_PER_PROGRAM": self._rows_frag(problem, self._default_rows(problem)),
                      "num_warps": Enum(WARPS, 4)})

    def _default_rows(self, p: Problem) -> int:
        return max(1, min(next_pow2(p.shape["M"]), 2048 // next_pow2(p.shape["N"]), 64))

    def default_config(self, problem: Problem, target: Target) -> Config:
        cfg = self.space(problem, target).default()
        cfg["num_warps"] = self._default_warps(problem, cfg, self.DEFAULT_PER_THREAD)
        return self._fit_warps(problem, cfg, target)

    def _run(self, args, meta, p, c, target):
        K.norm_fwd_row_kernel[(self.programs(p, c),)](*args, **meta)


class _PersistentGrid:
    """A fixed grid of PROGRAMS_PER_SM x SMs programs striding over blocks of rows (a mixin)."""

    def programs(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> int:
        return persistent_programs(triton.cdiv(p.shape["M"], self.rows(c)), c["PROGRAMS_PER_SM"],
                                   launch_target(target))

    def steps(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> float:
        return float(triton.cdiv(triton.cdiv(p.shape["M"], self.rows(c)), self.programs(p, c, target)))


class PersistentNorm(_PersistentGrid, RowNorm):
    name = "persistent"
    knobs = PersistentKnobs
    # at 8, Triton 3.6's ptxas spilled the LayerNorm forward at N = 1000, 2 rows, 8 warps (gpucheck)
    DEFAULT_PER_THREAD = 16

    def space(self, problem: Problem, target: Target) -> Space:
        frags = super().space(problem, target).fragments
        frags["PROGRAMS_PER_SM"] = Enum((1, 2, 4, 8), 4)
        return Space(frags)

    def _run(self, args, meta, p, c, target):
        K.norm_fwd_persistent_kernel[(self.programs(p, c, target),)](*args, **meta)


class LoopedNorm(_NormForward):
    name = "looped"
    knobs = LoopedKnobs
    looped = True

    def space(self, problem: Problem, target: Target) -> Space:
        hi = max(16, min(16384, next_pow2(problem.shape["N"]) // 2))
        return Space({"BLOCK_N": Pow2(16, hi, min(hi, 8192)), "num_warps": Enum(WARPS, 8)})

    def default_config(self, problem: Problem, target: Target) -> Config:
        cfg = self.space(problem, target).default()
        cfg["num_warps"] = self._default_warps(problem, cfg, 8)
        return self._fit_warps(problem, cfg, target)

    def programs(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> int:
        return p.shape["M"]

    def steps(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> float:
        return 2.0 * triton.cdiv(p.shape["N"], c["BLOCK_N"])

    def _run(self, args, meta, p, c, target):
        K.norm_fwd_looped_kernel[(p.shape["M"],)](*args, **meta)


# =============================================================================================
# backward
# =============================================================================================
class _NormBackward(_Norm):
    backward = True
    live = 4  # dy, x (xhat), g, dx

    def space_common(self, p: Problem, rows_default: int) -> dict:
        has_params = bool(p.attrs["weight"] or p.attrs.get("bias"))
        return {"ROWS_PER_PROGRAM": self._rows_frag(p, rows_default), "num_warps": Enum(WARPS, 4),
                "REDUCE": Enum(("workspace", "atomic"), "workspace") if has_params else fixed("workspace")}

    def is_deterministic(self, config: Mapping[str, Any]) -> bool:
        return self.typed(config).REDUCE != "atomic"

    def regs_per_thread(self, p: Problem, c: Mapping[str, Any], warp_size: int = 32) -> int:
        regs = super().regs_per_thread(p, c, warp_size) + (1 if p.attrs["residual"] else 0)
        if self.name == "persistent":  # dw and db accumulators across row blocks
            regs += 2 * -(-self.block_n(p, c) // (c["num_warps"] * warp_size))
        return regs

    def n_params(self, p: Problem) -> int:
        return int(bool(p.attrs["weight"])) + int(bool(p.attrs.get("bias")))

    def default_config(self, problem: Problem, target: Target) -> Config:
        cfg = self.space(problem, target).default()
        # looped: 16 chunk elements a thread (at 4 and 8, 16 warps, ptxas spilled the fp32 LayerNorm backward)
        cfg["num_warps"] = self._default_warps(problem, cfg, 16 if self.looped else 4)
        return self._fit_warps(problem, cfg, target)

    def programs(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> int:
        return triton.cdiv(p.shape["M"], self.rows(c))

    def steps(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> float:
        return 1.0

    def launch(self, inputs, problem, config, out=None, target: Target | None = None):
        p = problem
        M, N = p.shape["M"], p.shape["N"]
        dy, x, rstd = inputs["dy"], inputs["x"], inputs["rstd"]
        _check_2d("dy", dy, M, N, p.dtype)
        _check_2d("x", x, M, N, p.dtype)
        _check_1d("rstd", rstd, M, torch.float32)
        mean = inputs.get("mean")
        if self.kind == "layer":
            if mean is None:
                raise InvalidInputError("mean", "the forward's saved mean (layer_norm)", None)
            _check_1d("mean", mean, M, torch.float32)
        has_w, has_b, has_ds = bool(p.attrs["weight"]), bool(p.attrs.get("bias")), bool(p.attrs["residual"])
        w, ds = inputs.get("weight"), inputs.get("ds")
        if has_w:
            if w is None:
                raise InvalidInputError("weight", "a tensor (the problem has weight=True)", None)
            _check_1d("weight", w, N, param_dtype(p))
        if has_ds:
            if ds is None:
                raise InvalidInputError("ds", "a tensor (the problem has residual=True)", None)
            _check_2d("ds", ds, M, N, p.dtype)
        pdt = param_dtype(p)
        k = self.n_params(p)
        outs = _outputs(out, 1 + k)
        if outs[0] is None:
            outs[0] = torch.empty((M, N), dtype=p.dtype, device=x.device)
        _check_2d("dx", outs[0], M, N, p.dtype, output=True)
        for i in range(1, 1 + k):
            if outs[i] is None:
                outs[i] = torch.empty((N,), dtype=pdt, device=x.device)
            _check_1d(f"output {i}", outs[i], N, pdt)
        dx = outs[0]
        dw = outs[1] if has_w else dx
        db = outs[-1] if has_b else dx
        atomic = self.typed(config).REDUCE == "atomic" and k > 0
        programs = self.programs(p, config, target)
        if k == 0:
            partial = dx  # never touched: no parameter gradients
        elif atomic:
            partial = torch.zeros((1, k, N), dtype=torch.float32, device=x.device)
        else:
            partial = scratch((programs, k, N), torch.float32, x.device)
        meta = dict(K=max(k, 1), HAS_W=has_w, HAS_B=has_b, HAS_DS=has_ds, ATOMIC=atomic, **self._meta(p, config))
        args = (dy, x, w if has_w else x, mean if mean is not None else rstd, rstd, ds if has_ds else x, dx, partial,
                M, N, dy.stride(0), x.stride(0), ds.stride(0) if has_ds else 0, dx.stride(0))
        self._kernel()[(programs,)](*args, **meta)
        if k:
            K.norm_partials_reduce_kernel[(triton.cdiv(N, REDUCE_BLOCK_N),)](
                partial, dw, db, 1 if atomic else programs, N, BLOCK_P=REDUCE_BLOCK_P, BLOCK_N=REDUCE_BLOCK_N, K=k,
                HAS_W=has_w, HAS_B=has_b, EMULATE=meta["EMULATE"], num_warps=REDUCE_WARPS)
        return tuple(outs)

    def work(self, problem: Problem, config: Mapping[str, Any], target: Target) -> MemoryWork:
        """The main kernel, plus the workspace: written (or added) by it and read back by the
        reduction kernel, whose launch is counted; the reduction's programs are short and their
        time is its bytes, so they are not counted as programs of the main kernel's shape."""
        p, c = problem, config
        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        pe = param_dtype(p).itemsize
        k = self.n_params(p)
        programs = self.programs(p, c, target)
        atomic = self.typed(c).REDUCE == "atomic" and k > 0
        streams = 3 + int(bool(p.attrs["residual"])) + (2 if self.looped else 0)  # dy, x, dx (+ ds) (+ re-reads)
        stats = 4 * M * (1 if self.kind == "rms" else 2)
        params = int(bool(p.attrs["weight"])) * N * pe + k * N * pe
        partial_rows = 1 if atomic else programs
        workspace = (4 * programs * k * N + 4 * partial_rows * k * N) if k else 0  # written (or added), read
        return MemoryWork(
            bytes_moved=float(streams * M * N * e + stats + params + workspace),
            programs=programs, num_warps=c["num_warps"],
            block_bytes=float(self.rows(c) * self.block_n(p, c) * e * 2),
            steps=self.steps(p, c, target), regs_per_thread=self.regs_per_thread(p, c),
            launches=1 + (1 if k else 0) + (1 if atomic else 0))


class PersistentNormBackward(_PersistentGrid, _NormBackward):
    name = "persistent"
    knobs = PersistentBackwardKnobs

    def space(self, problem: Problem, target: Target) -> Space:
        frags = self.space_common(problem, max(1, min(16, 1024 // next_pow2(problem.shape["N"]))))
        frags["PROGRAMS_PER_SM"] = Enum((1, 2, 4, 8), 2)
        return Space(frags)

    def _kernel(self):
        return K.norm_bwd_persistent_kernel


class RowNormBackward(_NormBackward):
    name = "row"
    knobs = RowBackwardKnobs

    def space(self, problem: Problem, target: Target) -> Space:
        return Space(self.space_common(problem, max(1, min(16, 1024 // next_pow2(problem.shape["N"])))))

    def _kernel(self):
        return K.norm_bwd_row_kernel


class LoopedNormBackward(_NormBackward):
    name = "looped"
    knobs = LoopedBackwardKnobs
    looped = True

    def space(self, problem: Problem, target: Target) -> Space:
        frags = self.space_common(problem, 4)
        hi = max(16, min(8192, next_pow2(problem.shape["N"]) // 2))
        frags["BLOCK_N"] = Pow2(16, hi, min(hi, 1024))
        return Space(frags)

    def steps(self, p: Problem, c: Mapping[str, Any], target: Target | None = None) -> float:
        return 2.0 * triton.cdiv(p.shape["N"], c["BLOCK_N"])

    def _kernel(self):
        return K.norm_bwd_looped_kernel


VARIANTS: tuple[Variant, ...] = tuple(
    [cls("rms") for cls in (RowNorm, PersistentNorm, LoopedNorm)]
    + [cls("rms") for cls in (PersistentNormBackward, RowNormBackward, LoopedNormBackward)]
    + [cls("layer") for cls in (RowNorm, PersistentNorm, LoopedNorm)]
    + [cls("layer") for cls in (PersistentNormBackward, RowNormBackward, LoopedNormBackward)])
