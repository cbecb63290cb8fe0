"""Softmax / log-softmax variants (forward and backward), chosen between by the search.

- ``single_pass``: whole rows in registers (``BLOCK_N = next_pow2(N)``), ``ROWS`` rows per
  program step; knobs ``ROWS``, ``num_warps`` and ``PROGRAMS_PER_SM`` (0: one program per block
  of rows; k > 0: a persistent grid of k x SMs programs striding over the row blocks, which
  saves per-program overhead on many short rows). Invalid above the register budget: at most
  ``MAX_ELEMS_PER_THREAD`` (64) fp32 row elements per thread, so at most 65536 elements per
  program (32 warps); longer rows go to ``online``.
- ``online``: one row per program, looped over ``BLOCK_N`` chunks: the online normalizer pass
  then the output pass (forward: 2 reads + 1 write); knobs ``BLOCK_N`` and ``num_warps``, at most
  ``MAX_ELEMS_PER_THREAD_LOOPED`` (32) chunk elements per thread.

One variant class per layout serves the four ops (``softmax``, ``log_softmax`` and their
``_backward``); the kernels share code through the ``LOG`` constexpr. ``VARIANTS`` lists
single_pass before online for every op, so the registry's default is single_pass where the row
fits (e.g. N = 1024) and online otherwise (e.g. N = 262144).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...space import Enum, Pow2, Space, fixed
from ...core.opspec import Problem
from ...targets import Target
from ..shared import kernel as common
from ..shared.launch import allocate, emulated, launch_target
from ...core.variant import Config, Variant, is_pow2, next_pow2, persistent_programs
from . import kernel as K
from .limits import INDEX_LIMIT

OPS = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")
MAX_ELEMS_PER_THREAD = 64  # fp32 row elements a thread holds in the single-pass kernels
MAX_ELEMS_PER_THREAD_LOOPED = 32  # per chunk in the online kernels (x and its exp live together)
WARPS = (1, 2, 4, 8, 16, 32)
PROGRAMS_PER_SM = (0, 1, 2, 4, 8)  # 0: not persistent
MAX_ROWS = 128
MAX_CHUNK = 16384


@dataclass(frozen=True, kw_only=True)
class OnlineKnobs(Knobs):
    BLOCK_N: int
    num_warps: int


@dataclass(frozen=True, kw_only=True)
class SinglePassKnobs(OnlineKnobs):
    ROWS: int
    PROGRAMS_PER_SM: int = 0  # 0: one program per block of rows; else a persistent grid


class _Softmax(Variant):
    cost_model = "memory"
    kernel_modules = (K, common)

    ops = OPS

    def __init__(self, op: str) -> None:
        super().__init__(op)
        self.log = op.startswith("log_")
        self.backward = op.endswith("_backward")

    # ---- shared -----------------------------------------------------------------------------
    @property
    def input_names(self) -> tuple[str, ...]:
        return ("y", "dy") if self.backward else ("x",)

    def _warps_invalid(self, tile: int, c: Mapping[str, Any], budget: int) -> str | None:
        nw = c["num_warps"]
        if nw not in WARPS:
            return f"num_warps={nw} not one of {WARPS}"
        per_thread = -(-tile // (32 * nw))
        if per_thread > budget:
            return (f"{tile} elements per program need {per_thread} per thread with {nw} warps: over the "
                    f"register budget of {budget}")
        if nw > 1 and tile < 32 * nw:
            return f"{nw} warps for {tile} elements per program would leave whole warps idle"
        return None

    def _operands(self, inputs: Mapping[str, torch.Tensor], p: Problem, out: Any, block_n: int):
        M, N = p.shape["M"], p.shape["N"]
        ts = []
        for name in self.input_names:
            t = inputs.get(name)
            if not isinstance(t, torch.Tensor):
                raise InvalidInputError(f"input {name} of {self.op}", "a torch.Tensor", type(t).__name__)
            if tuple(t.shape) != (M, N):
                raise InvalidInputError(f"shape of {name}", f"({M}, {N})", tuple(t.shape))
            if t.dtype != p.dtype:
                raise InvalidInputError(f"dtype of {name}", str(p.dtype), str(t.dtype))
            if ts and t.device != ts[0].device:
                raise InvalidInputError(f"device of {name}", str(ts[0].device), str(t.device))
            if (N + block_n) * max(1, t.stride(1)) >= INDEX_LIMIT:  # max: the output's offsets too
                raise InvalidInputError(f"column stride of {name}", "offsets within a row below 2^31 (the kernels "
                                        "index a row in 32 bits)", f"stride {t.stride(1)} over {N} columns")
            ts.append(t)
        out, = allocate(out, [((M, N), p.dtype)], ts[0].device, unit_cols=True)
        return ts, out

    def _strides(self, ts: list[torch.Tensor], out: torch.Tensor) -> dict[str, int]:
        if self.backward:
            return dict(stride_ym=ts[0].stride(0), stride_yn=ts[0].stride(1), stride_dym=ts[1].stride(0),
                        stride_dyn=ts[1].stride(1), stride_dxm=out.stride(0))
        return dict(stride_xm=ts[0].stride(0), stride_xn=ts[0].stride(1), stride_ym=out.stride(0))

    def _emulate(self, p: Problem) -> bool:
        return emulated(p.dtype)

    def _reads(self) -> int:
        """Tensors read per element in one pass over the row."""
        return 2 if self.backward else 1


class SinglePass(_Softmax):
    name = "single_pass"
    knobs = SinglePassKnobs

    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        block_n = next_pow2(problem.shape["N"])
        rows_hi = max(1, min(next_pow2(problem.shape["M"]), MAX_ROWS, (MAX_ELEMS_PER_THREAD * 32 * 32) // block_n))
        return Space({
            "BLOCK_N": fixed(block_n),
            "ROWS": Pow2(1, rows_hi, min(d["ROWS"], rows_hi)),
            "num_warps": Enum(WARPS, d["num_warps"]),
            "PROGRAMS_PER_SM": Enum(PROGRAMS_PER_SM, 0),
        })

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        bn, rows = c["BLOCK_N"], c["ROWS"]
        if not is_pow2(bn) or not is_pow2(rows):
            return f"BLOCK_N={bn} and ROWS={rows} must be powers of two"
        if bn < p.shape["N"]:
            return f"a row of N={p.shape['N']} does not fit in BLOCK_N={bn} (single pass holds the whole row)"
        if c.get("PROGRAMS_PER_SM", 0) not in PROGRAMS_PER_SM:
            return f"PROGRAMS_PER_SM={c['PROGRAMS_PER_SM']} not one of {PROGRAMS_PER_SM}"
        return self._warps_invalid(rows * bn, c, MAX_ELEMS_PER_THREAD)

    def default_config(self, p: Problem, target: Target) -> Config:
        block_n = next_pow2(p.shape["N"])
        rows = max(1, min(next_pow2(p.shape["M"]), MAX_ROWS, 2048 // block_n))
        tile = rows * block_n
        warps = max(1, min(32, tile // 256))  # about 8 elements per thread; 64 at 65536
        return {"BLOCK_N": block_n, "ROWS": rows, "num_warps": warps, "PROGRAMS_PER_SM": 0}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        # the row is one block: N = BLOCK_N/2 + 1 fills it partly (N = BLOCK_N + 1 cannot run here)
        return {"M": config["ROWS"], "N": max(1, config["BLOCK_N"] // 2)}

    def programs(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        tiles = triton.cdiv(p.shape["M"], c["ROWS"])
        return persistent_programs(tiles, self.typed(c).PROGRAMS_PER_SM, target)

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        programs = self.programs(p, c, target)
        per_thread = -(-c["ROWS"] * c["BLOCK_N"] // (32 * c["num_warps"]))
        return MemoryWork(
            bytes_moved=float((self._reads() + 1) * M * N * e), programs=programs, num_warps=c["num_warps"],
            block_bytes=float(self._reads() * c["ROWS"] * N * e),
            steps=float(-(-triton.cdiv(M, c["ROWS"]) // programs)),
            regs_per_thread=(self._reads() + 1) * per_thread + 24)

    def launch(self, inputs, problem, config, out=None, target: Target | None = None):

        ts, out = self._operands(inputs, problem, out, config["BLOCK_N"])
        grid = (self.programs(problem, config, launch_target(target)),)
        kernel = K.softmax_backward_single_pass_kernel if self.backward else K.softmax_single_pass_kernel
        kernel[grid](*ts, out, problem.shape["M"], problem.shape["N"], **self._strides(ts, out),
                     BLOCK_N=config["BLOCK_N"], ROWS=config["ROWS"], LOG=self.log, EMULATE=self._emulate(problem),
                     num_warps=config["num_warps"])
        return out

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, config)


class Online(_Softmax):
    name = "online"
    knobs = OnlineKnobs

    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        top = next_pow2(problem.shape["N"])
        return Space({
            "BLOCK_N": Pow2(min(16, top), min(top, MAX_CHUNK), d["BLOCK_N"]),
            "num_warps": Enum(WARPS, d["num_warps"]),
        })

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        if not is_pow2(c["BLOCK_N"]):
            return f"BLOCK_N={c['BLOCK_N']} must be a power of two"
        return self._warps_invalid(c["BLOCK_N"], c, MAX_ELEMS_PER_THREAD_LOOPED)

    def default_config(self, p: Problem, target: Target) -> Config:
        block_n = min(next_pow2(p.shape["N"]), 4096)
        return {"BLOCK_N": block_n, "num_warps": max(1, min(8, block_n // 512))}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"N": config["BLOCK_N"]}

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        # pass 1 reads x (forward), y and dy (softmax backward) or dy (log-softmax backward);
        # pass 2 reads the inputs again and writes. The re-read is counted as DRAM traffic.
        pass1 = 1 if (self.log and self.backward) else self._reads()
        per_elem = pass1 + self._reads() + 1
        chunks = triton.cdiv(N, c["BLOCK_N"])
        return MemoryWork(
            bytes_moved=float(per_elem * M * N * e), programs=M, num_warps=c["num_warps"],
            block_bytes=float(self._reads() * min(N, c["BLOCK_N"]) * e), steps=float(2 * chunks),
            regs_per_thread=(self._reads() + 1) * -(-c["BLOCK_N"] // (32 * c["num_warps"])) + 40)

    def launch(self, inputs, problem, config, out=None):
        ts, out = self._operands(inputs, problem, out, config["BLOCK_N"])
        kernel = K.softmax_backward_online_kernel if self.backward else K.softmax_online_kernel
        kernel[(problem.shape["M"],)](*ts, out, problem.shape["M"], problem.shape["N"], **self._strides(ts, out),
                                      BLOCK_N=config["BLOCK_N"], LOG=self.log, EMULATE=self._emulate(problem),
                                      num_warps=config["num_warps"])
        return out

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, config)


VARIANTS: tuple[Variant, ...] = tuple(v for op in OPS for v in (SinglePass(op), Online(op)))
