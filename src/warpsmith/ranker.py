"""The learned ranker: gradient-boosted regression trees on a candidate's features, trained on
*measured* times, used to prescreen candidates before the analytic cost model and measurement.

What it learns. One sample is one (problem, variant, config) with a measured time on one hardware
target. The training target is ``log(measured time_ms)``; records whose ``timing_kind`` is
``"predicted"`` (the analytic model's own output) are never used -- a model fitted to them would
only relearn the analytic model (:func:`samples_from_records` drops them, and :func:`train`
refuses an empty set).

Features (:func:`features`), all computed without compiling or timing anything:

- the op and the variant (categorical codes), the dtype's size;
- the problem: ``log2`` of every named dimension, of their product, and the op's own FLOPs and
  minimum bytes (its roofline inputs, not the tuned cost model's prediction) where the op spec
  can rebuild the problem;
- every config knob (numbers as they are, booleans 0/1, strings as categorical codes) and every
  key attribute of the problem;
- with ``facts=True`` only, the compiler's facts (registers, spill bytes, shared memory, loop loads
  and pipelined loads of the main kernel, kernels per launch) and, where a sample carries its kernels'
  machine code counted (``Sample.sass``), the static machine-code model's word on it for the ranker's
  target (``cost.static_sass.config_terms``: ``static.log_ms``, ``static.sol``, ``static.bound``;
  one more fact beside the analytic model, which it does not replace), and then only samples that carry
  facts train it. Off by default: the prescreen ranks configs before anything is compiled, so facts
  would be present when training and absent when ranking (and a tuning run stores them for its
  measured candidates, not its winner: missing facts would mark the winners). A facts ranker is
  for re-ranking candidates whose facts are known (``Ranker.predict_log_ms``).

Missing values are ``NaN`` and go to their own histogram bin.

The model (:class:`GBTRegressor`) is a small, deterministic numpy implementation: features are
cut into at most ``max_bins`` quantile bins (bin 0 holds missing values), each tree is grown
depth-first to ``max_depth`` with the best histogram split per node (squared loss, L2-regularised
leaf values, ``min_samples_leaf``), rows are subsampled with a seeded generator. The same data
and seed give the same trees. ``backend="xgboost"`` uses xgboost instead where it is installed
(it is optional and never required).

Persistence. A :class:`Ranker` (the featurizer's vocabulary + the trees + what it was trained on)
is saved as JSON beside the tuning database, one file per target:
``<db dir>/<db stem>.ranker.<target>.json`` (:func:`ranker_path`). ``warpsmith db ranker
train|show`` trains and inspects it; :func:`maybe_retrain` retrains it automatically once
``RETRAIN_EVERY`` new measured records of the target are in the database (``tune`` calls it after
a measured run).

Use. :meth:`Ranker.prescreen` ranks a pool of candidates by predicted time and keeps the best
``keep`` fraction; ``tune``'s prescreen applies it to its random pool before the analytic model
ranks what is left. With no trained model (or ``WARPSMITH_RANKER=0``) the prescreen is off and the
search is what it was.

Evaluation (:func:`evaluate`): held-out by group (a group is a problem shape: op and shape, so
the same shape under other attributes never leaks into training), Spearman rank correlation of the
ranker and of the analytic model against measured times, pooled over held-out records and within
each held-out problem.
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

from .learned import group_folds, heldout_gate, rankdata, spearman, write_json  # noqa: F401 - re-exported (the ranker's API)

FORMAT = 1                      # the saved model's format version
RETRAIN_EVERY = 64              # new measured records of a target that trigger maybe_retrain
KEEP_FRACTION = 0.25            # share of the prescreen pool the ranker keeps by default
TRAINING_TARGET = "log(measured time_ms)"

_FACT_KEYS = ("regs", "spill_bytes", "smem_bytes", "loop_loads", "pipelined_loads")
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1,
                "int8": 1}


# --------------------------------------------------------------------------------------- samples
@dataclass
class Sample:
    """One candidate: a problem, a variant, a config, and (for training) its measured time."""

    op: str
    variant: str
    shape: dict[str, int]
    dtype: str
    attrs: dict[str, Any]
    config: dict[str, Any]
    time_ms: float | None = None
    facts: Any = None               # a ConfigFacts, its to_json() list, or None
    source: str = ""                # where the sample came from (record id, file)
    sass: Any = None                # each kernel's SassCounts (or its to_json()), in launch order, or None

    @property
    def group(self) -> str:
        """The held-out unit: the op and its shape (attributes and dtype share the group)."""
        return self.op + "[" + ",".join(f"{k}={self.shape[k]}" for k in sorted(self.shape)) + "]"


def samples_from_records(records: Iterable[Any], target: str) -> list[Sample]:
    """The measured records of ``target`` as samples; predicted records are dropped (see module doc)."""
    out = []
    for r in records:
        if r.target != target or r.timing_kind != "measured" or not (r.time_ms > 0 and math.isfinite(r.time_ms)):
            continue
        note = r.certificate if isinstance(r.certificate, dict) else {}
        out.append(Sample(r.op, r.variant, dict(r.shape), r.dtype, dict(r.attrs), dict(r.config), float(r.time_ms),
                          note.get("compiler_facts"), f"record {r.id}", note.get("compiler_sass")))
    return out


# -------------------------------------------------------------------------------------- features
_TERMS: dict[str, dict[str, float]] = {}


def _problem_terms(s: Sample) -> dict[str, float]:
    """The op's FLOPs and minimum bytes for the sample's problem (empty where it cannot be rebuilt)."""
    key = json.dumps([s.op, s.shape, s.dtype, s.attrs], sort_keys=True, default=str)
    if key in _TERMS:
        return _TERMS[key]
    try:
        from .ops import get_op

        spec = get_op(s.op)
        p = spec.problem(s.shape, s.dtype, s.attrs)
        flops, nbytes = float(spec.flops(p)), float(spec.min_bytes(p))
        terms = {"problem.log2_flops": math.log2(flops) if flops > 0 else 0.0,
                 "problem.log2_bytes": math.log2(nbytes) if nbytes > 0 else 0.0}
    except Exception:  # an op this build lacks, or attributes it no longer takes: the terms are missing
        terms = {}
    if len(_TERMS) > 4096:
        _TERMS.clear()
    _TERMS[key] = terms
    return terms


def _facts_terms(facts: Any) -> dict[str, float]:
    if facts is None:
        return {}
    kernels = facts.to_json() if hasattr(facts, "to_json") else facts
    if not kernels:
        return {}
    main = kernels[0]
    out = {f"facts.{k}": float(main[k]) for k in _FACT_KEYS if k in main}
    out["facts.kernels"] = float(len(kernels))
    return out


def _static_terms(s: Sample, target: str) -> dict[str, float | str]:
    """The static machine-code model's prediction for the sample's kernels on ``target`` (empty without
    their machine code, or where the problem cannot be rebuilt)."""
    if not s.sass or not s.facts:
        return {}
    try:
        from .cost.static_sass import config_terms, predict_config
        from .ops import get_op
        from .targets import ConfigFacts, get_target
        from .targets.compiler import SassCounts

        spec = get_op(s.op)
        kernels = s.facts.kernels if hasattr(s.facts, "kernels") else ConfigFacts.from_json(s.facts).kernels
        sass = [SassCounts.from_json(x) if isinstance(x, dict) else x for x in s.sass]
        return config_terms(predict_config(spec, spec.problem(s.shape, s.dtype, s.attrs), kernels, sass,
                                           get_target(target)))
    except Exception:  # an op this build lacks, counts of another format: the terms are missing
        return {}


def raw_features(s: Sample, facts: bool = False, target: str | None = None) -> dict[str, float | str]:
    """Named feature values of one sample (strings are categorical; mapped to codes by the vocabulary).
    With ``facts``, the compiler's facts, and with a ``target`` also the static model's terms."""
    f: dict[str, float | str] = {"op": s.op, "variant": s.op + "/" + s.variant,
                                 "dtype_bytes": float(_DTYPE_BYTES.get(s.dtype, 4))}
    total = 0.0
    for k, n in s.shape.items():
        f[f"shape.{k}"] = math.log2(n)
        total += math.log2(n)
    f["shape.log2_elements"] = total
    for prefix, d in (("config", s.config), ("attr", s.attrs)):
        for k, v in d.items():
            if isinstance(v, bool):
                f[f"{prefix}.{k}"] = float(v)
            elif isinstance(v, (int, float)):
                f[f"{prefix}.{k}"] = float(v)
            elif isinstance(v, str):
                f[f"{prefix}.{k}"] = v
    f.update(_problem_terms(s))
    if facts:
        f.update(_facts_terms(s.facts))
        if target is not None:
            f.update(_static_terms(s, target))
    return f


@dataclass
class Featurizer:
    """The feature names and categorical vocabularies fixed at training time."""

    names: list[str] = field(default_factory=list)
    categories: dict[str, list[str]] = field(default_factory=dict)
    analytic: str | None = None     # the target of the analytic.log_ms feature, where used
    facts: bool = False             # whether the compiler's facts are features

    @staticmethod
    def fit(rows: Sequence[Mapping[str, float | str]], analytic: str | None = None,
            facts: bool = False) -> "Featurizer":
        names = sorted({k for r in rows for k in r})
        cats: dict[str, set[str]] = {}
        for r in rows:
            for k, v in r.items():
                if isinstance(v, str):
                    cats.setdefault(k, set()).add(v)
        return Featurizer(names, {k: sorted(v) for k, v in sorted(cats.items())}, analytic, facts)

    def matrix(self, rows: Sequence[Mapping[str, float | str]]) -> np.ndarray:
        """Rows as a float matrix; unknown names are ignored, missing or unseen values are NaN."""
        x = np.full((len(rows), len(self.names)), np.nan)
        index = {n: i for i, n in enumerate(self.names)}
        for i, r in enumerate(rows):
            for k, v in r.items():
                j = index.get(k)
                if j is None:
                    continue
                if isinstance(v, str):
                    vocab = self.categories.get(k, [])
                    x[i, j] = float(vocab.index(v)) if v in vocab else np.nan
                else:
                    x[i, j] = float(v)
        return x

    def to_json(self) -> dict[str, Any]:
        return {"names": self.names, "categories": self.categories, "analytic": self.analytic, "facts": self.facts}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Featurizer":
        return Featurizer(list(d["names"]), {k: list(v) for k, v in d["categories"].items()}, d.get("analytic"),
                          bool(d.get("facts", False)))


def features(samples: Sequence[Sample], analytic_target: str | None = None,
             facts: bool = False, target: str | None = None) -> list[dict[str, float | str]]:
    """Feature rows; with ``analytic_target``, also ``analytic.log_ms``, the analytic cost model's
    log prediction on that target (a *feature* of a stacked ranker; the target stays measured); with
    ``facts`` and ``target``, the static machine-code model's ``static.*`` terms where samples carry SASS."""
    rows = [raw_features(s, facts, target) for s in samples]
    if analytic_target is not None:
        for r, a in zip(rows, analytic_log_ms(samples, analytic_target)):
            if math.isfinite(a):
                r["analytic.log_ms"] = a
    return rows


