"""Variant: *how* an op is computed — a Triton kernel family, its launcher and its space.

A variant declares, in one place each:

- ``space(problem, target)``: the typed knobs the search may set;
- ``invalid(problem, config, target)``: the validity predicate (resource limits such as
  shared memory and registers against the target); it returns a reason or None;
- ``guards``: preconditions of specializations (a knob set to True is only valid where its
  guard holds, e.g. ``EVEN_K`` needs ``K % BLOCK_K == 0``); dispatch re-checks them;
- ``default_config(problem, target)``: the heuristic used when the DB has no record;
- ``launch(inputs, problem, config, out=None)``: allocate, compute the grid, launch;
- ``is_deterministic(config)``: whether two runs give bitwise the same output;
- ``cost_model`` and, for the ``"memory"`` model, ``work(problem, config, target)``: what the cost model
  needs to predict a config's time (cost/cost.py).
"""
from __future__ import annotations

import abc
import contextlib
import contextvars
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import torch

from .config import Knobs
from .errors import UnknownNameError, WarpsmithError
from .opspec import Problem

if TYPE_CHECKING:  # annotations only: spaces and targets sit above core
    from ..space import Space
    from ..targets import Target

Config = dict[str, Any]

_POISON: contextvars.ContextVar[bool] = contextvars.ContextVar("warpsmith_poison", default=False)


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Within this block, scratch buffers a launcher allocates are filled with NaN (or -1)."""
    token = _POISON.set(True)
    try:
        yield
    finally:
        _POISON.reset(token)


def poison_fill(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` with NaN (floats), True (bool) or all-ones bytes (ints: -1 / max): the one poison
    of the verifier and the check harness."""
    if t.is_floating_point() or t.is_complex():
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        return t.fill_(True)
    return t.fill_(-1) if t.dtype.is_signed else t.fill_(torch.iinfo(t.dtype).max)


def scratch(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialised buffer that a kernel must fully write (poisoned under verification)."""
    t = torch.empty(shape, dtype=dtype, device=device)
    return poison_fill(t) if _POISON.get() else t


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def is_pow2(n: Any) -> bool:
    """Whether ``n`` is a positive integer power of two (bools are not integers here)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n & (n - 1) == 0


def persistent_programs(tiles: int, programs_per_sm: int, target: Target) -> int:
    """Programs of a grid over ``tiles`` work items: one per tile, or with ``programs_per_sm`` > 0 a
    persistent grid of that many programs per SM (never more than the tiles)."""
    return max(1, min(tiles, programs_per_sm * target.sms)) if programs_per_sm else max(1, tiles)


def source_hash(*modules: object) -> str:
    """A short hash of the source text of modules (a changed kernel or launcher invalidates its records)."""
    import inspect

    h = hashlib.sha256()
    for m in modules:
        h.update(inspect.getsource(m).encode())  # type: ignore[arg-type]
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Guard:
    """A specialization's precondition: where ``config[knob]`` is true, ``holds`` must be.

    ``fit`` maps a shape to a nearby shape where the guard holds (the verifier uses it to pick
    odd test shapes the specialization is allowed to run on).
    """

    knob: str
    text: str
    holds: Callable[[Problem, Mapping[str, Any]], bool]
    fit: Callable[[dict[str, int], Mapping[str, Any]], dict[str, int]]

    def active(self, config: Mapping[str, Any]) -> bool:
        return bool(config.get(self.knob))


class Variant(abc.ABC):
    op: str = ""
    name: str = ""
    guards: tuple[Guard, ...] = ()
    kernel_modules: tuple[Any, ...] = ()  # modules holding the @triton.jit code it launches
    cost_model: str = "memory"  # "memory" (needs work()) or "gemm"; see cost/cost.py
    ops: tuple[str, ...] = ()  # a variant class serving several ops (one instance per op) lists them
    knobs: type[Knobs] | None = None  # the config's typed form (core/config.py); see typed()

    def __init__(self, op: str | None = None) -> None:
        """``op``: which of ``ops`` this instance serves (a variant of a single op takes none)."""
        if op is not None:
            if op not in self.ops:
                raise UnknownNameError(f"op of variant {self.name}", op, list(self.ops))
            self.op = op

    @abc.abstractmethod
    def space(self, problem: Problem, target: Target) -> Space:
        """The typed knobs the search may set for this problem and target."""

    def invalid(self, problem: Problem, config: Mapping[str, Any], target: Target) -> str | None:
        return None

    @abc.abstractmethod
    def default_config(self, problem: Problem, target: Target) -> Config:
        """The heuristic config used when the tuning DB has no record."""

    @abc.abstractmethod
    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
               out: Any = None) -> Any:
        """Allocate the outputs (unless ``out`` is given), compute the grid, launch; returns the outputs.

        One output: ``out`` and the result are a tensor; several: a tuple in the order of the
        op's ``OpSpec.outputs``. Given ``out``, the launcher writes into it and returns it."""

    def is_deterministic(self, config: Mapping[str, Any]) -> bool:
        return True

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        """Launch contracts (verify/symbolic) of exactly the kernels and constexprs ``config`` launches."""
        return []

    def work(self, problem: Problem, config: Mapping[str, Any], target: Target) -> Any:
        """A :class:`warpsmith.cost.memory_model.MemoryWork` for memory-bound variants (the target
        sizes persistent grids)."""
        raise WarpsmithError(f"variant {self.op}/{self.name} has cost_model 'memory' but no work(): "
                             "describe its work, or name another cost model")

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        """The block size each axis is cut into (the verifier tests sizes that are not multiples)."""
        return {}

    # ---- shared --------------------------------------------------------------------------
    def typed(self, config: Mapping[str, Any]) -> Knobs:
        """``config`` as this variant's frozen typed config (defaults of optional knobs filled in)."""
        if self.knobs is None:
            raise WarpsmithError(f"variant {self.op}/{self.name} declares no knobs type")
        return self.knobs.of(config)

    def failed_guards(self, problem: Problem, config: Mapping[str, Any]) -> list[Guard]:
        return [g for g in self.guards if g.active(config) and not g.holds(problem, config)]

    def rejection(self, problem: Problem, config: Mapping[str, Any], target: Target) -> str | None:
        """Why this config cannot run this problem on this target (validity, registers, then guards), or None."""
        why = self.invalid(problem, config, target) or self.register_rejection(problem, config, target)
        if why:
            return why
        failed = self.failed_guards(problem, config)
        return f"guard {failed[0].knob} needs {failed[0].text}" if failed else None

    def register_rejection(self, problem: Problem, config: Mapping[str, Any], target: Target) -> str | None:
        """A memory-bound config whose estimated registers per thread (``work``) exceed what the
        target gives a thread of a program of that many warps (``Target.max_regs_per_thread``):
        the compiler would spill. GEMM variants state their own estimate in ``invalid``."""
        if self.cost_model != "memory":
            return None
        w = self.work(problem, config, target)
        cap = target.max_regs_per_thread(w.num_warps)
        if w.regs_per_thread > cap:
            return (f"about {w.regs_per_thread} registers per thread > {cap} at {w.num_warps} warps on "
                    f"{target.name} (would spill)")
        return None

    def source_hash(self) -> str:
        """Hash of the kernel modules and this launcher's module."""
        import sys

        return source_hash(*self.kernel_modules, sys.modules[type(self).__module__])
