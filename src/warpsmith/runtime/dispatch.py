"""Dispatch: pick the config a call runs with.

The best verified DB record for the call's key (op, shape, dtype, attributes, target) whose
kernel source and Triton version are unchanged and whose guards hold for this call; otherwise
the heuristic default of the op's first variant that accepts the problem. Lookups are cached per key; :func:`clear_cache` drops the cache (the tuner calls it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..db import TuningDB
from ..errors import DatabaseError
from ..kernels.base import Variant
from ..kernels.registry import default_variant, variants
from ..settings import settings
from ..spec import Problem
from ..targets import current_device, versions

@dataclass(frozen=True)
class Choice:
    variant: Variant
    config: dict[str, Any]
    source: str  # "db" | "default"
    record_id: int | None = None


_cache: dict[tuple, Choice] = {}


def clear_cache() -> None:
    _cache.clear()


def _key(problem: Problem, target: str, db_path: str) -> tuple:
    return (problem.op, tuple(problem.shape.items()), problem.dtype, tuple(sorted(problem.key_attrs.items())), target, db_path)


def select(problem: Problem) -> Choice:
    s = settings()
    target = current_device().target
    key = _key(problem, target.name, str(s.db_path))
    if key in _cache:
        return _cache[key]
    vs = variants(problem.op)
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
        v = default_variant(problem, target)
        choice = Choice(v, v.default_config(problem, target), "default")
    _cache[key] = choice
    return choice


def launch(problem: Problem, inputs: dict[str, Any], out: Any = None) -> Any:
    """Run ``problem`` on ``inputs`` with the selected config (what every custom op calls)."""
    choice = select(problem)
    return choice.variant.launch(inputs, problem, choice.config, out=out)
