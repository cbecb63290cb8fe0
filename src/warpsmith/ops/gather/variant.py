"""The gather/scatter variant: one tiled launcher for ``gather``, ``scatter_add`` and ``scatter``.

``tiled``: one program per ``BLOCK_J x BLOCK_B`` tile of the index side ``(A, J, B)`` (knobs
``BLOCK_J``, ``BLOCK_B``, ``num_warps``), one grid axis enumerating ``(a, j-block, b-block)``.

**Index values are checked on the host before every launch** (:func:`check_index`): every entry
must lie in ``[0, V)`` (a scatter's ``skip`` value, embedding's ``padding_idx``, aside), else an
:class:`~warpsmith.core.errors.InvalidInputError` names the tensor, the first bad value and the
range; nothing is launched and no tensor is written. That is the precondition the launch contracts
assume (``Tensor(values=(0, V))``), so no kernel ever reads or writes out of bounds. The check is a
``min``/``max`` over the index and, on a GPU, a device-to-host sync; callers that have validated the
indices already pass ``check_indices=False`` to the public ops (the compiler's emitted programs read
``WARPSMITH_CHECK_INDICES=0`` for the same purpose, see docs/ops/gather.md).

**Scatter-add uses atomics, not a sorted segment reduction**: each lane ``tl.atomic_add``s its fp32
value into an fp32 accumulator (a copy of ``self``), rounded once to the dtype at the end. Atomics
need no sort of the indices (a sort is a launch sequence of its own and, for an embedding backward,
costs more than the adds for the index counts models use) and scale with any duplicate pattern; the
price is that the order of the additions, hence the last bits of an fp32 sum with duplicate indices,
varies from run to run: :meth:`Tiled.is_deterministic` says so for ``scatter_add``. ``scatter``
(assignment) uses ``tl.atomic_xchg``, so duplicate indices are a declared atomic, not a race: one
writer wins, unspecified which, as torch documents. A deterministic segment reduction is left for
later (docs/ops/gather.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import INTERPRET, triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...core.variant import Config, Variant, next_pow2
from ...space import Enum, Space
from ...targets import Target
from . import kernel as K
from .limits import BLOCK_B, BLOCK_J, GRID_LIMIT, MAX_TILE
from .spec import expand_index

OPS = ("gather", "scatter_add", "scatter")
WARPS = (1, 2, 4, 8)


def check_index(index: torch.Tensor, n: int, name: str = "index", skip: int | None = None) -> None:
    """Refuse ``index`` unless every entry is in ``[0, n)`` (or equals ``skip``): the launch
    contracts' precondition. Raises :class:`InvalidInputError` naming the tensor, the first bad value
    and the range."""
    if index.dtype not in (torch.int64, torch.int32):
        raise InvalidInputError(f"dtype of {name}", "torch.int64 or torch.int32", str(index.dtype))
    if index.numel() == 0:
        return
    bad = (index < 0) | (index >= n)
    if skip is not None:
        bad &= index != skip
    if bool(bad.any()):
        value = int(index[bad].reshape(-1)[0])
        raise InvalidInputError(f"values of {name}", f"indices in [0, {n})" +
                                (f" or {skip}" if skip is not None else ""), value)


@dataclass(frozen=True, kw_only=True)
class TiledKnobs(Knobs):
    BLOCK_J: int
    BLOCK_B: int
    num_warps: int


def _grid(A: int, J: int, B: int, bj: int, bb: int) -> int:
    return A * triton.cdiv(J, bj) * triton.cdiv(B, bb)


class Tiled(Variant):
    name = "tiled"
    knobs = TiledKnobs
    cost_model = "memory"
    kernel_modules = (K,)
    ops = OPS

    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        return Space({"BLOCK_J": Enum(BLOCK_J, d["BLOCK_J"]), "BLOCK_B": Enum(BLOCK_B, d["BLOCK_B"]),
                      "num_warps": Enum(WARPS, d["num_warps"])})

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        bj, bb = c["BLOCK_J"], c["BLOCK_B"]
        if bj not in BLOCK_J or bb not in BLOCK_B:
            return f"BLOCK_J={bj} not in {BLOCK_J} or BLOCK_B={bb} not in {BLOCK_B}"
        if bj * bb > MAX_TILE:
            return f"a tile of {bj} x {bb} is over {MAX_TILE} elements"
        if c["num_warps"] not in WARPS:
            return f"num_warps={c['num_warps']} not one of {WARPS}"
        if _grid(p.shape["A"], p.shape["J"], p.shape["B"], bj, bb) > GRID_LIMIT:
            return f"more than {GRID_LIMIT} programs"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        bb = min(next_pow2(p.shape["B"]), 1024)
        bj = max(1, min(next_pow2(p.shape["J"]), 128, 1024 // bb))
        return {"BLOCK_J": bj, "BLOCK_B": bb, "num_warps": 4 if bj * bb >= 512 else 1}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"J": config["BLOCK_J"], "B": config["BLOCK_B"]}

    def is_deterministic(self, config: Mapping[str, Any]) -> bool:
        return self.op != "scatter_add"  # fp32 atomic adds in no fixed order

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        A, J, B = p.shape["A"], p.shape["J"], p.shape["B"]
        tile = c["BLOCK_J"] * c["BLOCK_B"]
        e = p.dtype.itemsize
        return MemoryWork(bytes_moved=float(A * J * B * (2 * e + 8)), programs=_grid(A, J, B, c["BLOCK_J"], c["BLOCK_B"]),
                          num_warps=c["num_warps"], block_bytes=float(tile * (e + 8)), steps=1.0,
                          regs_per_thread=3 * -(-tile // (32 * c["num_warps"])) * 2 + 24)

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
               out: Any = None, check_indices: bool = True, skip: int | None = None) -> Any:
        A, J, B, V = (problem.shape[k] for k in "AJBV")
        kind = problem.attrs["index"]
        idx = inputs["index"]
        want_idx = (J,) if kind == "rows" else (A, J, B)
        if not isinstance(idx, torch.Tensor) or tuple(idx.shape) != want_idx:
            raise InvalidInputError("shape of index", want_idx, tuple(getattr(idx, "shape", ())) or type(idx).__name__)
        if check_indices:
            check_index(idx, V, "index", skip)
        idx3 = expand_index(idx, kind, A, B)
        bj, bb = config["BLOCK_J"], config["BLOCK_B"]
        grid = (_grid(A, J, B, bj, bb),)
        if self.op == "gather":
            src = self._operand(inputs, "src", (A, V, B), problem.dtype)
            y = out if out is not None else torch.empty((A, J, B), dtype=problem.dtype, device=src.device)
            K.gather_kernel[grid](src, idx3, y, A, J, B, V, *src.stride(), *idx3.stride(), *y.stride(),
                                  BLOCK_J=bj, BLOCK_B=bb, num_warps=config["num_warps"])
            return y
        base = self._operand(inputs, "self", (A, V, B), problem.dtype)
        src = self._operand(inputs, "src", (A, J, B), problem.dtype)
        acc = base.to(torch.float32, copy=True).contiguous()
        K.scatter_kernel[grid](src, idx3, acc, A, J, B, V, -1 if skip is None else skip, 0.0,
                               *src.stride(), *idx3.stride(), *acc.stride(), BLOCK_J=bj, BLOCK_B=bb,
                               ADD=self.op == "scatter_add", HAS_SRC=True, EMULATE=INTERPRET,
                               num_warps=config["num_warps"])
        res = acc if problem.dtype == torch.float32 else acc.to(problem.dtype)
        if out is not None:
            out.copy_(res)
            return out
        return res

    def _operand(self, inputs: Mapping[str, Any], name: str, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        t = inputs.get(name)
        if not isinstance(t, torch.Tensor):
            raise InvalidInputError(f"input {name} of {self.op}", "a torch.Tensor", type(t).__name__)
        if tuple(t.shape) != shape:
            raise InvalidInputError(f"shape of {name}", shape, tuple(t.shape))
        if t.dtype != dtype:
            raise InvalidInputError(f"dtype of {name}", str(dtype), str(t.dtype))
        return t

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, config)


VARIANTS: tuple[Variant, ...] = tuple(Tiled(op) for op in OPS)