# ---------------------------------------------------------------------------- gradient boosting
def _bin_edges(col: np.ndarray, max_bins: int) -> np.ndarray:
    """Cut points of one feature: midpoints between distinct values, thinned to quantiles."""
    vals = np.unique(col[~np.isnan(col)])
    if vals.size <= 1:
        return np.zeros(0)
    if vals.size > max_bins - 1:
        qs = np.quantile(col[~np.isnan(col)], np.linspace(0, 1, max_bins)[1:-1], method="lower")
        vals = np.unique(np.concatenate([qs, vals[-1:]]))
    return (vals[:-1] + vals[1:]) / 2


def _binned(x: np.ndarray, edges: Sequence[np.ndarray]) -> np.ndarray:
    """Bin indices: 0 for NaN, else 1 + the number of cut points below the value."""
    out = np.zeros(x.shape, dtype=np.int32)
    for j, e in enumerate(edges):
        col = x[:, j]
        ok = ~np.isnan(col)
        out[ok, j] = 1 + np.searchsorted(e, col[ok], side="left")
    return out


@dataclass
class GBTRegressor:
    """Gradient-boosted regression trees (squared loss) with histogram splits; deterministic per seed.

    A tree is four arrays: ``feature`` (-1 at a leaf), ``bin`` (rows whose bin is at most this go
    left), ``left``/``right`` child indices and ``value`` (a leaf's contribution).
    """

    n_estimators: int = 200
    learning_rate: float = 0.1
    max_depth: int = 3
    min_samples_leaf: int = 2
    l2: float = 1.0
    max_bins: int = 32
    subsample: float = 0.8
    seed: int = 0
    base: float = 0.0
    edges: list[np.ndarray] = field(default_factory=list)
    trees: list[dict[str, list]] = field(default_factory=list)

    # ---- training
    def fit(self, x: np.ndarray, y: np.ndarray) -> "GBTRegressor":
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if x.ndim != 2 or len(x) != len(y) or len(y) == 0:
            raise ValueError(f"GBTRegressor.fit: expected X (n, d) and y (n,), got {x.shape} and {y.shape}")
        rng = np.random.default_rng(self.seed)
        self.edges = [_bin_edges(x[:, j], self.max_bins) for j in range(x.shape[1])]
        bins = _binned(x, self.edges)
        self.base = float(np.mean(y))
        pred = np.full(len(y), self.base)
        self.trees = []
        n_sub = max(1, int(round(self.subsample * len(y))))
        for _ in range(self.n_estimators):
            rows = np.sort(rng.permutation(len(y))[:n_sub]) if n_sub < len(y) else np.arange(len(y))
            grad = pred - y  # squared loss: gradient; hessian 1
            tree = self._grow(bins, grad, rows)
            self.trees.append(tree)
            pred += self._tree_predict(tree, bins)
        return self

    def _grow(self, bins: np.ndarray, grad: np.ndarray, rows: np.ndarray) -> dict[str, list]:
        nb = max([len(e) + 2 for e in self.edges] + [2])
        d = bins.shape[1]
        tree: dict[str, list] = {"feature": [], "bin": [], "left": [], "right": [], "value": []}

        def node(idx: np.ndarray, depth: int) -> int:
            k = len(tree["feature"])
            for key, v in (("feature", -1), ("bin", 0), ("left", -1), ("right", -1), ("value", 0.0)):
                tree[key].append(v)
            g, h = float(grad[idx].sum()), float(len(idx))
            tree["value"][k] = -self.learning_rate * g / (h + self.l2)
            if depth >= self.max_depth or len(idx) < 2 * self.min_samples_leaf or d == 0:
                return k
            flat = (bins[idx] + np.arange(d) * nb).ravel()
            gh = np.bincount(flat, weights=np.repeat(grad[idx], d), minlength=d * nb).reshape(d, nb)
            ch = np.bincount(flat, minlength=d * nb).reshape(d, nb).astype(float)
            gl, hl = np.cumsum(gh, axis=1)[:, :-1], np.cumsum(ch, axis=1)[:, :-1]
            gr, hr = g - gl, h - hl
            gain = gl ** 2 / (hl + self.l2) + gr ** 2 / (hr + self.l2) - g ** 2 / (h + self.l2)
            gain[(hl < self.min_samples_leaf) | (hr < self.min_samples_leaf)] = -np.inf
            best = int(np.argmax(gain))  # first maximum: ties go to the lowest feature, then bin
            f, b = divmod(best, nb - 1)
            if not np.isfinite(gain.flat[best]) or gain.flat[best] <= 1e-12:
                return k
            go_left = bins[idx, f] <= b
            tree["feature"][k], tree["bin"][k] = f, b
            tree["left"][k] = node(idx[go_left], depth + 1)
            tree["right"][k] = node(idx[~go_left], depth + 1)
            return k

        node(rows, 0)
        return tree

    # ---- prediction
    @staticmethod
    def _tree_predict(tree: Mapping[str, list], bins: np.ndarray) -> np.ndarray:
        feat, thr = np.asarray(tree["feature"]), np.asarray(tree["bin"])
        left, right, value = np.asarray(tree["left"]), np.asarray(tree["right"]), np.asarray(tree["value"])
        at = np.zeros(len(bins), dtype=np.int64)
        rows = np.arange(len(bins))
        while True:
            inner = feat[at] >= 0
            if not inner.any():
                return value[at]
            i = rows[inner]
            f = feat[at[i]]
            go_left = bins[i, f] <= thr[at[i]]
            at[i] = np.where(go_left, left[at[i]], right[at[i]])

    def predict(self, x: np.ndarray) -> np.ndarray:
        bins = _binned(np.asarray(x, dtype=float), self.edges)
        out = np.full(len(bins), self.base)
        for t in self.trees:
            out += self._tree_predict(t, bins)
        return out

    # ---- persistence
    def to_json(self) -> dict[str, Any]:
        return {"kind": "gbt", "n_estimators": self.n_estimators, "learning_rate": self.learning_rate,
                "max_depth": self.max_depth, "min_samples_leaf": self.min_samples_leaf, "l2": self.l2,
                "max_bins": self.max_bins, "subsample": self.subsample, "seed": self.seed, "base": self.base,
                "edges": [e.tolist() for e in self.edges], "trees": self.trees}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "GBTRegressor":
        m = GBTRegressor(**{k: d[k] for k in ("n_estimators", "learning_rate", "max_depth", "min_samples_leaf", "l2",
                                               "max_bins", "subsample", "seed", "base")})
        m.edges = [np.asarray(e, dtype=float) for e in d["edges"]]
        m.trees = [{k: list(v) for k, v in t.items()} for t in d["trees"]]
        return m


