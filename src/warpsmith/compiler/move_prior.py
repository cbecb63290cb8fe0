"""The learned prior over rewrite moves: which single-site flip of the search over rewrite decisions
and partitions (:mod:`.sequence`) is worth trying first.

What it learns. One record is one **move** the sequence search evaluated: a parent state (a set of
forced site decisions, already evaluated) and the flip of one site's decision, giving a child state.
Its features (:func:`flip_features`) are known before the child is evaluated: the rewrite's kind, its
rule (algebra only), the direction (apply a rewrite the model kept as written, or keep as written one
it took), the site record's ``before_ms``/``after_ms`` and the model's margin there (the greedy price
of the flip), the parent's predicted time, the number of nodes and rewrite sites of the parent's
graph, the number of decisions the parent forces already, and the target's name. Its outcome is
``log(child predicted_ms / parent predicted_ms)`` (:data:`TRAINING_TARGET`; below 0: the flip paid);
a child whose passes or partition search raised is a **dead end**, recorded as such (``outcome``
None, ``dead_end`` true), never as a number, and not a training row.

Why predicted outcomes are legitimate here. Every time in a record is the program cost model's
prediction (:func:`warpsmith.cost.program.program_ms`; ``timing_kind: "predicted"``; on a CPU there
is nothing else). The op-config ranker (:mod:`warpsmith.ranker`) must never train on predictions:
it would only relearn the analytic model it is meant to correct. This prior is not asked to correct
the cost model. The search's score *is* the cost model's prediction, and the question the prior
answers is one the model can only answer by evaluating the child: how a flip fares once the
rewrite passes after it and the partition search have reacted (merged, split or recomputed around
it). The greedy margin at the site sees the flip under greedy fusion alone; the child's predicted
time is what the search will compare. Learning that mapping from the search's own evaluations is
learning the search's landscape, not relearning the model. Whether the programs it leads to are
faster on a GPU is a separate question this prior does not settle.

The model is the ranker's :class:`~warpsmith.ranker.GBTRegressor` on a
:class:`~warpsmith.ranker.Featurizer` (reused, not copied), saved as JSON beside the tuning database
(``<db dir>/<db stem>.moves-prior.<target>.json``, :func:`prior_path`); the records it trains on are
appended by ``solve`` beside the same database (``<db stem>.moves.jsonl``, :func:`moves_path`; only
where that database exists). ``warpsmith db moves train|show|evaluate`` trains, inspects and
evaluates it; ``benchmarks/move_prior.py`` collects records on a set of problems and measures it.

Use. Where a prior for the target is saved beside the database, ``WARPSMITH_MOVE_PRIOR`` is not
``0``, and its held-out evaluation has it at least level with the margins' order (:meth:`MovePrior.gate`;
``WARPSMITH_MOVE_PRIOR=force`` skips that), the sequence search orders each state's flips by the prior's
predicted outcome, most negative first (:func:`.sequence._moves`); otherwise by the cost model's margins
as before, and the record says why (``move_order``).

Evaluation (:func:`evaluate`): held out by problem (:func:`~warpsmith.learned.group_folds`), the
Spearman rank correlation against the realised outcome of (a) the prior's predicted outcome and (b)
the margin, the key the default order sorts by (smallest first). Both are keys sorted ascending to
give the order moves are tried in, so for both a *positive* correlation means moves tried earlier
fared better; pooled over every held-out move and within each held-out problem.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..core.errors import InvalidInputError
from ..learned import group_folds, heldout_gate, spearman, write_json
from ..ranker import Featurizer, GBTRegressor

FORMAT = 1  # the saved prior's format version
TRAINING_TARGET = "log(child predicted_ms / parent predicted_ms)"
TIMING_KIND = "predicted"  # every outcome is the program cost model's prediction
MIN_RECORDS = 20  # moves with a numeric outcome below which training is refused
PAID_BELOW = -1e-9  # an outcome below this: the flip lowered the predicted time
MODEL_PARAMS = {"n_estimators": 120, "learning_rate": 0.1, "max_depth": 3, "min_samples_leaf": 3}


# ------------------------------------------------------------------------------------ features
def site_record(records: Sequence[Mapping[str, Any]], site: str) -> Mapping[str, Any] | None:
    """The first rewrite record of ``records`` at ``site`` (the one whose margin orders the flip)."""
    from .sequence import site_of

    for r in records:
        if site_of(r) == site:
            return r
    return None


def flip_features(records: Sequence[Mapping[str, Any]], forced: Mapping[str, bool], parent_ms: float,
                  nodes: int, site: str, take: bool, target: str) -> dict[str, float | str]:
    """The features of flipping ``site`` to ``take`` (apply: True) in a parent state whose passes left
    ``records``, that forces ``forced``, priced ``parent_ms`` (predicted), whose graph has ``nodes``
    nodes; everything known before the child is evaluated. Strings are categorical."""
    from .sequence import site_of

    r = site_record(records, site) or {}
    kind = str(r.get("rewrite", site.split("@")[0]))
    f: dict[str, float | str] = {"kind": kind, "rule": str(r.get("rule") or "") if kind == "algebra" else "",
                                 "apply": 1.0 if take else 0.0, "target": str(target),
                                 "nodes": float(nodes), "sites": float(len({site_of(x) for x in records})),
                                 "forced": float(len(forced))}
    if parent_ms and parent_ms > 0 and math.isfinite(parent_ms):
        f["parent_log_ms"] = math.log(parent_ms)
    before, after = r.get("before_ms"), r.get("after_ms")
    if before is not None and before > 0:
        f["before_log_ms"] = math.log(before)
    if after is not None and after > 0:
        f["after_log_ms"] = math.log(after)
    if before and after is not None:
        f["margin"] = abs(after - before) / before  # the default order's key (sequence._moves)
        if after > 0:
            f["greedy_log_ratio"] = math.log(after / before)  # below 0: the greedy model says the rewrite pays
    return f


def state_features(state: Any, site: str, take: bool, target: str) -> dict[str, float | str]:
    """:func:`flip_features` of a :class:`.sequence.State`."""
    return flip_features(state.records, state.forced, state.result.best_ms, len(state.graph.nodes), site, take,
                         target)


def margin_key(rec: Mapping[str, Any]) -> float:
    """The default order's key of a move record: the margin at its site (inf where the record has none,
    as :func:`.sequence._moves` puts such sites last)."""
    m = rec.get("features", {}).get("margin")
    return float(m) if m is not None else math.inf


def paid(rec: Mapping[str, Any]) -> bool:
    """Whether a move record's flip lowered the predicted time (a dead end never did)."""
    y = rec.get("outcome")
    return y is not None and y < PAID_BELOW


