"""benchmarks/attention_decode.py: the dry run (CPU, interpreter, correctness), the real suite's problems
(valid for the variant on the device's GPU), and the GB/s, copy-fraction and verdict arithmetic."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "attention_decode.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("attention_decode_bench", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_checks_every_kind_and_writes_its_json(bench, tmp_path):
    assert bench.main(["--dry-run", "--no-static", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "attention_decode_dry.json").read_text())
    assert doc["dry_run"] and not doc["incorrect"]
    assert {r["kind"] for r in doc["rows"]} == {"decode", "paged", "mla"}
    for r in doc["rows"]:
        ws = r["impls"]["warpsmith"]
        assert ws["correct"] and ws["rel_err"] < 3e-2, r


def test_the_real_suite_runs_with_defaults_on_the_h200(bench):
    import torch

    from warpsmith.ops import get_variant
    from warpsmith.targets import get_target

    h200 = get_target("h200")
    cases = bench.suite(tiny=False)
    assert {c.kind for c in cases} == {"decode", "paged", "mla"}
    for c in cases:
        p = bench.problem_of(c, torch.bfloat16)
        v = get_variant(c.op, "split_kv")
        assert v.rejection(p, v.default_config(p, h200), h200) is None, c.name
        assert len(bench.sweep_configs(c, torch.bfloat16, h200)) >= 2, c.name
        assert bench.min_bytes(c, torch.bfloat16) > 0


def test_fractions_speedups_and_verdicts(bench):
    row = {"impls": {"warpsmith": {"ms": 2.0, "gbps": 3000.0, "correct": True, "rel_err": 1e-3},
                     "warpsmith_best": {"ms": 1.5, "gbps": 4000.0},
                     "sdpa": {"ms": 3.0, "gbps": 2000.0}}, "kind": "decode", "name": "x"}
    bench.derive(row, 4400.0)
    assert row["impls"]["warpsmith_best"]["of_copy"] == pytest.approx(4000 / 4400)
    assert row["speedup_vs_sdpa"] == pytest.approx(2.0) and row["target_met"] is True
    slow = {"impls": {"warpsmith": {"ms": 2.0, "gbps": 1000.0, "correct": False}}, "kind": "paged", "name": "y"}
    bench.derive(slow, 4400.0)
    assert slow["target_met"] is False
    text = bench.table([row, slow], 4400.0)
    assert "MET" in text and "NOT MET" in text and "INCORRECT" in text