class XGBRegressor:
    """The optional xgboost backend (only where ``import xgboost`` works; never required)."""

    def __init__(self, seed: int = 0, n_estimators: int = 200, max_depth: int = 3, learning_rate: float = 0.1,
                 raw: str | None = None) -> None:
        import xgboost  # noqa: F401  (ImportError tells the caller the backend is absent)

        self.seed, self.n_estimators, self.max_depth, self.learning_rate = seed, n_estimators, max_depth, learning_rate
        self.raw = raw

    def _booster(self) -> Any:
        import xgboost

        b = xgboost.Booster()
        b.load_model(bytearray(self.raw.encode()))  # type: ignore[union-attr]
        return b

    def fit(self, x: np.ndarray, y: np.ndarray) -> "XGBRegressor":
        import xgboost

        params = {"objective": "reg:squarederror", "max_depth": self.max_depth, "eta": self.learning_rate,
                  "seed": self.seed, "nthread": 1, "tree_method": "hist", "subsample": 0.8}
        b = xgboost.train(params, xgboost.DMatrix(x, label=y, missing=np.nan), num_boost_round=self.n_estimators)
        self.raw = bytes(b.save_raw("json")).decode()
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        import xgboost

        return self._booster().predict(xgboost.DMatrix(np.asarray(x, dtype=float), missing=np.nan))

    def to_json(self) -> dict[str, Any]:
        return {"kind": "xgboost", "seed": self.seed, "n_estimators": self.n_estimators, "max_depth": self.max_depth,
                "learning_rate": self.learning_rate, "raw": self.raw}