def trainable(records: Iterable[Mapping[str, Any]], target: str | None = None) -> list[Mapping[str, Any]]:
    """The records with a numeric outcome (dead ends dropped), of ``target`` where given."""
    out = []
    for r in records:
        y = r.get("outcome")
        if r.get("dead_end") or y is None or not isinstance(y, (int, float)) or not math.isfinite(y):
            continue
        if target is not None and r.get("features", {}).get("target") != target:
            continue
        out.append(r)
    return out


# --------------------------------------------------------------------------------------- model
@dataclass
class MovePrior:
    """A trained prior for one target: the featurizer, the trees and what they were trained on."""

    target: str
    featurizer: Featurizer
    model: GBTRegressor
    trained_on: dict[str, Any] = field(default_factory=dict)

    def predict(self, rows: Sequence[Mapping[str, float | str]]) -> np.ndarray:
        """The predicted outcome (log of the child's predicted time over the parent's) of each
        feature row (:func:`flip_features`)."""
        if not rows:
            return np.zeros(0)
        return np.asarray(self.model.predict(self.featurizer.matrix(rows)), dtype=float)

    def gate(self) -> tuple[bool, str]:
        """Whether the search should order its moves by this prior, and why: only where its held-out
        evaluation (stored at training, ``trained_on["heldout"]``) has it at least level with the
        margins' order -- within a problem where that was measured, else pooled (the ranker's rule,
        :func:`warpsmith.learned.heldout_gate`). ``WARPSMITH_MOVE_PRIOR=force`` uses it regardless."""
        return heldout_gate(self.trained_on.get("heldout"), ("prior", "prior"), ("margin", "margins"),
                            "WARPSMITH_MOVE_PRIOR", "trained with --no-eval, or on moves of a single problem")

    def describe(self) -> str:
        t = self.trained_on
        return (f"the learned move prior's predicted outcome (most promising first; trained on {t.get('records')} "
                f"moves of {t.get('problems')} problems, {t.get('trained')}, predicted outcomes)")

    def to_json(self) -> dict[str, Any]:
        return {"warpsmith_move_prior": FORMAT, "target": self.target, "training_target": TRAINING_TARGET,
                "timing_kind": TIMING_KIND, "trained_on": self.trained_on,
                "featurizer": self.featurizer.to_json(), "model": self.model.to_json()}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "MovePrior":
        if d.get("warpsmith_move_prior") != FORMAT:
            raise ValueError(f"not a warpsmith move prior of format {FORMAT}: {d.get('warpsmith_move_prior')!r}")
        return MovePrior(d["target"], Featurizer.from_json(d["featurizer"]), GBTRegressor.from_json(d["model"]),
                         dict(d.get("trained_on", {})))

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_json())

    @staticmethod
    def load(path: str | Path) -> "MovePrior":
        return MovePrior.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def train(records: Iterable[Mapping[str, Any]], target: str, *, seed: int = 0,
          min_records: int = MIN_RECORDS, trained_on: Mapping[str, Any] | None = None, **params: Any) -> MovePrior:
    """Train the prior of ``target`` on its move records with a numeric outcome. Refuses
    (:class:`~warpsmith.core.errors.InvalidInputError`) fewer than ``min_records`` of them."""
    data = trainable(records, target)
    if len(data) < max(1, min_records):
        raise InvalidInputError(f"move prior training set for {target}",
                                f"at least {min_records} evaluated moves of that target with an outcome (dead ends "
                                "do not count; solve appends moves beside a tuning DB, or run benchmarks/move_prior.py)",
                                f"{len(data)} moves")
    rows = [dict(r["features"]) for r in data]
    fz = Featurizer.fit(rows)
    y = np.array([float(r["outcome"]) for r in data])
    model = GBTRegressor(seed=seed, **{**MODEL_PARAMS, **params}).fit(fz.matrix(rows), y)
    info = {"records": len(data), "problems": len({r.get("problem", "?") for r in data}),
            "training_target": TRAINING_TARGET, "timing_kind": TIMING_KIND, "seed": seed,
            "trained": datetime.now(timezone.utc).isoformat(timespec="seconds"), **dict(trained_on or {})}
    return MovePrior(target, fz, model, info)


