"""What the two learned orderings share -- the tuner's ranker (:mod:`warpsmith.ranker`) and the
compiler's move prior (:mod:`warpsmith.compiler.move_prior`): evaluation held out by group (Spearman
rank correlation, folds that never split a group), the gate that lets a model replace the order it
competes with only where that evaluation has it at least level, and saving a model as JSON."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np


def rankdata(a: Sequence[float]) -> np.ndarray:
    """Ranks from 1, ties given their average rank."""
    a = np.asarray(a, dtype=float)
    order = np.argsort(a, kind="stable")
    ranks = np.empty(len(a))
    sa = a[order]
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and sa[j + 1] == sa[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (NaN with fewer than 2 values or a constant input)."""
    if len(a) != len(b) or len(a) < 2:
        return float("nan")
    ra, rb = rankdata(a), rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = math.sqrt(float((ra ** 2).sum() * (rb ** 2).sum()))
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


def group_folds(groups: Sequence[str], k: int | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index arrays with every group wholly on one side.

    ``k=None`` leaves one group out per fold; otherwise the sorted groups are dealt round-robin
    into ``k`` folds. Deterministic (no randomness)."""
    names = sorted(set(groups))
    k = len(names) if k is None else max(2, min(k, len(names)))
    fold_of = {g: i % k for i, g in enumerate(names)}
    g = np.array([fold_of[x] for x in groups])
    return [(np.flatnonzero(g != i), np.flatnonzero(g == i)) for i in range(k) if (g == i).any() and (g != i).any()]


def write_json(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write ``doc`` to ``path`` as JSON, whole or not at all (a temporary file beside it, then renamed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def heldout_gate(heldout: Mapping[str, Any] | None, ours: tuple[str, str], theirs: tuple[str, str], force_env: str,
                 without: str) -> tuple[bool, str]:
    """Whether a learned model should replace the order it competes with, and why: only where its held-out
    evaluation (``heldout``, stored at training: ``{"within_mean"|"pooled": {key: spearman}}``) has it at
    least level with the other (``ours``/``theirs``: the key and the name of each) -- within a problem where
    that was measured, else pooled. ``<force_env>=force`` uses it regardless; ``without`` says why a model
    may have no evaluation."""
    if os.environ.get(force_env, "").strip().lower() == "force":
        return True, f"forced ({force_env}=force)"
    if not heldout:
        return False, f"no held-out evaluation ({without})"
    for key, label in (("within_mean", "within a problem"), ("pooled", "pooled")):
        r, a = (heldout.get(key) or {}).get(ours[0]), (heldout.get(key) or {}).get(theirs[0])
        if r is not None and a is not None and math.isfinite(r) and math.isfinite(a):
            ok = r >= a
            return ok, f"held-out Spearman {label}: {ours[1]} {r:+.3f} {'>=' if ok else '<'} {theirs[1]} {a:+.3f}"
    return False, f"its held-out evaluation has no comparison with the {theirs[1]}"