def xgboost_available() -> bool:
    try:
        import xgboost  # noqa: F401
    except Exception:
        return False
    return True


def make_model(backend: str = "numpy", seed: int = 0, **params: Any) -> Any:
    if backend == "numpy":
        return GBTRegressor(seed=seed, **params)
    if backend == "xgboost":
        return XGBRegressor(seed=seed, **params)
    raise ValueError(f"ranker backend {backend!r}: expected numpy or xgboost")


def _model_from_json(d: Mapping[str, Any]) -> Any:
    if d["kind"] == "gbt":
        return GBTRegressor.from_json(d)
    if d["kind"] == "xgboost":
        return XGBRegressor(d["seed"], d["n_estimators"], d["max_depth"], d["learning_rate"], d["raw"])
    raise ValueError(f"unknown ranker model kind {d['kind']!r}")


# ------------------------------------------------------------------------------------- the ranker
@dataclass
class Ranker:
    """A trained model with its featurizer and provenance, for one hardware target."""

    target: str
    featurizer: Featurizer
    model: Any
    trained_on: dict[str, Any] = field(default_factory=dict)

    def predict_log_ms(self, samples: Sequence[Sample]) -> np.ndarray:
        if not samples:
            return np.zeros(0)
        rows = features(samples, self.featurizer.analytic, self.featurizer.facts, self.target)
        return np.asarray(self.model.predict(self.featurizer.matrix(rows)), dtype=float)

    def prescreen(self, samples: Sequence[Sample], keep: float = KEEP_FRACTION, min_keep: int = 1) -> list[int]:
        """Indices of the best ``keep`` fraction of ``samples`` (at least ``min_keep``), best first.

        Ties keep the pool's order (a stable sort), so the result is deterministic."""
        if not 0 < keep <= 1:
            raise ValueError(f"ranker keep fraction: expected a number in (0, 1], got {keep!r}")
        n = len(samples)
        if n == 0:
            return []
        k = min(n, max(min_keep, int(math.ceil(keep * n))))
        order = np.argsort(self.predict_log_ms(samples), kind="stable")
        return [int(i) for i in order[:k]]

    def gate(self) -> tuple[bool, str]:
        """Whether the prescreen should use this ranker, and why: only where its held-out evaluation
        (stored at training) has it at least level with the analytic model -- within a problem where
        that was measured, else pooled (:func:`heldout_gate`). A ranker that ranks worse than the cost
        model would only prune good candidates. ``WARPSMITH_RANKER=force`` uses it regardless."""
        return heldout_gate(self.trained_on.get("heldout"), ("ranker", "ranker"), ("analytic", "analytic model"),
                            "WARPSMITH_RANKER", "trained with --no-eval or on a single problem shape")

    def to_json(self) -> dict[str, Any]:
        return {"warpsmith_ranker": FORMAT, "target": self.target, "training_target": TRAINING_TARGET,
                "trained_on": self.trained_on, "featurizer": self.featurizer.to_json(), "model": self.model.to_json()}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Ranker":
        if d.get("warpsmith_ranker") != FORMAT:
            raise ValueError(f"not a warpsmith ranker of format {FORMAT}: {d.get('warpsmith_ranker')!r}")
        return Ranker(d["target"], Featurizer.from_json(d["featurizer"]), _model_from_json(d["model"]),
                      dict(d.get("trained_on", {})))

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_json())

    @staticmethod
    def load(path: str | Path) -> "Ranker":
        return Ranker.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def fit(samples: Sequence[Sample], target: str, *, backend: str = "numpy", seed: int = 0,
        trained_on: Mapping[str, Any] | None = None, analytic: bool = False, facts: bool = False,
        **params: Any) -> Ranker:
    """Train a ranker on measured samples (``time_ms`` required): the target is ``log(time_ms)``.

    With ``analytic``, the analytic model's log prediction for ``target`` is one more feature (a
    stacked ranker that learns where the analytic model is wrong); the target is still measured."""
    data = [s for s in samples if s.time_ms is not None and s.time_ms > 0 and math.isfinite(s.time_ms)
            and (s.facts or not facts)]
    if not data:
        raise ValueError("no measured samples to train the ranker on (predicted times are never used"
                         + ("; with facts, only samples carrying the compiler's facts count)" if facts else ")"))
    rows = features(data, target if analytic else None, facts, target)
    fz = Featurizer.fit(rows, target if analytic else None, facts)
    y = np.log(np.array([s.time_ms for s in data], dtype=float))
    model = make_model(backend, seed, **params).fit(fz.matrix(rows), y)
    info = {"samples": len(data), "groups": len({s.group for s in data}),
            "ops": sorted({s.op for s in data}), "backend": backend, "seed": seed, "analytic_feature": analytic,
            "facts_features": facts, **dict(trained_on or {})}
    return Ranker(target, fz, model, info)