# ----------------------------------------------------------------------------------- evaluation
def _within(pred: np.ndarray, y: np.ndarray, margin: np.ndarray, idx: list[int]) -> dict[str, Any]:
    return {"moves": len(idx), "prior": spearman(pred[idx], y[idx]), "margin": spearman(margin[idx], y[idx])}


def evaluate(records: Iterable[Mapping[str, Any]], target: str, *, k: int | None = None, seed: int = 0,
             min_records: int = MIN_RECORDS, **params: Any) -> dict[str, Any]:
    """Held out by problem (``k=None``: leave one problem out; else ``k`` folds by problem), the
    Spearman correlation against the realised outcome of the prior's predicted outcome and of the
    margin (module docstring: both ascending keys, positive = moves tried earlier fared better),
    pooled over the held-out moves and within each held-out problem with at least 3 moves (the mean
    within a problem over the problems where both correlations are defined)."""
    records = list(records)
    data = trainable(records, target)
    dead = sum(bool(r.get("dead_end")) and r.get("features", {}).get("target") == target for r in records)
    groups = [str(r.get("problem", "?")) for r in data]
    if len(set(groups)) < 2:
        raise InvalidInputError(f"move prior evaluation for {target}", "moves of at least 2 problems (held out by problem)",
                                f"{len(set(groups))} problem(s)")
    y = np.array([float(r["outcome"]) for r in data])
    margin = np.array([margin_key(r) for r in data])
    pred = np.full(len(data), np.nan)
    folds = []
    for train_idx, test_idx in group_folds(groups, k):
        train_set = [data[i] for i in train_idx]
        if len(train_set) < min_records:
            folds.append({"held_out": sorted({groups[i] for i in test_idx}), "train": len(train_set),
                          "test": len(test_idx), "skipped": f"fewer than {min_records} training moves"})
            continue
        p = train(train_set, target, seed=seed, min_records=min_records, **params)
        pred[test_idx] = p.predict([dict(data[i]["features"]) for i in test_idx])
        folds.append({"held_out": sorted({groups[i] for i in test_idx}), "train": len(train_idx),
                      "test": len(test_idx)})
    done = np.flatnonzero(~np.isnan(pred))
    per: dict[str, Any] = {}
    for g in sorted(set(groups)):
        idx = [i for i in done if groups[i] == g]
        if len(idx) >= 3:
            per[g] = _within(pred, y, margin, idx)
    both = [row for row in per.values() if math.isfinite(row["prior"]) and math.isfinite(row["margin"])]
    mean: dict[str, float] = {who: float(np.mean([row[who] for row in both])) for who in ("prior", "margin")} \
        if both else {}
    pooled = _within(pred, y, margin, list(done))
    return {"target": target, "records": len(data), "problems": len(set(groups)), "held_out_records": len(done),
            "split": "leave one problem out" if k is None else f"{k} folds by problem",
            "outcome": TRAINING_TARGET, "timing_kind": TIMING_KIND,
            "keys": {"prior": "predicted outcome, ascending (the prior's order)",
                     "margin": "|after_ms - before_ms| / before_ms at the site, ascending (the default order)"},
            "sign": "positive: moves tried earlier had lower (better) realised outcomes",
            "spearman_pooled": {"prior": pooled["prior"], "margin": pooled["margin"]},
            "spearman_within_mean": mean, "within_mean_problems": len(both), "within_problem": per, "folds": folds,
            "paid": int((y < PAID_BELOW).sum()), "dead_ends_excluded": int(dead)}


