"""benchmarks/comm.py --dry-run: a 2-process CPU world (gloo), every collective at tiny sizes, both
paths, the nccl-tests columns and the model's prediction in one JSON."""
from __future__ import annotations

import pytest
from bench_scripts import dry_run


def test_comm_dry_run(tmp_path):
    _, doc, stdout = dry_run("comm", tmp_path, timeout=300)
    assert doc["dry_run"] is True and doc["reference_backend"] == "gloo"
    rows = doc["rows"]
    assert sorted({r["collective"] for r in rows}) == ["all_gather", "all_reduce", "reduce_scatter"]
    for r in rows:
        assert r["warpsmith_path"] == "symmetric buffers", r
        factor = (2 if r["collective"] == "all_reduce" else 1) * (r["world"] - 1) / r["world"]
        assert r["warpsmith_busbw_GBps"] == pytest.approx(r["warpsmith_algbw_GBps"] * factor)
        assert r["torch_busbw_GBps"] == pytest.approx(r["torch_algbw_GBps"] * factor)
        assert r["warpsmith_us"] > 0 and r["torch_us"] > 0 and r["predicted_us"] > 0
    assert "busbw" in stdout and "not bandwidth" in doc["device"]
    single = doc["single_device"]
    assert [(r["peers"], r["rows"], r["H"]) for r in single] == [(2, 3, 40), (4, 2, 65)]
    for r in single:  # bf16: the fused kernel rounds as the unfused sequence does (RMSNorm's sum order aside)
        assert r["max_abs_diff_s"] == 0.0, r
        assert r["max_abs_diff_y"] <= 2 ** -6, r