# ------------------------------------------------------------------------------------ evaluation
def evaluate(samples: Sequence[Sample], target: str, *, analytic: Sequence[float] | None = None,
             k: int | None = None, backend: str = "numpy", seed: int = 0, analytic_feature: bool = False,
             facts: bool = False, **params: Any) -> dict[str, Any]:
    """Held-out-by-group Spearman of the ranker (and of ``analytic`` predictions, where given)
    against the measured times.

    Returns the pooled correlation over all held-out predictions (each from the fold that did not
    see its group), the mean within-problem correlation over held-out problems with at least 3
    configs (a problem: op, shape, attributes, dtype), and per-fold rows."""
    keep = [i for i, s in enumerate(samples) if s.facts or not facts]
    data = [samples[i] for i in keep]
    if analytic is not None:
        analytic = [analytic[i] for i in keep]
    y = np.array([s.time_ms for s in data], dtype=float)
    groups = [s.group for s in data]
    pred = np.full(len(data), np.nan)
    folds = []
    for train_idx, test_idx in group_folds(groups, k):
        r = fit([data[i] for i in train_idx], target, backend=backend, seed=seed, analytic=analytic_feature,
                facts=facts, **params)
        pred[test_idx] = r.predict_log_ms([data[i] for i in test_idx])
        folds.append({"held_out": sorted({groups[i] for i in test_idx}), "train": int(len(train_idx)),
                      "test": int(len(test_idx))})
    done = ~np.isnan(pred)
    an = None if analytic is None else np.asarray(analytic, dtype=float)
    out: dict[str, Any] = {
        "records": len(data), "groups": len(set(groups)), "held_out_records": int(done.sum()),
        "split": "leave one group out" if k is None else f"{k} folds by group",
        "analytic_feature": analytic_feature, "facts_features": facts,
        "group": "op and shape",
        "spearman_pooled": {"ranker": spearman(pred[done], y[done])},
        "folds": folds,
    }
    if an is not None:
        fin = done & np.isfinite(an)
        out["spearman_pooled"]["analytic"] = spearman(an[fin], y[fin])
        out["spearman_pooled"]["ranker_same_records"] = spearman(pred[fin], y[fin])
    within: dict[str, Any] = {}
    probs: dict[str, list[int]] = {}
    for i, s in enumerate(data):
        if done[i]:
            probs.setdefault(f"{s.group} {s.dtype} {json.dumps(s.attrs, sort_keys=True)}", []).append(i)
    for name, idx in sorted(probs.items()):
        if len(idx) < 3:
            continue
        row = {"configs": len(idx), "ranker": spearman(pred[idx], y[idx])}
        if an is not None and np.isfinite(an[idx]).all():
            row["analytic"] = spearman(an[idx], y[idx])
        within[name] = row
    out["within_problem"] = within
    for who in ("ranker", "analytic"):
        vals = [r[who] for r in within.values() if who in r and math.isfinite(r[who])]
        if vals:
            out.setdefault("spearman_within_mean", {})[who] = float(np.mean(vals))
    out["predicted_log_ms"] = [None if np.isnan(v) else float(v) for v in pred]
    return out


