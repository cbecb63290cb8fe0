"""Dispatch: pick the config a call runs with.

The best verified DB record for the call's key (op, shape, dtype, attributes, target) whose
kernel source and Triton version are unchanged and whose guards hold for this call; otherwise
the heuristic default of the op's first variant that accepts the problem.

Dispatch sits below the op families (their custom ops call :func:`launch`), so it knows none of
them: the caller passes the variants to choose from (its family's ``VARIANTS``; a family that runs
another's op, as fused linear cross-entropy runs matmul, passes that family's). Lookups are cached
per key; a write to a tuning DB (:func:`warpsmith.db.generation` changes) drops the cache, so a
record is used as soon as it is written. :func:`clear_cache` drops it by hand.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from .core.errors import DatabaseError, WarpsmithError
from .core.opspec import Problem
from .core.registry import default_variant, variants_of
from .core.settings import settings
from .core.variant import Variant
from .db import TuningDB, generation
from .targets import current_device, versions


@dataclass(frozen=True)
class Choice:
    variant: Variant
    config: dict[str, Any]
    source: str  # "db" | "default"
    record_id: int | None = None


_cache: dict[tuple, Choice] = {}
_cache_generation = [generation()]
_recorders: list[list[Problem]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[Problem]]:
    """Collect every problem :func:`select` is asked about inside the block (in call order, repeats
    included): what a model's forward dispatches, for ``warpsmith tune-model``."""
    seen: list[Problem] = []
    _recorders.append(seen)
    try:
        yield seen
    finally:
        _recorders.remove(seen)


def clear_cache() -> None:
    _cache.clear()


def _key(problem: Problem, target: str, db_path: str) -> tuple:
    return (problem.op, tuple(problem.shape.items()), problem.dtype, tuple(sorted(problem.key_attrs.items())), target, db_path)


def select(problem: Problem, variants: Iterable[Variant]) -> Choice:
    """The variant and config ``problem`` runs with, among ``variants`` (those serving ``problem.op``)."""
    for seen in _recorders:
        seen.append(problem)
    s = settings()
    target = current_device().target
    if _cache_generation[0] != generation():  # a DB was written since: cached choices may be stale
        _cache.clear()
        _cache_generation[0] = generation()
    key = _key(problem, target.name, str(s.db_path))
    if key in _cache:
        return _cache[key]
    vs = variants_of(problem.op, variants)
    if not vs:
        raise WarpsmithError(f"dispatch of {problem.describe()}: no variant of {problem.op} was given")
    choice = None
    if s.dispatch == "tuned" and s.db_path.exists():
        try:
            ranked = TuningDB(s.db_path).ranked(
                problem.op, dict(problem.shape), problem.dtype_name, problem.key_attrs, target.name,
                {n: v.source_hash() for n, v in vs.items()}, {"triton": versions()["triton"]})
        except DatabaseError:
            ranked = []  # an unreadable DB never breaks a call; `warpsmith db list` reports it
        for rec in ranked:  # the best record whose guards hold for this call (and that fits the target)
            if vs[rec.variant].rejection(problem, rec.config, target) is None:
                choice = Choice(vs[rec.variant], dict(rec.config), "db", rec.id)
                break
    if choice is None:
        v = default_variant(problem, vs, target)
        choice = Choice(v, v.default_config(problem, target), "default")
    _cache[key] = choice
    return choice


def launch(problem: Problem, variants: Iterable[Variant], inputs: dict[str, Any], out: Any = None) -> Any:
    """Run ``problem`` on ``inputs`` with the config :func:`select` picks among ``variants`` (what every
    custom op calls)."""
    choice = select(problem, variants)
    return choice.variant.launch(inputs, problem, choice.config, out=out)
