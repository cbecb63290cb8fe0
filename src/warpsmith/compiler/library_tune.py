"""Launch configs of the library calls in an emitted program.

Every library call whose emitted launcher takes a config (:data:`TUNABLE`, the one table: the library
op, the registry op and variant its launcher runs, the problem built from the call's tensors, the
knobs the launcher passes in its ``cfg`` tuple and those it fixes) takes, in order:

1. ``db``: the best verified tuning-DB record of its problem on the target, of that variant, whose
   config the variant's validity predicate accepts (a record it rejects is skipped, and said so);
2. ``tuned``: a config tuned here, during ``solve``, by the tuner's own search
   (:func:`warpsmith.tune.search` after its cost-model prescreen) over the variant's space with the
   launcher's fixed knobs pinned, on the predicted path (nothing measured), ``budget`` evaluations,
   taken only where it is predicted faster than the launcher default;
3. ``default``: the launcher's own config (what it runs with no ``cfg``).

The rows in :data:`TUNABLE`: library GEMMs (``matmul``: mm, bmm, linear and the GEMMs with a generated
epilogue; variant ``tiled``; ``BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages``), softmax
and log-softmax (variant ``single_pass``, the launcher's whole-row kernel, rows up to
``library.MAX_WHOLE_ROW``; ``ROWS, num_warps``), ``rms_norm`` and ``layer_norm`` (variant ``row``,
rows up to ``MAX_WHOLE_ROW``; ``ROWS_PER_PROGRAM, num_warps``), ``attention`` (variant ``flash``, the
forward kernel; ``BLOCK_M, BLOCK_N, num_warps, num_stages``). Longer rows run the launchers' looped
kernels at fixed chunks and are not tuned; conv, pooling, top-k, cross entropy and the gathers keep
their launchers' fixed tiles (``default``, their launchers take no config).

Prices (predicted, never measured): a GEMM by the program cost model
(:func:`warpsmith.cost.program.library_ms`, the tile model the program's prediction uses); a row op or
attention by its family's model (the variant's ``work`` through :mod:`warpsmith.cost.memory_model`, the model
the tuner ranks with), since the program model prices a library row op or attention as one stream
whatever its config. Either way the config and the launcher default are priced by the same model.

A tuned config is verified only as part of the emitted program by ``warpsmith check``. After that
program is accepted, :func:`write_back` runs the tuner's own verifier
(:func:`warpsmith.verify.verify_candidate`) on the config for the call's problem and, if it passes,
records it through the tuner's record path (verified, its certificate, timing ``predicted``), so a
later solve of the same shape takes it as ``db``.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable

from ..cost.program import LIBRARY_CONFIGS, library_ms
from ..targets import Target
from .library import MAX_WHOLE_ROW

DEFAULT_BUDGET = 24  # predicted evaluations per library call tuned during solve (solve --budget)
SOURCES = ("db", "tuned", "default")  # where a call's config came from (the report's ``source``)

_TUNED: dict[tuple, tuple[dict[str, Any] | None, int]] = {}  # (problem key, variant, target, budget, seed) -> (config, evaluated)


@dataclass(frozen=True)
class Tunable:
    """How one library op's launcher takes a config: the registry ``variant`` it runs, the ``knobs`` of
    its ``cfg`` tuple (in order), ``problem(n)`` the registry problem of call ``n`` (None: the launcher
    runs no tunable kernel for it), ``fixed(p)`` the variant knobs the launcher pins, ``default`` its
    own config, ``priced`` ``"program"`` (cost.program.library_ms) or ``"family"`` (the variant's model)."""

    variant: str
    knobs: tuple[str, ...]
    problem: Callable[[Any], Any]
    fixed: Callable[[Any], dict[str, Any]]
    default: dict[str, Any]
    priced: str


def _rows(n: Any) -> tuple[int, int] | None:
    """(rows, row length) of a last-dim row op, or None where the launcher loops over the row (not tuned)."""
    if not n.shape:
        return None
    length = int(n.shape[-1])
    rows = math.prod(int(d) for d in n.shape[:-1])
    return (rows, length) if 0 < length <= MAX_WHOLE_ROW and rows > 0 else None


def _dtype(n: Any) -> Any:
    import torch

    return n.dtype if isinstance(n.dtype, torch.dtype) else torch.float32


def _spec_problem(op: str, shape: dict[str, int], dtype: Any, attrs: dict[str, Any]) -> Any:
    from ..ops import get_op

    try:
        return get_op(op).problem(shape, dtype, attrs)
    except Exception:  # noqa: BLE001 - a size or dtype the spec refuses: the launcher's default, untuned
        return None


def _softmax_problem(n: Any) -> Any:
    mn = _rows(n)
    if mn is None:
        return None
    return _spec_problem("log_softmax" if n.attrs.get("log") else "softmax", {"M": mn[0], "N": mn[1]}, _dtype(n), {})


def _norm_problem(n: Any) -> Any:
    mn = _rows(n)
    if mn is None:
        return None
    attrs: dict[str, Any] = {"weight": len(n.args) > 1 and n.args[1] is not None, "weight_dtype": "input",
                             "residual": False, "eps": float(n.attrs["eps"])}
    if n.op == "layer_norm":
        attrs["bias"] = len(n.args) > 2 and n.args[2] is not None
    return _spec_problem(n.op, {"M": mn[0], "N": mn[1]}, _dtype(n), attrs)


def _attention_problem(n: Any) -> Any:
    q, k, v = n.args[:3]
    if not all(getattr(t, "shape", None) is not None and len(t.shape) == 4 for t in (q, k, v)):
        return None
    b, hq, sq, d = (int(x) for x in q.shape)
    h, sk, dv = int(k.shape[1]), int(k.shape[2]), int(v.shape[3])
    if h == 0 or hq % h:
        return None
    lo, hi = n.attrs.get("window") or (None, None)
    shape = {"B": b, "H": h, "G": hq // h, "Sq": sq, "Sk": sk, "D": d, **({"Dv": dv} if dv != d else {})}
    attrs = {"causal": bool(n.attrs["causal"]), "align": "top_left", "window_left": -1 if lo is None else int(lo),
             "window_right": -1 if hi is None else int(hi), "softcap": 0.0, "scale": float(n.attrs["scale"] or 0.0),
             "varlen": False, "bias": len(n.args) > 3 and n.args[3] is not None}
    return _spec_problem("attention", shape, _dtype(n), attrs)


def _pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


_GEMM = Tunable("tiled", ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"),
                lambda n: db_problem(n), lambda p: {"PRECISION": "ieee", "EVEN_K": False},
                dict(LIBRARY_CONFIGS["matmul"]), "program")
_NORM = Tunable("row", ("ROWS_PER_PROGRAM", "num_warps"), _norm_problem, lambda p: {},
                {"ROWS_PER_PROGRAM": 1, "num_warps": 4}, "family")

# library op -> how its emitted launcher (compiler/library.py) takes a config: the one table
TUNABLE: dict[str, Tunable] = {
    "matmul": _GEMM,
    "softmax": Tunable("single_pass", ("ROWS", "num_warps"), _softmax_problem,
                       lambda p: {"BLOCK_N": _pow2(p.shape["N"]), "PROGRAMS_PER_SM": 0},
                       {"ROWS": 1, "num_warps": 4}, "family"),
    "rms_norm": _NORM,
    "layer_norm": _NORM,
    "attention": Tunable("flash", ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"), _attention_problem,
                         lambda p: {}, {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, "family"),
}
TUNED_OPS = tuple(TUNABLE)


def launcher_args(config: dict[str, Any], op: str = "matmul") -> tuple[int, ...]:
    """The tuple library op ``op``'s emitted launcher takes (``cfg``), in its row's ``knobs`` order."""
    return tuple(int(config[k]) for k in TUNABLE[op].knobs)


def _variant(t: Tunable, p: Any) -> Any:
    from ..ops import variants

    return variants(p.op)[t.variant]


def price(n: Any, t: Tunable, p: Any, config: dict[str, Any], target: Target) -> float:
    """Predicted ms of call ``n`` at launcher ``config`` (its row's knobs), by the row's model."""
    if t.priced == "program":
        return library_ms(n, target, config)
    from ..cost import memory_model

    v = _variant(t, p)
    return memory_model.predict_ms(v.work(p, {**config, **t.fixed(p)}, target), target)


def choose(n: Any, target: Target, budget: int = DEFAULT_BUDGET, seed: int = 0, db_path: Any = None,
           use_db: bool = True) -> dict[str, Any]:
    """The launch config of library node ``n`` on ``target``, with its predicted time against the
    launcher default's (both by the same model, :func:`price`; predicted, not measured).

    Returns ``{"node", "op", "variant", "config", "source", "detail", "predicted_ms", "default_config",
    "default_ms", "tuned", "evaluated"}``: ``source`` is ``db``, ``tuned`` or ``default``
    (:data:`SOURCES`), ``detail`` says why; ``tuned`` is true when ``config`` is not the launcher's
    default; ``evaluated`` counts the tuner's predicted evaluations (0: none ran). ``use_db`` False:
    no DB record is read.
    """
    if budget < 0:
        from ..core.errors import InvalidInputError

        raise InvalidInputError("library tuning budget", "a number of evaluations >= 0", budget)
    t = TUNABLE.get(n.op)
    p = t.problem(n) if t is not None else None
    if t is None or p is None:
        default = dict(LIBRARY_CONFIGS.get(n.op) or {})
        ms = library_ms(n, target, default or None)
        why = "its launcher takes no config" if t is None else "a row the launcher loops over, or a problem the op refuses"
        return {"node": n.name, "op": n.op, "variant": None, "config": default, "source": "default",
                "detail": f"launcher default ({why})", "predicted_ms": ms, "default_config": default,
                "default_ms": ms, "tuned": False, "evaluated": 0}
    default = dict(t.default)
    default_ms = price(n, t, p, default, target)
    out = {"node": n.name, "op": n.op, "variant": t.variant, "config": default, "source": "default",
           "detail": "launcher default", "predicted_ms": default_ms, "default_config": default,
           "default_ms": default_ms, "tuned": False, "evaluated": 0}
    rec, skipped = db_record(n, target, db_path) if use_db else (None, "")
    if rec is not None:
        cfg = {k: rec[k] for k in t.knobs}
        out.update(config=cfg, source="db", detail="tuning DB record (verified)",
                   predicted_ms=price(n, t, p, cfg, target), tuned=cfg != default)
        return out
    note = f"; {skipped}" if skipped else ""
    if budget == 0:
        out["detail"] = f"launcher default (no usable DB record; tuning off: budget 0{note})"
        return out
    cfg, evaluated = _tuned(t, p, target, budget, seed)
    out["evaluated"] = evaluated
    if cfg is not None:
        ms = price(n, t, p, cfg, target)
        if ms < default_ms * (1 - 1e-9):
            out.update(config=cfg, source="tuned", detail=f"tuned during solve ({evaluated} configs predicted, "
                       f"not measured{note})", predicted_ms=ms, tuned=cfg != default)
            return out
    out["detail"] = f"launcher default (no usable DB record; none of {evaluated} tuned configs predicted faster{note})"
    return out


def _tuned(t: Tunable, p: Any, target: Target, budget: int, seed: int) -> tuple[dict[str, Any] | None, int]:
    """The tuner's best config of row ``t``'s variant for problem ``p`` (predicted), restricted to the
    launcher's knobs; cached per problem, target, budget and seed (a solve compiles each candidate
    program again)."""
    key = (p.op, tuple(sorted(p.shape.items())), p.dtype_name, tuple(sorted(p.attrs.items())), t.variant,
           target.name, budget, seed)
    if key in _TUNED:
        return _TUNED[key]
    from ..measure import Evaluator
    from ..ops import get_op
    from ..space import JointSpace, Space
    from ..space.fragments import fixed
    from ..tune import _prescreen, search

    v = _variant(t, p)
    frags = dict(v.space(p, target).fragments)
    frags.update({k: fixed(val) for k, val in t.fixed(p).items()})  # what the launcher passes
    space = JointSpace({t.variant: Space(frags)})
    ev = Evaluator(get_op(p.op), p, {t.variant: v}, target, measured=False, seed=seed)
    initial = _prescreen(space, ev, budget, random.Random(seed))
    scores = search(space, ev, "evolutionary", budget=budget, seed=seed, initial=initial)
    board = sorted((s for s in scores if math.isfinite(s.ms)), key=lambda s: s.ms)
    best = {k: int(board[0].config[k]) for k in t.knobs} if board else None
    _TUNED[key] = (best, len(scores))
    return _TUNED[key]


def db_problem(n: Any) -> Any:
    """The registry problem library call ``n`` is tuned and recorded under (a GEMM: the matmul key, no
    ``B`` axis for one batch entry, the node's activation; a row op: its row of :data:`TUNABLE`), or None."""
    if n.op != "matmul":
        t = TUNABLE.get(n.op)
        return t.problem(n) if t is not None else None
    from ..cost.program import library_problem
    from ..ops.matmul import MATMUL

    p = library_problem(n)
    if p is None:
        return None
    shape = dict(p.shape) if p.shape.get("B", 1) > 1 else {k: v for k, v in p.shape.items() if k != "B"}
    return MATMUL.problem(shape, p.dtype, {"bias": p.attrs["bias"], "layout": p.attrs["layout"],
                                           "activation": n.attrs.get("activation", "none")})


def _db_path(db_path: Any) -> Any:
    from pathlib import Path

    from ..core.settings import settings

    return Path(db_path) if db_path is not None else settings().db_path


def db_record(n: Any, target: Target, db_path: Any = None) -> tuple[dict[str, Any] | None, str]:
    """The best verified tuning-DB config of call ``n``'s problem (:func:`db_problem`) on ``target``, of
    its row's variant, with every launcher knob and accepted by the variant's validity predicate, and
    a note of the records skipped (``""``: none); (None, note) where there is none (no DB, no record,
    an unreadable DB)."""
    t = TUNABLE.get(n.op)
    if t is None:
        return None, ""
    try:
        from ..db import TuningDB
        from ..ops import variants
        from ..targets import versions

        path = _db_path(db_path)
        prob = db_problem(n)
        if prob is None or not path.exists():
            return None, ""
        v = _variant(t, prob)
        ranked = TuningDB(path).ranked(prob.op, dict(prob.shape), prob.dtype_name, prob.key_attrs, target.name,
                                       {x.name: x.source_hash() for x in variants(prob.op).values()},
                                       {"triton": versions()["triton"]})
        skipped = []
        for r in ranked:
            if r.variant != t.variant or not all(k in r.config for k in t.knobs):
                continue
            full = {**r.config, **t.fixed(prob)}
            why = v.rejection(prob, full, target)
            if why is None:
                return dict(r.config), "; ".join(skipped)
            skipped.append(f"DB record {r.id} rejected: {why}")
        return None, "; ".join(skipped)
    except Exception:  # noqa: BLE001 - an unreadable DB or an odd shape never breaks a solve: no record
        return None, ""


def write_back(n: Any, choice: dict[str, Any], target: Target, seed: int = 0, db_path: Any = None) -> dict[str, Any]:
    """After the program running ``choice`` (:func:`choose`'s record of call ``n``, source ``tuned``) was
    accepted by the check: verify the config with the tuner's own verifier on the call's problem and,
    where it passes, record it in the tuning DB through the tuner's record path (verified, its
    certificate; timing ``predicted``). Returns what was done: ``{"written", "record_id" | "reason"}``."""
    t = TUNABLE.get(n.op)
    p = db_problem(n)
    if t is None or p is None or choice.get("source") != "tuned":
        return {"written": False, "reason": "not a config tuned during solve"}
    from ..cost.cost import predict_ms
    from ..db import TuningDB, TuningRecord
    from ..ops import get_op
    from ..targets import current_device, fingerprint
    from ..verify import verify_candidate

    v = _variant(t, p)
    cfg = {**{k: choice["config"][k] for k in t.knobs}, **t.fixed(p)}
    device = "cuda" if current_device().measured else "cpu"  # kernels run where Triton runs, as the tuner's
    cert = verify_candidate(get_op(p.op), p, v, cfg, target, device=device, seed=seed)
    if not cert.passed:
        f = cert.first_failure()
        return {"written": False, "reason": f"the tuner's verifier rejected it ({f.name}: {f.status})" if f else
                "the tuner's verifier rejected it"}
    rec = TuningRecord(op=p.op, variant=t.variant, shape=dict(p.shape), dtype=p.dtype_name, attrs=p.key_attrs,
                       target=target.name, fingerprint=fingerprint(v.source_hash()), config=cfg,
                       timing_kind="predicted", time_ms=predict_ms(v, p, cfg, target), baseline_ms=None,
                       verified=True, certificate=cert.to_json())
    path = _db_path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return {"written": True, "record_id": TuningDB(path).put(rec), "db": str(path),
            "verified_by": "the tuner's verifier (warpsmith.verify.verify_candidate), after the program's check"}