# ------------------------------------------------------------------------------ with the tuning DB
def ranker_path(db_path: str | Path, target: str) -> Path:
    """Where the ranker of ``target`` lives: beside the database, ``<stem>.ranker.<target>.json``."""
    p = Path(db_path)
    return p.with_name(f"{p.stem}.ranker.{target}.json")


def enabled() -> bool:
    return os.environ.get("WARPSMITH_RANKER", "1").strip().lower() not in ("0", "off", "false", "no")


def for_prescreen(db_path: str | Path | None, target: str) -> tuple[Ranker | None, str]:
    """The ranker the prescreen should use for ``target`` (None: off) and a line saying why."""
    r = load_for(db_path, target)
    if r is None:
        return None, ("off (WARPSMITH_RANKER=0)" if not enabled() else f"off (no ranker trained for {target})")
    ok, why = r.gate()
    return (r, f"on: {why}") if ok else (None, f"off: {why}")


def load_for(db_path: str | Path | None, target: str) -> Ranker | None:
    """The saved ranker of ``target`` beside ``db_path``, or None (none trained, disabled, unreadable)."""
    if db_path is None or not enabled():
        return None
    path = ranker_path(db_path, target)
    if not path.exists():
        return None
    try:
        return Ranker.load(path)
    except (OSError, ValueError, KeyError, TypeError, ImportError):
        return None