def summary_line(rep: Mapping[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:+.3f}"

    p, w = rep["spearman_pooled"], rep.get("spearman_within_mean", {})
    return (f"held-out Spearman vs realised predicted outcome ({rep['split']}, {rep['held_out_records']} moves, "
            f"{rep['problems']} problems): pooled prior {fmt(p.get('prior'))}, margin {fmt(p.get('margin'))}; "
            f"within a problem (mean over {rep.get('within_mean_problems', 0)} problems with >= 3 moves, both defined) prior "
            f"{fmt(w.get('prior'))}, margin {fmt(w.get('margin'))}")


# ------------------------------------------------------------------------------ beside the DB
def moves_path(db_path: str | Path) -> Path:
    """Where ``solve`` appends move records: ``<db dir>/<db stem>.moves.jsonl``."""
    p = Path(db_path)
    return p.with_name(f"{p.stem}.moves.jsonl")


def prior_path(db_path: str | Path, target: str) -> Path:
    """Where the prior of ``target`` lives: ``<db dir>/<db stem>.moves-prior.<target>.json``."""
    p = Path(db_path)
    return p.with_name(f"{p.stem}.moves-prior.{target}.json")


def stamped(problem: str, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``records`` as kept beside the DB: each with the problem's name and today's date."""
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return [{"problem": problem, "date": date, **r} for r in records]


def append_moves(path: str | Path, problem: str, records: Sequence[Mapping[str, Any]]) -> int:
    """Append ``records`` to the JSONL file ``path``, one line per move (:func:`stamped`); returns the
    lines written."""
    if not records:
        return 0
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in stamped(problem, records))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return len(records)


def read_moves(path: str | Path) -> list[dict[str, Any]]:
    """The move records of a JSONL file (a line that is not a JSON object is skipped)."""
    out = []
    p = Path(path)
    if not p.exists():
        return out
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and isinstance(r.get("features"), dict):
            out.append(r)
    return out


def enabled() -> bool:
    return os.environ.get("WARPSMITH_MOVE_PRIOR", "1").strip().lower() not in ("0", "off", "false", "no")


_LOADED: dict[str, tuple[float, MovePrior | None]] = {}


def load_saved(db_path: str | Path | None, target: str) -> MovePrior | None:
    """The saved prior of ``target`` beside ``db_path``, or None (none trained, disabled, unreadable);
    read again only when the file changes."""
    if db_path is None or not enabled():
        return None
    path = prior_path(db_path, target)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    key = str(path)
    if key in _LOADED and _LOADED[key][0] == stamp:
        return _LOADED[key][1]
    try:
        prior: MovePrior | None = MovePrior.load(path)
    except (OSError, ValueError, KeyError, TypeError):
        prior = None
    _LOADED[key] = (stamp, prior)
    return prior


def load_for(db_path: str | Path | None, target: str) -> tuple[MovePrior | None, str | None]:
    """The prior the search should use for ``target`` (:func:`load_saved` that passes
    :meth:`MovePrior.gate`), and, where one is saved but not used, why (else None)."""
    prior = load_saved(db_path, target)
    if prior is None:
        return None, None
    ok, why = prior.gate()
    return (prior, None) if ok else (None, f"the saved move prior is not used: {why}")


def train_from_file(db_path: str | Path, target: str, *, seed: int = 0, save: bool = True,
                    evaluate_heldout: bool = True) -> tuple[MovePrior, dict[str, Any] | None]:
    """Train the prior of ``target`` on the moves beside ``db_path`` (:func:`moves_path`), evaluated
    first held out by problem where there are moves of at least 2 problems (the summary kept in
    ``trained_on["heldout"]``), and save it (:func:`prior_path`)."""
    src = moves_path(db_path)
    records = read_moves(src)
    rep = None
    data = trainable(records, target)
    if evaluate_heldout and len({r.get("problem") for r in data}) >= 2 and len(data) >= MIN_RECORDS:
        rep = evaluate(records, target, seed=seed)
    info: dict[str, Any] = {"moves_file": str(src)}
    if rep is not None:
        info["heldout"] = {"split": rep["split"], "records": rep["held_out_records"],
                           "pooled": rep["spearman_pooled"], "within_mean": rep["spearman_within_mean"]}
    prior = train(records, target, seed=seed, trained_on=info)
    if save:
        prior.save(prior_path(db_path, target))
    return prior, rep
