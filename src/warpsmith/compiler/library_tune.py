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
forward kernel; ``BLOCK_M, BLOCK_N, num_warps, num_stages``), ``conv`` (variant ``implicit_gemm``, the
implicit-GEMM forward ``_ws_conv`` launches, its problem the call's whole geometry; ``BLOCK_M, BLOCK_N,
BLOCK_K, num_warps, num_stages``, ``LOOP`` nested, no split-K, ieee and the launcher's 3 stages pinned),
``conv_depthwise`` (a conv of one input channel per group, which ``_ws_conv`` runs with the direct
kernel: variant ``depthwise``; ``BLOCK_P, BLOCK_C, num_warps``, ``ORDER`` pixels pinned; a call's row:
:func:`row`), ``pool`` (max / avg pooling, variant ``gather``'s ``(ROWS, BLOCK)`` forward; ``BLOCK,
ROWS``, 4 warps pinned). Longer rows run the launchers' looped kernels at fixed chunks and are not
tuned; top-k, cross entropy and the gathers keep their launchers' fixed tiles (``default``, their
launchers take no config).

Under Triton's interpreter (no GPU: the check runs the emitted kernels on the CPU, at a cost per
program and reduction step) a conv or pool config, tuned or from the DB, is taken only where it runs
at most the program-steps of the launcher's own interpreter tiles or :data:`INTERPRETER_STEPS`,
whichever is more (:func:`cpu_rejection`; a row's ``steps``); the other rows' interpreter tiles are
their smallest, so any config of theirs runs fewer programs there.

Prices (predicted, never measured): a GEMM or an implicit-GEMM conv by the program cost model
(:func:`warpsmith.cost.program.library_ms`, the tile model the program's prediction uses); a row op,
attention, a depthwise conv or a pool by its family's model (the variant's ``work`` through
:mod:`warpsmith.cost.memory_model`, the model the tuner ranks with), since the program model prices a
library row op, attention, a depthwise conv or a pool as one stream whatever its config. Either way
the config and the launcher default are priced by the same model.

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
from .library import CONV_TILES, DEPTHWISE_TILES, MAX_WHOLE_ROW, _ws_pool_tiles

DEFAULT_BUDGET = 24  # predicted evaluations per library call tuned during solve (solve --budget)
INTERPRETER_STEPS = 4  # program-steps a config may run under the interpreter (more where the launcher's own do)
SOURCES = ("db", "tuned", "default")  # where a call's config came from (the report's ``source``)

# (problem key, variant, target, budget, seed, interpreter) -> (config, evaluated)
_TUNED: dict[tuple, tuple[dict[str, Any] | None, int]] = {}


@dataclass(frozen=True)
class Tunable:
    """How one library op's launcher takes a config: the registry ``variant`` it runs, the ``knobs`` of
    its ``cfg`` tuple (in order), ``problem(n)`` the registry problem of call ``n`` (None: the launcher
    runs no tunable kernel for it), ``fixed(p)`` the variant knobs the launcher pins, ``default`` its
    own config, ``priced`` ``"program"`` (cost.program.library_ms) or ``"family"`` (the variant's model).
    ``steps(p, config)``, where set: the program-steps of a launch at ``config`` under Triton's interpreter
    (whose cost is per program and step), bounded there by those of the launcher's own interpreter tiles
    ``interpreter(p)`` (:func:`cpu_rejection`); unset, a row whose interpreter tiles are its smallest."""

    variant: str
    knobs: tuple[str, ...]
    problem: Callable[[Any], Any]
    fixed: Callable[[Any], dict[str, Any]]
    default: dict[str, Any]
    priced: str
    steps: Callable[[Any, dict[str, Any]], int] | None = None
    interpreter: Callable[[Any], dict[str, Any]] | None = None


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


def row(n: Any) -> str:
    """The row of :data:`TUNABLE` library call ``n`` takes its config by: its op, but ``conv_depthwise``
    for a conv ``_ws_conv`` runs with the direct depthwise kernel (``library.depthwise``)."""
    from .library import depthwise

    return "conv_depthwise" if n.op == "conv" and depthwise(n) else n.op


def _meta(n: Any, t: Any) -> Any:
    """A contiguous tensor on the meta device with IR value ``t``'s shape and call ``n``'s dtype."""
    import torch

    return torch.empty(tuple(int(d) for d in t.shape), dtype=_dtype(n), device="meta")


def _conv_problem(n: Any) -> Any:
    """The ``conv`` problem of a library conv: ``ops.conv.op.problem_of`` on the call's whole geometry
    (contiguous input, no residual, scale 1, ieee: what ``_ws_conv`` runs); None without shapes or for
    a geometry the op refuses."""
    x, w = n.args[0], n.args[1]
    if getattr(x, "shape", None) is None or getattr(w, "shape", None) is None:
        return None
    from ..ops.conv.op import problem_of

    t = n.attrs
    bias = n.args[2] if len(n.args) > 2 and getattr(n.args[2], "shape", None) is not None else None
    opad = t["output_padding"] if t["transposed"] else [0] * (len(x.shape) - 2)
    try:
        p = problem_of(_meta(n, x), _meta(n, w), None if bias is None else _meta(n, bias), None, t["stride"],
                       t["padding"], t["padding"], t["dilation"], opad, int(t["groups"]), bool(t["transposed"]),
                       t["activation"], 1.0)
    except Exception:  # noqa: BLE001 - a geometry the op refuses: the launcher's default, untuned
        return None
    return _spec_problem("conv", dict(p.shape), p.dtype, {**p.attrs, "allow_tf32": False})


def _depthwise_steps(p: Any, config: dict[str, Any]) -> int:
    """Programs times window steps of the depthwise launch at ``config`` (tiles of BLOCK_P output pixels
    x BLOCK_C channels, each walking the window)."""
    from ..ops.conv.spec import geometry

    g = geometry(p)
    m = p.shape["N"] * math.prod(g["O"])
    return -(-m // config["BLOCK_P"]) * -(-p.shape["K"] // config["BLOCK_C"]) * math.prod(g["KS"])


def _conv_steps(p: Any, config: dict[str, Any]) -> int:
    """Programs times reduction steps of the conv launch at ``config`` (the interpreter's cost, which is
    per program and step): the grid over pixels x channels per group x groups, each walking the window
    and C/G in blocks of BLOCK_K (the launcher's ``LOOP="nested"``)."""
    from ..ops.conv.spec import geometry

    g = geometry(p)
    groups = p.shape.get("G", 1)
    m = p.shape["N"] * math.prod(g["O"])
    return (-(-m // config["BLOCK_M"]) * -(-(p.shape["K"] // groups) // config["BLOCK_N"]) * groups
            * math.prod(g["KS"]) * -(-(p.shape["C"] // groups) // config["BLOCK_K"]))


def _pool_problem(n: Any) -> Any:
    """The ``max_pool`` / ``avg_pool`` problem of a library pool call (``_ws_pool``: values only, no
    indices): ``ops.pool.op.problem_of`` on its input (contiguous) and window; None without a shape
    or for a window the op refuses."""
    x = n.args[0]
    if getattr(x, "shape", None) is None:
        return None
    from ..ops.pool.op import problem_of

    t = n.attrs
    window = {"kernel": t["kernel"], "stride": t["stride"], "padding": t["padding"], "ceil_mode": bool(t["ceil_mode"])}
    if t["is_max"]:
        window.update(dilation=t["dilation"], return_indices=False)
    else:
        window.update(count_include_pad=bool(t["count_include_pad"]), divisor_override=int(t["divisor"] or 0))
    try:
        return problem_of("max_pool" if t["is_max"] else "avg_pool", _meta(n, x), **window)
    except Exception:  # noqa: BLE001 - a window the op refuses: the launcher's default, untuned
        return None


def _pool_steps(p: Any, config: dict[str, Any]) -> int:
    """Programs of the pool launch at ``config`` (each walks the same window: programs are its
    interpreter cost), as the launcher sizes the grid."""
    from ..ops.pool.spec import output_spatial

    positions, planes = math.prod(output_spatial(p)), p.shape["N"] * p.shape["C"]
    block, rows = _ws_pool_tiles(positions, planes, (config["BLOCK"], config["ROWS"]), False)
    return -(-positions // block) * -(-planes // rows)


def _pool_interpreter(p: Any) -> dict[str, Any]:
    from ..ops.pool.spec import output_spatial

    block, rows = _ws_pool_tiles(math.prod(output_spatial(p)), p.shape["N"] * p.shape["C"], None, True)
    return {"BLOCK": block, "ROWS": rows}


def _pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


_CONV_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")
# a conv's num_stages is carried but pinned to the launcher's own: its gathered loads are not pipelined
# whatever it says (ops/conv/variant.py), while the tile model credits stages with pipelining; tuned
# at 1 against a default at 3, no tile would ever win on that phantom term
_CONV_STAGES = CONV_TILES["gpu"][4]
_DW_KNOBS = ("BLOCK_P", "BLOCK_C", "num_warps")
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
    "conv": Tunable("implicit_gemm", _CONV_KNOBS, lambda n: _conv_problem(n) if row(n) == "conv" else None,
                    lambda p: {"LOOP": "nested", "SPLIT_K": 1, "PRECISION": "ieee", "num_stages": _CONV_STAGES},
                    dict(zip(_CONV_KNOBS, CONV_TILES["gpu"])), "program", _conv_steps,
                    lambda p: dict(zip(_CONV_KNOBS, CONV_TILES["interpreter"]))),
    "conv_depthwise": Tunable("depthwise", _DW_KNOBS,
                              lambda n: _conv_problem(n) if row(n) == "conv_depthwise" else None,
                              lambda p: {"ORDER": "pixels"}, dict(zip(_DW_KNOBS, DEPTHWISE_TILES["gpu"])), "family",
                              _depthwise_steps, lambda p: dict(zip(_DW_KNOBS, DEPTHWISE_TILES["interpreter"]))),
    "pool": Tunable("gather", ("BLOCK", "ROWS"), _pool_problem, lambda p: {"num_warps": 4},
                    dict(zip(("BLOCK", "ROWS"), _ws_pool_tiles(1, 1, None, False))), "family", _pool_steps,
                    _pool_interpreter),
}
TUNED_OPS = tuple(TUNABLE)


def launcher_args(config: dict[str, Any], op: str = "matmul") -> tuple[int, ...]:
    """The tuple the emitted launcher of row ``op`` of :data:`TUNABLE` takes (``cfg``), in the row's
    ``knobs`` order (a call's row: :func:`row`)."""
    return tuple(int(config[k]) for k in TUNABLE[op].knobs)


def cpu_rejection(t: Tunable, p: Any, config: dict[str, Any]) -> str | None:
    """Why row ``t``'s ``config`` is not taken for problem ``p`` here: under Triton's interpreter (the
    emitted program's check then runs its kernels on the CPU, at a cost per program and step), more
    program-steps (``t.steps``) than the launcher's own interpreter tiles run or :data:`INTERPRETER_STEPS`,
    whichever is more; None where it runs no more, on a GPU, or for a row without a bound (its
    interpreter tiles are its smallest: any config runs fewer)."""
    cap = _interpreter_cap(t, p)
    if cap is None:
        return None
    steps = t.steps(p, config)
    return None if steps <= cap else (f"{steps} program-steps under the interpreter, over {cap} (the launcher's "
                                      f"own interpreter tiles', at least {INTERPRETER_STEPS})")


def _interpreter_cap(t: Tunable, p: Any) -> int | None:
    """The program-steps a config of row ``t`` may run for problem ``p`` here (:func:`cpu_rejection`):
    None on a GPU or for a row without a bound."""
    from ..core._triton import INTERPRET

    if not INTERPRET or t.steps is None or t.interpreter is None:
        return None
    return max(INTERPRETER_STEPS, t.steps(p, t.interpreter(p)))


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
    t = TUNABLE.get(row(n))
    p = t.problem(n) if t is not None else None
    if t is None or p is None:
        default = dict(LIBRARY_CONFIGS.get(n.op) or {})
        ms = library_ms(n, target, default or None)
        why = ("its launcher takes no config" if t is None
               else "a row the launcher loops over, or a problem the op refuses")
        return {"node": n.name, "op": n.op, "variant": None, "config": default, "source": "default",
                "detail": f"launcher default ({why})", "predicted_ms": ms, "default_config": default,
                "default_ms": ms, "tuned": False, "evaluated": 0}
    default = dict(t.default)
    default_ms = price(n, t, p, default, target)
    out = {"node": n.name, "op": n.op, "variant": t.variant, "config": default, "source": "default",
           "detail": "launcher default", "predicted_ms": default_ms, "default_config": default,
           "default_ms": default_ms, "tuned": False, "evaluated": 0}
    rec, skipped = db_record(n, target, db_path) if use_db else (None, "")
    note = f"; {skipped}" if skipped else ""
    if rec is not None:
        cfg = {k: rec[k] for k in t.knobs}
        out.update(config=cfg, source="db", detail=f"tuning DB record (verified{note})",
                   predicted_ms=price(n, t, p, cfg, target), tuned=cfg != default)
        return out
    if budget == 0:
        out["detail"] = f"launcher default (no usable DB record; tuning off: budget 0{note})"
        return out
    cfg, evaluated = _tuned(t, p, target, budget, seed)
    out["evaluated"] = evaluated
    note += _bound_note(t, p)
    if cfg is not None:
        ms = price(n, t, p, cfg, target)
        if ms < default_ms * (1 - 1e-9):
            out.update(config=cfg, source="tuned", detail=f"tuned during solve ({evaluated} configs predicted, "
                       f"not measured{note})", predicted_ms=ms, tuned=cfg != default)
            return out
    out["detail"] = f"launcher default (no usable DB record; none of {evaluated} tuned configs predicted faster{note})"
    return out


def _bound_note(t: Tunable, p: Any) -> str:
    """``"; ..."`` saying that only configs within :func:`cpu_rejection`'s bound were candidates, where
    one applies (under the interpreter, a row with ``steps``); else ``""``."""
    cap = _interpreter_cap(t, p)
    return "" if cap is None else f"; under the interpreter, only configs of at most {cap} program-steps"


def _tuned(t: Tunable, p: Any, target: Target, budget: int, seed: int) -> tuple[dict[str, Any] | None, int]:
    """The tuner's best config of row ``t``'s variant for problem ``p`` (predicted), restricted to the
    launcher's knobs, of those :func:`cpu_rejection` lets run here; cached per problem, target, budget,
    seed and interpreter (a solve compiles each candidate program again)."""
    from ..core._triton import INTERPRET

    key = (p.op, tuple(sorted(p.shape.items())), p.dtype_name, tuple(sorted(p.attrs.items())), t.variant,
           target.name, budget, seed, INTERPRET)
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
    fits = [c for c in ({k: int(s.config[k]) for k in t.knobs} for s in board) if cpu_rejection(t, p, c) is None]
    best = fits[0] if fits else None
    _TUNED[key] = (best, len(scores))
    return _TUNED[key]


def db_problem(n: Any) -> Any:
    """The registry problem library call ``n`` is tuned and recorded under (a GEMM: the matmul key, no
    ``B`` axis for one batch entry, the node's activation; a row op: its row of :data:`TUNABLE`), or None."""
    if n.op != "matmul":
        t = TUNABLE.get(row(n))
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
    t = TUNABLE.get(row(n))
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
            slow = cpu_rejection(t, prob, dict(r.config)) if why is None else None
            if why is None and slow is None:
                return dict(r.config), "; ".join(skipped)
            skipped.append(f"DB record {r.id} rejected: {why}" if why else f"DB record {r.id} not taken: {slow}")
        return None, "; ".join(skipped)
    except Exception:  # noqa: BLE001 - an unreadable DB or an odd shape never breaks a solve: no record
        return None, ""


def write_back(n: Any, choice: dict[str, Any], target: Target, seed: int = 0, db_path: Any = None) -> dict[str, Any]:
    """After the program running ``choice`` (:func:`choose`'s record of call ``n``, source ``tuned``) was
    accepted by the check: verify the config with the tuner's own verifier on the call's problem and,
    where it passes, record it in the tuning DB through the tuner's record path (verified, its
    certificate; timing ``predicted``). Returns what was done: ``{"written", "record_id" | "reason"}``."""
    t = TUNABLE.get(row(n))
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