LOO_MAX_GROUPS = 30  # up to this many problem shapes the evaluation leaves one out; beyond, 5 folds


def train_from_db(db: Any, target: str, *, backend: str = "numpy", seed: int = 0, save: bool = True,
                  analytic: bool = False, facts: bool = False, evaluate_heldout: bool = True,
                  loo_max_groups: int = LOO_MAX_GROUPS, **params: Any) -> tuple[Ranker, dict[str, Any] | None]:
    """Train the ranker of ``target`` on the database's measured records and save it beside the DB.

    With ``evaluate_heldout`` (and records of at least two problem shapes), it is first evaluated
    held out by problem shape against the analytic model (:func:`evaluate`); the summary is kept
    in ``trained_on["heldout"]`` (the prescreen's gate, :meth:`Ranker.gate`). Returns the ranker and
    the full evaluation (None without one)."""
    samples = samples_from_records(db.list(target=target), target)
    if not samples:
        raise ValueError(f"{db.path}: no measured records for target {target!r} (predicted records are not "
                         "training data; a GPU run of `warpsmith tune` or the benchmarks writes measured ones)")
    info: dict[str, Any] = {"db": str(db.path), "measured_records": len(samples),
                            "trained": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    rep = None
    groups = len({s.group for s in samples})
    if evaluate_heldout and groups >= 2:
        rep = evaluate(samples, target, analytic=analytic_log_ms(samples, target),
                       k=None if groups <= loo_max_groups else 5, backend=backend, seed=seed,
                       analytic_feature=analytic, facts=facts, **params)
        info["heldout"] = {"split": rep["split"], "records": rep["held_out_records"], "groups": rep["groups"],
                           "pooled": {k: v for k, v in rep["spearman_pooled"].items() if k in ("ranker", "analytic")},
                           "within_mean": rep.get("spearman_within_mean", {}),
                           "within_problems": len(rep["within_problem"])}
    r = fit(samples, target, backend=backend, seed=seed, analytic=analytic, facts=facts, trained_on=info, **params)
    if save:
        r.save(ranker_path(db.path, target))
    return r, rep


def maybe_retrain(db: Any, target: str, every: int = RETRAIN_EVERY) -> Ranker | None:
    """Retrain once ``every`` measured records of ``target`` are in ``db`` beyond those the saved
    model saw (or, with none saved, once there are ``every`` in all). Returns the new ranker or None."""
    if not enabled():
        return None
    have = len(samples_from_records(db.list(target=target), target))
    current = load_for(db.path, target)
    seen = int(current.trained_on.get("measured_records", 0)) if current else 0
    if have - seen < every:
        return None
    backend = current.trained_on.get("backend", "numpy") if current else "numpy"
    analytic = bool(current.trained_on.get("analytic_feature", False)) if current else False
    facts = bool(current.trained_on.get("facts_features", False)) if current else False
    return train_from_db(db, target, backend=backend if backend != "xgboost" or xgboost_available() else "numpy",
                         analytic=analytic, facts=facts, loo_max_groups=0)[0]  # 5 folds: cheap enough inside a tune


def analytic_log_ms(samples: Sequence[Sample], target: str) -> list[float]:
    """``log`` of the analytic cost model's prediction for each sample on ``target`` (``nan`` where
    the problem or variant cannot be rebuilt, ``inf`` where the model says the config cannot run).
    The comparison the ranker is judged against; never a training target."""
    from .cost import predict_ms
    from .ops import get_op, variants
    from .targets import get_target

    tgt = get_target(target)
    out = []
    for s in samples:
        try:
            p = get_op(s.op).problem(s.shape, s.dtype, s.attrs)
            ms = predict_ms(variants(s.op)[s.variant], p, s.config, tgt)
        except Exception:
            out.append(float("nan"))
            continue
        out.append(math.log(ms) if ms > 0 and math.isfinite(ms) else float("inf"))
    return out


def summary_line(rep: Mapping[str, Any]) -> str:
    """One line of :func:`evaluate`'s report."""
    def fmt(d: Mapping[str, Any] | None, who: str) -> str:
        v = (d or {}).get(who)
        return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:+.3f}"

    pooled, within = rep.get("spearman_pooled"), rep.get("spearman_within_mean")
    return (f"held-out Spearman vs measured ({rep['split']}, {rep['held_out_records']} records, {rep['groups']} "
            f"problem shapes): pooled ranker {fmt(pooled, 'ranker')}, analytic {fmt(pooled, 'analytic')}; "
            f"within a problem (mean over {len(rep.get('within_problem', {}))} problems with >= 3 configs) "
            f"ranker {fmt(within, 'ranker')}, analytic {fmt(within, 'analytic')}")
