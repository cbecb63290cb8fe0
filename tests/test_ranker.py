"""The learned ranker (warpsmith.ranker): the numpy gradient-boosted trees fit, are
deterministic and round-trip; the prescreen keeps the best fraction and is off without a model; the
held-out split is by group; only measured records train it; the CLI trains and shows it."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.db import TuningDB, TuningRecord
from warpsmith.measure import Evaluator
from warpsmith.ops import get_op, variants
from warpsmith import ranker as rk
from warpsmith.space import JointSpace
from warpsmith.targets import get_target
from warpsmith.tune import _prescreen


def _nonlinear(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A function no linear model ranks well: a sine, a square and an interaction, plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 5))
    y = np.sin(2 * x[:, 0]) + x[:, 1] ** 2 + x[:, 2] * x[:, 3] + 0.05 * rng.normal(size=n)
    return x, y


def _linear_fit_predict(xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray) -> np.ndarray:
    a = np.c_[xtr, np.ones(len(xtr))]
    coef, *_ = np.linalg.lstsq(a, ytr, rcond=None)
    return np.c_[xte, np.ones(len(xte))] @ coef


def test_gbt_fits_a_nonlinear_function_far_better_than_a_constant_or_a_line():
    x, y = _nonlinear(700, seed=1)
    xtr, ytr, xte, yte = x[:500], y[:500], x[500:], y[500:]
    pred = rk.GBTRegressor(seed=0).fit(xtr, ytr).predict(xte)
    const_mse = float(np.mean((yte - ytr.mean()) ** 2))   # the best constant the training data gives
    assert float(np.mean((pred - yte) ** 2)) < 0.25 * const_mse
    # the bar is the data's own: least squares on the same features (it cannot model the sine,
    # the square or the product), so a broken split search or leaf update does not pass
    linear = _linear_fit_predict(xtr, ytr, xte)
    assert rk.spearman(pred, yte) > rk.spearman(linear, yte)
    assert float(np.mean((pred - yte) ** 2)) < 0.5 * float(np.mean((linear - yte) ** 2))


def test_gbt_routes_missing_values_and_predicts_constant_data():
    x, y = _nonlinear(300, seed=2)
    x[::5, 0] = np.nan
    m = rk.GBTRegressor(seed=0, n_estimators=50).fit(x, y)
    assert np.isfinite(m.predict(x)).all()
    flat = rk.GBTRegressor(seed=0, n_estimators=10).fit(np.zeros((20, 2)), np.full(20, 3.0))
    assert np.allclose(flat.predict(np.ones((3, 2))), 3.0)


def test_same_seed_same_model_other_seed_other_model():
    x, y = _nonlinear(300, seed=3)
    a = rk.GBTRegressor(seed=7, n_estimators=30).fit(x, y).to_json()
    b = rk.GBTRegressor(seed=7, n_estimators=30).fit(x, y).to_json()
    c = rk.GBTRegressor(seed=8, n_estimators=30).fit(x, y).to_json()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert json.dumps(a, sort_keys=True) != json.dumps(c, sort_keys=True)  # row subsampling follows the seed


def _matmul_samples(n_shapes: int = 6, per_shape: int = 12, seed: int = 0) -> list[rk.Sample]:
    """Synthetic 'measured' matmul samples: time grows with the work and prefers BLOCK_M=64, 4 warps."""
    rng = random.Random(seed)
    out = []
    for i in range(n_shapes):
        shape = {"M": 64 * (i + 1), "N": 128, "K": 256}
        for _ in range(per_shape):
            cfg = {"BLOCK_M": rng.choice([16, 32, 64, 128]), "BLOCK_N": rng.choice([32, 64]), "BLOCK_K": 32,
                   "GROUP_M": 8, "num_warps": rng.choice([2, 4, 8]), "num_stages": 3, "PRECISION": "ieee"}
            ms = 1e-3 * shape["M"] * (1 + abs(math.log2(cfg["BLOCK_M"] / 64)) + 0.5 * (cfg["num_warps"] != 4))
            out.append(rk.Sample("matmul", "tiled", shape, "float16", {"layout": "nn"}, cfg, ms))
    return out


def test_ranker_save_load_roundtrip(tmp_path):
    samples = _matmul_samples()
    r = rk.fit(samples, "h100", seed=0, n_estimators=40)
    path = r.save(rk.ranker_path(tmp_path / "tuning.db", "h100"))
    assert path.name == "tuning.ranker.h100.json"
    back = rk.Ranker.load(path)
    assert back.to_json() == json.loads(path.read_text())
    assert np.array_equal(back.predict_log_ms(samples), r.predict_log_ms(samples))
    assert back.trained_on["samples"] == len(samples) and back.target == "h100"


def test_prescreen_keeps_the_predicted_best_fraction():
    samples = _matmul_samples()
    r = rk.fit(samples, "h100", seed=0, n_estimators=40)
    pred = r.predict_log_ms(samples)
    kept = r.prescreen(samples, keep=0.25)
    assert len(kept) == math.ceil(0.25 * len(samples))
    assert max(pred[kept]) <= min(np.delete(pred, kept))  # nothing left out is predicted faster
    assert len(r.prescreen(samples, keep=0.01, min_keep=9)) == 9
    assert r.prescreen([], keep=0.5) == []
    with pytest.raises(ValueError):
        r.prescreen(samples, keep=0.0)


def test_prescreen_is_off_without_a_model(tmp_path, monkeypatch):
    db = tmp_path / "tuning.db"
    assert rk.load_for(db, "h100") is None
    rk.fit(_matmul_samples(), "h100", n_estimators=5).save(rk.ranker_path(db, "h100"))
    assert rk.load_for(db, "h100") is not None and rk.load_for(db, "h200") is None
    monkeypatch.setenv("WARPSMITH_RANKER", "0")
    assert rk.load_for(db, "h100") is None
    assert rk.for_prescreen(db, "h100")[0] is None


def test_prescreen_gate_uses_a_ranker_only_when_it_held_out_at_least_as_well_as_the_analytic_model(
        tmp_path, monkeypatch):
    db = tmp_path / "tuning.db"
    r = rk.fit(_matmul_samples(), "h100", n_estimators=5)
    assert rk.for_prescreen(db, "h100") == (None, "off (no ranker trained for h100)")
    r.save(rk.ranker_path(db, "h100"))
    assert rk.for_prescreen(db, "h100")[0] is None  # no held-out evaluation: not used
    r.trained_on["heldout"] = {"pooled": {"ranker": 0.9, "analytic": 0.2},
                               "within_mean": {"ranker": 0.1, "analytic": 0.4}}  # within a problem decides
    r.save(rk.ranker_path(db, "h100"))
    got, why = rk.for_prescreen(db, "h100")
    assert got is None and why.startswith("off: held-out Spearman within a problem")
    monkeypatch.setenv("WARPSMITH_RANKER", "force")
    assert rk.for_prescreen(db, "h100")[0] is not None
    monkeypatch.delenv("WARPSMITH_RANKER")
    r.trained_on["heldout"]["within_mean"] = {"ranker": 0.5, "analytic": 0.4}
    r.save(rk.ranker_path(db, "h100"))
    got, why = rk.for_prescreen(db, "h100")
    assert got is not None and why.startswith("on:")


class _KeepBlockM16:
    """A stand-in ranker: 'predicts' BLOCK_M=16 configs fastest and keeps only those."""

    def __init__(self) -> None:
        self.seen = 0

    def prescreen(self, samples, keep, min_keep=1):
        self.seen = len(samples)
        return [i for i, s in enumerate(samples) if s.config["BLOCK_M"] == 16]


def test_tune_prescreen_uses_the_ranker_before_the_cost_model():
    tgt = get_target("h100")
    spec = get_op("matmul")
    p = spec.problem({"M": 256, "N": 256, "K": 256}, "float16")
    vs = variants("matmul")
    space = JointSpace({n: v.space(p, tgt) for n, v in vs.items()})
    ev = Evaluator(spec, p, vs, tgt, measured=False)
    plain = _prescreen(space, ev, 16, random.Random(0))
    stub = _KeepBlockM16()
    screened = _prescreen(space, ev, 16, random.Random(0), ranker=stub)
    assert stub.seen > 16 and screened
    assert all(q["BLOCK_M"] == 16 for q in screened)
    assert plain == _prescreen(space, ev, 16, random.Random(0), ranker=None)  # off: as before


def test_compiler_facts_are_features_only_when_asked():
    facts = [{"name": "k", "num_warps": 4, "num_stages": 2, "regs": 96, "spill_bytes": 0, "smem_bytes": 8192,
              "loop_loads": 2, "pipelined_loads": 2, "grid": None}]
    samples = _matmul_samples(n_shapes=2, per_shape=6)
    for s in samples[:6]:
        s.facts = facts
    plain = rk.fit(samples, "h100", n_estimators=5)
    assert not any(n.startswith("facts.") for n in plain.featurizer.names) and plain.trained_on["samples"] == 12
    with_facts = rk.fit(samples, "h100", n_estimators=5, facts=True)
    assert "facts.regs" in with_facts.featurizer.names and with_facts.trained_on["samples"] == 6
    assert rk.Ranker.from_json(with_facts.to_json()).featurizer.facts


def test_group_folds_never_split_a_group():
    groups = ["a", "a", "b", "c", "c", "c", "d", "e", "e"]
    loo = rk.group_folds(groups)
    assert len(loo) == 5
    tested = sorted(i for _, te in loo for i in te)
    assert tested == list(range(len(groups)))  # every record held out exactly once
    for k in (None, 2, 3):
        for tr, te in rk.group_folds(groups, k):
            assert not {groups[i] for i in tr} & {groups[i] for i in te}
    assert [t.tolist() for _, t in rk.group_folds(groups, 3)] == [t.tolist() for _, t in rk.group_folds(groups, 3)]


def test_evaluate_holds_out_whole_shapes_and_compares_with_the_analytic_model():
    samples = _matmul_samples(n_shapes=5, per_shape=8)
    analytic = [math.log(s.time_ms) + 0.1 * i for i, s in enumerate(samples)]
    rep = rk.evaluate(samples, "h100", analytic=analytic, n_estimators=30)
    assert rep["groups"] == 5 and rep["held_out_records"] == len(samples)
    for fold in rep["folds"]:
        assert len(fold["held_out"]) == 1 and fold["train"] + fold["test"] == len(samples)
    assert set(rep["spearman_pooled"]) == {"ranker", "analytic", "ranker_same_records"}
    assert len(rep["within_problem"]) == 5 and set(rep["spearman_within_mean"]) == {"ranker", "analytic"}


def test_spearman_matches_definition():
    assert rk.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rk.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert list(rk.rankdata([3, 1, 3, 2])) == [3.5, 1.0, 3.5, 2.0]
    assert math.isnan(rk.spearman([1, 1, 1], [1, 2, 3]))
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 40), rng.normal(size=40)
    assert rk.spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic)


def _record(time_ms: float, kind: str, m: int, block_m: int) -> TuningRecord:
    return TuningRecord(op="matmul", variant="tiled", shape={"M": m, "N": 64, "K": 64}, dtype="float16",
                        attrs={"layout": "nn"}, target="h100",
                        fingerprint={"gpu": "test", "driver": None, "triton": "x", "torch": "x", "warpsmith": "x",
                                     "source_hash": "abc"},
                        config={"BLOCK_M": block_m, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4,
                                "num_stages": 2, "PRECISION": "ieee"},
                        timing_kind=kind, time_ms=time_ms, baseline_ms=None, verified=False, certificate=None)


def test_only_measured_records_train_and_retrain_follows_new_ones(tmp_path):
    db = TuningDB(tmp_path / "t.db")
    for i in range(6):
        db.put(_record(1.0 + i, "predicted", 64 * (i + 1), 32), allow_unverified=True)
    assert rk.samples_from_records(db.list(), "h100") == []
    with pytest.raises(ValueError, match="no measured records"):
        rk.train_from_db(db, "h100")
    assert rk.maybe_retrain(db, "h100", every=4) is None
    for i in range(4):
        db.put(_record(0.5 + i, "measured", 64 * (i + 1), 16 << (i % 3)), allow_unverified=True)
    r = rk.maybe_retrain(db, "h100", every=4)
    assert r is not None and r.trained_on["measured_records"] == 4
    assert rk.ranker_path(db.path, "h100").exists()
    assert rk.maybe_retrain(db, "h100", every=4) is None   # nothing new since
    db.put(_record(9.0, "measured", 512, 64), allow_unverified=True)
    assert rk.maybe_retrain(db, "h100", every=1).trained_on["measured_records"] == 5


def test_a_measured_tune_records_its_candidates_for_the_ranker(tmp_path):
    from warpsmith.measure import Score
    from warpsmith.targets import ConfigFacts, KernelFacts
    from warpsmith.tune import TuneResult, _record_candidates

    p = get_op("matmul").problem({"M": 64, "N": 64, "K": 64}, "float16")
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 1, "num_warps": 2, "num_stages": 2,
           "EVEN_K": True, "PRECISION": "ieee"}
    facts = ConfigFacts((KernelFacts("k", 2, 2, 64, 0, 4096, 2, 2),))
    board = [Score("tiled", {**cfg, "BLOCK_M": bm}, 0.01, measured_ms=0.02 * (i + 1), facts=facts)
             for i, bm in enumerate((16, 32, 64))]
    result = TuneResult(p, get_target("h100"), "measured", "random", 0, board, 3, 0.0, winner=board[0])
    db = TuningDB(tmp_path / "t.db")
    assert _record_candidates(db, result, board) == 2  # the winner is recorded apart
    recs = db.list()
    assert [r.timing_kind for r in recs] == ["measured", "measured"] and not any(r.verified for r in recs)
    samples = rk.samples_from_records(recs, "h100")
    assert len(samples) == 2 and samples[0].facts[0]["regs"] == 64
    assert db.best("matmul", p.shape, "float16", p.key_attrs, "h100", {"tiled": recs[0].fingerprint["source_hash"]}) \
        is None  # unverified: never dispatched


def test_cli_ranker_train_and_show(tmp_path):
    db = TuningDB(tmp_path / "t.db")
    for i, s in enumerate(_matmul_samples(n_shapes=3, per_shape=4)):
        rec = _record(s.time_ms, "measured", s.shape["M"], s.config["BLOCK_M"])
        db.put(rec, allow_unverified=True)
    runner = CliRunner()
    r = runner.invoke(cli, ["db", "ranker", "train", "--target", "h100", "--db", str(db.path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "12 measured records" in r.output and "held-out Spearman" in r.output and "prescreen: " in r.output
    shown = runner.invoke(cli, ["db", "ranker", "show", "--target", "h100", "--db", str(db.path)])
    doc = json.loads(shown.output)
    assert shown.exit_code == 0 and doc["trained_on"]["samples"] == 12 and "heldout" in doc["trained_on"]
    assert doc["prescreen"]["uses_it"] in (True, False)
    missing = runner.invoke(cli, ["db", "ranker", "show", "--target", "a100", "--db", str(db.path)])
    assert missing.exit_code == 2 and "no ranker" in missing.output
    empty = runner.invoke(cli, ["db", "ranker", "train", "--target", "a100", "--db", str(db.path)])
    assert empty.exit_code == 2 and "no measured records" in empty.output
