"""`warpsmith db merge`: the best verified record per key; certificates re-verified on import."""
from __future__ import annotations

import copy
import json

import pytest
from click.testing import CliRunner

from warpsmith.db import TuningDB, TuningRecord
from warpsmith.fleet import certificate_problem, merge, record_key
from warpsmith.ops import variants
from warpsmith.ops.matmul.spec import MATMUL
from warpsmith.ops.norm.spec import RMS_NORM
from warpsmith.targets import fingerprint, get_target
from warpsmith.tune import tune


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """An export document holding one verified rms_norm record (tuned here, predicted times)."""
    d = tmp_path_factory.mktemp("fleet")
    db = TuningDB(d / "src.db")
    tune(RMS_NORM.problem({"M": 4, "N": 32}, "float32"), budget=4, db=db, ranker=False)
    rec = next(r for r in db.list() if r.verified)
    return rec.to_json()


def _doc(tmp_path, *records, name="in.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"warpsmith_db": 1, "records": list(records)}))
    return path


def test_merge_keeps_the_best_per_key(tmp_path, exported):
    db = TuningDB(tmp_path / "fleet.db")
    rep = merge(db, _doc(tmp_path, exported))
    assert (rep.added, rep.not_better, rep.refused) == (1, 0, [])
    slower, faster = copy.deepcopy(exported), copy.deepcopy(exported)
    slower["time_ms"] *= 2
    faster["time_ms"] /= 2
    rep = merge(db, _doc(tmp_path, slower, name="slow.json"))
    assert (rep.added, rep.not_better) == (0, 1)
    rep = merge(db, _doc(tmp_path, faster, name="fast.json"))
    assert rep.added == 1
    best = min((r for r in db.list() if record_key(r) == record_key(db.list()[0])), key=lambda r: r.time_ms)
    assert best.time_ms == pytest.approx(faster["time_ms"])
    other_gpu = copy.deepcopy(slower)
    other_gpu["fingerprint"]["gpu"] = "NVIDIA H200"  # another GPU model: a key of its own, kept beside
    assert merge(db, _doc(tmp_path, other_gpu, name="h200.json"), reverify_configs=False).added == 1


def test_merge_refuses_records_whose_certificate_does_not_verify(tmp_path, exported):
    db = TuningDB(tmp_path / "fleet.db")
    edited_config = copy.deepcopy(exported)  # a config the certificate does not vouch for
    key = next(iter(edited_config["config"]))
    edited_config["config"][key] = 2 * edited_config["config"][key] if isinstance(edited_config["config"][key], int) else "x"
    failed_check = copy.deepcopy(exported)
    failed_check["certificate"]["checks"][-1]["status"] = "failed(planted)"
    unverified = copy.deepcopy(exported)
    unverified["verified"] = False
    other_source = copy.deepcopy(exported)  # consistent, but tuned against a kernel source not installed here
    other_source["fingerprint"]["source_hash"] = other_source["certificate"]["source_hash"] = "0" * 16
    forged = _forged_tf32_record()
    rep = merge(db, _doc(tmp_path, edited_config, failed_check, unverified, other_source, forged))
    why = dict(rep.refused)
    assert rep.added == 0 and sorted(why) == [0, 1, 2, 3, 4], why
    assert "certificate config" in why[0] and "failed check" in why[1] and why[2] == "not verified"
    assert "kernel source here" in why[3] and why[4].startswith(("re-verification failed", "cannot re-verify")), why[4]
    assert "re-verification failed: error_contract: failed" in why[4], why[4]
    assert db.list() == []
    assert certificate_problem(TuningRecord.from_json(exported)) is None
    assert certificate_problem(TuningRecord.from_json(forged)) is None  # only running the verifier catches it


def _forged_tf32_record() -> dict:
    """A matmul record whose certificate is consistent and says accepted, for a config that is not
    correct: fp32 with PRECISION=tf32 on a problem that does not allow tf32 (its error breaks the contract)."""
    problem = MATMUL.problem({"M": 8, "N": 64, "K": 32}, "float32", {"layout": "nt"})
    v = variants("matmul")["tiled"]
    config = {**v.default_config(problem, get_target("h100")), "PRECISION": "tf32"}
    cert = {"verdict": "accepted", "op": "matmul", "variant": "tiled", "config": config, "source_hash": v.source_hash(),
            "problem": {"shape": dict(problem.shape), "dtype": "float32", "attrs": dict(problem.attrs)},
            "checks": [{"name": "error_contract", "status": "tested(6 trials)", "detail": ""}]}
    return TuningRecord(op="matmul", variant="tiled", shape=dict(problem.shape), dtype="float32",
                        attrs=problem.key_attrs, target="h100", fingerprint=fingerprint(v.source_hash()), config=config,
                        timing_kind="predicted", time_ms=0.001, baseline_ms=None, verified=True,
                        certificate=cert).to_json()


def test_cli_db_merge(tmp_path, exported):
    from warpsmith.cli.main import cli

    bad = copy.deepcopy(exported)
    bad["certificate"]["verdict"] = "rejected"
    got = CliRunner().invoke(cli, ["db", "merge", str(_doc(tmp_path, exported, bad)), "--db", str(tmp_path / "f.db")])
    assert got.exit_code == 1 and "1 added" in got.output and "refused record 1: certificate verdict 'rejected'" in got.output


def test_merge_carries_no_failures_and_a_merged_record_clears_the_keys_failure(tmp_path, exported):
    from warpsmith.db import FailureRecord

    db = TuningDB(tmp_path / "fleet.db")
    key = {k: exported[k] for k in ("op", "shape", "dtype", "attrs", "target")}
    db.put_failure(FailureRecord(**key, reason="no verified record", attempts=1, executor="local", provenance={}))
    other = FailureRecord(**{**key, "shape": {"M": 8, "N": 32}}, reason="x", attempts=1, executor="ray", provenance={})
    db.put_failure(other)
    doc = _doc(tmp_path, exported)
    assert merge(db, doc).added == 1
    assert [f.shape for f in db.failures()] == [{"M": 8, "N": 32}]  # the merged key's failure is cleared, only it
