"""The tuning loop end to end (predicted timings, verification under the interpreter)."""
import math

import pytest

from warpsmith.db import TuningDB
from warpsmith.errors import InvalidInputError
from warpsmith.cost.cost import predict_ms
from warpsmith.tune import tune
from warpsmith.ops.matmul.spec import MATMUL
from warpsmith.ops import get_variant
from warpsmith.targets import get_target


def small(dtype="float16", **attrs):
    return MATMUL.problem({"M": 33, "N": 20, "K": 48}, dtype, attrs)


def test_tune_records_a_verified_winner(tmp_path):
    db = TuningDB(tmp_path / "t.db")
    r = tune(small(bias=True, activation="relu"), target="h100", budget=24, seed=0, db=db)
    assert r.timing_kind == "predicted" and r.baseline_ms is None and r.target.name == "h100"
    assert r.winner is not None and r.certificate.passed and r.evaluations <= 24
    assert r.leaderboard == sorted(r.leaderboard, key=lambda s: s.ms)
    rec = db.get(r.record_id)
    assert rec.verified and rec.timing_kind == "predicted" and rec.config == r.winner.config
    assert rec.certificate["verdict"] == "accepted"
    doc = r.to_json()
    for key in ("op", "variant", "config", "target", "timing_kind", "time_ms", "baseline_ms", "verified", "certificate"):
        assert key in doc


def test_tune_is_deterministic_for_a_seed():
    a = tune(small(), target="a100", budget=16, seed=3, finalists=1)
    b = tune(small(), target="a100", budget=16, seed=3, finalists=1)
    assert [(s.variant, s.config) for s in a.leaderboard] == [(s.variant, s.config) for s in b.leaderboard]


def test_failing_finalist_is_dropped_recorded_and_the_next_verified(tmp_path):
    # fp32: the cost model ranks tf32 far faster, the fp32 error contract rejects it
    db = TuningDB(tmp_path / "t.db")
    r = tune(small("float32"), target="h100", budget=24, seed=0, db=db, finalists=8)
    assert r.rejected and all("error_contract" in x.reason for x in r.rejected)
    assert all(x.score.config["PRECISION"] == "tf32" for x in r.rejected)
    assert r.winner.config["PRECISION"] == "ieee"
    unverified = [x for x in db.list() if not x.verified]
    assert len(unverified) == len(r.rejected)


def test_budget_validation_and_time_budget():
    with pytest.raises(InvalidInputError, match="budget"):
        tune(small(), budget=0)
    r = tune(small(), budget=10_000, time_budget_s=0.5, finalists=1)
    assert r.evaluations < 10_000


def test_cost_model_wave_quantization_and_invalid_configs():
    v = get_variant("matmul", "tiled")
    h100 = get_target("h100")
    p = MATMUL.problem({"M": 4096, "N": 4096, "K": 4096}, "bfloat16")
    base = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3, EVEN_K=True, PRECISION="ieee")
    t = predict_ms(v, p, base, h100)
    assert 0.14 < t < 1.0  # roofline bound: 2*4096^3 / 989e12 s = 0.139 ms
    assert predict_ms(v, p, {**base, "num_stages": 1}, h100) > t  # no pipelining costs
    assert math.isinf(predict_ms(v, p, {**base, "num_stages": 9, "BLOCK_K": 128}, h100))  # too much smem
    # wave quantization over 132 SMs: 32x32=1024 tiles need 8 per SM, and so do 33x32=1056
    # (the last wave was partly idle), while 34x32=1088 need 9
    fill = MATMUL.problem({"M": 33 * 128, "N": 4096, "K": 4096}, "bfloat16")
    over = MATMUL.problem({"M": 34 * 128, "N": 4096, "K": 4096}, "bfloat16")
    assert predict_ms(v, fill, base, h100) == pytest.approx(t, rel=0.02)
    assert predict_ms(v, over, base, h100) > t * 9 / 8 * 0.98
    # skinny, long K: split-K beats the plain tiled kernel
    sk = MATMUL.problem({"M": 16, "N": 1024, "K": 16384}, "bfloat16")
    tiled = dict(base, BLOCK_M=16, BLOCK_N=64, num_warps=4)
    assert predict_ms(get_variant("matmul", "splitk"), sk, {**tiled, "SPLIT_K": 8, "REDUCE": "workspace"}, h100) < \
        predict_ms(v, sk, tiled, h100)
