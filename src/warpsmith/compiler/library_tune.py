"""Launch configs of the library calls in an emitted program.

A library GEMM (``matmul``: mm, bmm, linear, and the GEMMs with a generated epilogue) takes, in
order: the best verified tuning-DB record of its problem on the target (variant ``tiled``, the
kernel its emitted launcher runs); else a config tuned here, during ``solve``, by the tuner's own
search (:func:`warpsmith.tune.search` after its cost-model prescreen) over the ``tiled`` variant's
space, on the predicted path (nothing measured, nothing verified alone: the whole emitted program
is verified by ``warpsmith check`` as before), ``budget`` evaluations; else the launcher's default
tiles (:data:`warpsmith.cost.program.LIBRARY_CONFIGS`). A tuned config is taken only where the
program cost model (:func:`warpsmith.cost.program.library_ms`) predicts it faster than the default.

Only the knobs the emitted launcher passes are chosen (:data:`LAUNCHER_KNOBS`): it computes
``EVEN_K`` from the shape and keeps ``PRECISION="ieee"``. Other library ops (softmax, norms, conv,
attention, ...) keep their launchers' fixed configs, reported as ``launcher default``.
"""
from __future__ import annotations

import math
import random
from typing import Any

from ..cost.program import LIBRARY_CONFIGS, library_ms, library_problem
from ..targets import Target

TUNED_OPS = ("matmul",)  # library ops whose emitted launcher takes a config (compiler/library.py)
LAUNCHER_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")
DEFAULT_BUDGET = 24  # predicted evaluations per library GEMM tuned during solve (solve --budget)
RESCORED = 4  # the tuner's best configs re-priced by the program cost model

_TUNED: dict[tuple, tuple[dict[str, int] | None, int]] = {}  # (problem key, target, budget, seed) -> (config, evaluated)


def launcher_args(config: dict[str, Any]) -> tuple[int, ...]:
    """The tuple an emitted GEMM launcher takes (``cfg``), in :data:`LAUNCHER_KNOBS` order."""
    return tuple(int(config[k]) for k in LAUNCHER_KNOBS)


def choose(n: Any, target: Target, budget: int = DEFAULT_BUDGET, seed: int = 0, db_path: Any = None) -> dict[str, Any]:
    """The launch config of library node ``n`` on ``target``, with its predicted time against the
    launcher default's (both by :func:`~warpsmith.cost.program.library_ms`, predicted, not measured).

    Returns ``{"node", "op", "config", "source", "predicted_ms", "default_config", "default_ms",
    "tuned", "evaluated"}``: ``tuned`` is true when ``config`` is not the launcher's default (a DB
    record's or one tuned here); ``evaluated`` counts the tuner's predicted evaluations (0: none ran).
    """
    if budget < 0:
        from ..core.errors import InvalidInputError

        raise InvalidInputError("library tuning budget", "a number of evaluations >= 0", budget)
    default = dict(LIBRARY_CONFIGS.get(n.op) or {})  # what its launcher runs ({}: tiles the launcher derives)
    default_ms = library_ms(n, target, default or None)
    out = {"node": n.name, "op": n.op, "config": default, "source": "launcher default", "predicted_ms": default_ms,
           "default_config": default, "default_ms": default_ms, "tuned": False, "evaluated": 0}
    if n.op not in TUNED_OPS:
        return out
    p = library_problem(n)
    if p is None:
        return out
    rec = db_record(n, target, db_path)
    if rec is not None:
        cfg = {k: rec[k] for k in LAUNCHER_KNOBS}
        out.update(config=cfg, source="tuning DB record (verified)", predicted_ms=library_ms(n, target, cfg),
                   tuned=cfg != default)
        return out
    if budget == 0:
        out["source"] = "launcher default (no DB record; tuning off: budget 0)"
        return out
    cfg, evaluated = _tuned(p, target, budget, seed)
    out["evaluated"] = evaluated
    if cfg is not None:
        ms = library_ms(n, target, cfg)
        if ms < default_ms * (1 - 1e-9):
            out.update(config=cfg, source=f"tuned during solve ({evaluated} configs predicted, not measured)",
                       predicted_ms=ms, tuned=cfg != default)
            return out
    out["source"] = f"launcher default (no DB record; none of {evaluated} tuned configs predicted faster)"
    return out


def _tuned(p: Any, target: Target, budget: int, seed: int) -> tuple[dict[str, int] | None, int]:
    """The tuner's best ``tiled`` config for GEMM problem ``p`` (predicted), restricted to the
    launcher's knobs; cached per problem, target, budget and seed (a solve compiles each candidate
    program again)."""
    key = (p.op, tuple(sorted(p.shape.items())), p.dtype_name, tuple(sorted(p.key_attrs.items())), target.name,
           budget, seed)
    if key in _TUNED:
        return _TUNED[key]
    from ..measure import Evaluator
    from ..ops import get_op, variants
    from ..space import JointSpace, Space
    from ..space.fragments import fixed
    from ..tune import _prescreen, search

    v = variants(p.op)["tiled"]
    frags = dict(v.space(p, target).fragments)
    frags["PRECISION"], frags["EVEN_K"] = fixed("ieee"), fixed(False)  # what the launcher passes
    space = JointSpace({"tiled": Space(frags)})
    ev = Evaluator(get_op(p.op), p, {"tiled": v}, target, measured=False, seed=seed)
    initial = _prescreen(space, ev, budget, random.Random(seed))
    scores = search(space, ev, "evolutionary", budget=budget, seed=seed, initial=initial)
    board = sorted((s for s in scores if math.isfinite(s.ms)), key=lambda s: s.ms)
    best = {k: int(board[0].config[k]) for k in LAUNCHER_KNOBS} if board else None
    _TUNED[key] = (best, len(scores))
    return _TUNED[key]


def db_problem(n: Any) -> Any:
    """The matmul problem library GEMM ``n`` is recorded under in a tuning DB (the op registry's key:
    no ``B`` axis for one batch entry, the node's activation), or None."""
    from ..ops.matmul import MATMUL

    p = library_problem(n)
    if p is None:
        return None
    shape = dict(p.shape) if p.shape.get("B", 1) > 1 else {k: v for k, v in p.shape.items() if k != "B"}
    return MATMUL.problem(shape, p.dtype, {"bias": p.attrs["bias"], "layout": p.attrs["layout"],
                                           "activation": n.attrs.get("activation", "none")})


def db_record(n: Any, target: Target, db_path: Any = None) -> dict[str, Any] | None:
    """The best verified tuning-DB config (variant ``tiled``, with every launcher knob) of library GEMM
    ``n``'s problem (:func:`db_problem`) on ``target``, or None (no DB, no record, an unreadable DB)."""
    if n.op != "matmul":
        return None
    try:
        from ..core.settings import settings
        from ..db import TuningDB
        from ..ops.matmul import VARIANTS
        from ..targets import versions

        path = db_path or settings().db_path
        prob = db_problem(n)
        if prob is None or not path.exists():
            return None
        ranked = TuningDB(path).ranked(prob.op, dict(prob.shape), prob.dtype_name, prob.key_attrs, target.name,
                                       {v.name: v.source_hash() for v in VARIANTS if v.op == "matmul"},
                                       {"triton": versions()["triton"]})
        for r in ranked:
            if r.variant == "tiled" and all(k in r.config for k in LAUNCHER_KNOBS):
                return dict(r.config)
    except Exception:  # noqa: BLE001 - an unreadable DB or an odd shape never breaks a solve: no record
        return None
    return None
