"""benchmarks/attention.py: its dry run (CPU, interpreter) checks warpsmith against SDPA's math
backend and hands the real run's problems (forward and backward per head dim and causality) to the
static compile; a failing compile fails the dry run."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_scripts import fake_check, load  # noqa: E402


def test_dry_run_checks_correctness_and_compiles_what_the_real_run_launches(tmp_path, monkeypatch):
    import warpsmith.gpucheck

    bench = load("attention")
    calls = []
    monkeypatch.setattr(warpsmith.gpucheck, "check_problems", fake_check(0, calls))
    rc = bench.main(["--dry-run", "--out", str(tmp_path), "--dims", "64", "--seqs", "512,1024"])
    doc = json.loads((tmp_path / "attention_dry.json").read_text())
    assert rc == 0 and doc["benchmark"] == "attention" and doc["dry_run"] is True
    assert len(doc["cases"]) == 4 and not doc["failed"]
    for row in doc["cases"]:
        w = row["impls"]["warpsmith"]
        assert w["status"] == "ok" and max(w["rel_err"].values()) < 1e-5, w  # fp32 against SDPA's math backend
        assert row["impls"]["sdpa_flash"]["status"].startswith("unavailable")
    probs = calls[0]["problems"]
    assert {(p["op"], p["attrs"]["causal"]) for p in probs} == {(op, c) for op in ("attention", "attention_backward")
                                                                for c in (False, True)}
    assert all(p["dtype"] == "bfloat16" and p["shape"]["D"] == 64 for p in probs)
    assert doc["static_compile"]["ok"] and calls[0]["target"] == "h200"
    monkeypatch.setattr(warpsmith.gpucheck, "check_problems", fake_check(1, [], failing="attention_backward"))
    # the static compile alone fails the run (--total-time 0: its cases are skipped, the compile still runs)
    assert bench.main(["--dry-run", "--out", str(tmp_path), "--dims", "64", "--seqs", "512", "--total-time", "0"]) == 1
    doc = json.loads((tmp_path / "attention_dry.json").read_text())
    assert not doc["cases"] and not doc["failed"] and len(doc["skipped"]) == 4 and not doc["static_compile"]["ok"]
