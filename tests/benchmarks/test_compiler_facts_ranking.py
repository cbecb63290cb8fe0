"""The compiler-facts ranking benchmark runs (quick mode: two small problems compiled for sm_90 with
no GPU) and its report is consistent; its rank statistics are right."""
import json
import math

import pytest

from bench_scripts import load


@pytest.fixture(scope="module")
def bench():
    return load("compiler_facts_ranking")


def test_kendall_and_spearman(bench):
    assert bench.kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert bench.kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # the values scipy.stats.kendalltau (tau-b) gives, ties in one and in both rankings
    assert bench.kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.912870929175277)
    assert bench.kendall_tau_b([3, 1, 2, 2, 5], [1, 1, 2, 3, 4]) == pytest.approx(0.4444444444444444)
    assert bench.kendall_tau_b([1, 1, 1], [1, 2, 3]) is None and bench.kendall_tau_b([1], [1]) is None
    # scipy.stats.spearmanr's value
    assert bench.spearman_rho([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(0.8207826816681233)
    assert bench.spearman_rho([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert bench.spearman_rho([2, 2], [1, 2]) is None


def test_quick_run_reports_a_consistent_predicted_ranking(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WARPSMITH_FACTS_DIR", str(tmp_path / "facts"))
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    doc = json.loads(next(tmp_path.glob("compiler_facts_ranking_h200_quick_*.json")).read_text())
    assert doc["timing_kind"] == "predicted" and doc["arch"] == "sm_90" and doc["machine"]["gpu"] is None
    assert "Nothing was measured on a GPU" in doc["statement"]
    assert {"triton", "torch"} <= set(doc["versions"]) and doc["date"] and doc["machine"]["cpu"]
    assert doc["cache_entries_at_start"] == 0 and doc["compiled"] > 0
    assert [p["group"] for p in doc["problems"]] == ["gemm", "memory"]
    for p in doc["problems"]:
        t, k = p["topk"], doc["settings"]["k"]
        assert t["k"] == len(t["rows"]) <= k and t["rows"]
        assert t["rejected"] == sum(t["rejected_by_reason"].values()) <= t["k"]
        assert t["survivors"] + t["rejected"] + t["no_facts"] + t["invalid"] == t["k"]
        assert t["no_facts"] == 0 and t["invalid"] == 0  # every top-K config compiled
        assert [r["est_position"] for r in t["rows"]] == list(range(1, t["k"] + 1))
        assert all(a["est_ms"] <= b["est_ms"] for a, b in zip(t["rows"], t["rows"][1:]))
        assert t["est_top1"] == t["rows"][0] and t["est_top1_survives"] == (t["rows"][0]["status"] == "ok")
        surv = [r for r in t["rows"] if r["status"] == "ok"]
        assert len(surv) == t["survivors"]
        for r in surv:
            assert r["facts_ms"] > 0 and r["kernels"] and r["kernels"][0]["spill_bytes"] == 0
        for r in t["rows"]:
            assert (r["status"] == "ok") == (r["reason"] is None)
        if surv:
            best = min(surv, key=lambda r: (r["facts_ms"], r["est_position"]))
            assert t["facts_top1"] == best and best["facts_rank"] == 1
            assert t["facts_top1_over_est_top1"] == pytest.approx(best["facts_ms"] / t["rows"][0]["est_ms"])
        for stat in ("kendall_tau_b", "spearman_rho"):
            assert t[stat] is None or -1 - 1e-9 <= t[stat] <= 1 + 1e-9
        sp = p["spread"]
        assert sp["points"] == len(sp["rows"]) <= doc["settings"]["spread"]
        assert sp["survivors"] + sum(sp["rejected_by_reason"].values()) + sp["no_facts"] <= sp["points"]
        assert all(t["k"] < r["est_position"] <= p["valid_points"] for r in sp["rows"])
        assert all(r["est_rank"] <= r["est_position"] for r in t["rows"] + sp["rows"])  # ties share the best rank
        best = p["best_seen"]
        assert best["facts_ms"] <= min(r["facts_ms"] for r in t["rows"] + sp["rows"] if r["status"] == "ok")
        assert best["est_top1_facts_over_best"] is None or best["est_top1_facts_over_best"] >= 1 - 1e-12
        s = p["search"]
        assert 1 <= s["budget"] <= p["space_size"] and len(s["runs"]) == doc["settings"]["seeds"]
        for run in s["runs"]:
            e, f = run["estimate_search"], run["facts_search"]
            assert e["evaluations"] <= s["budget"] and f["evaluations"] <= s["budget"]
            assert sum(f["skipped_by_reason"].values()) <= f["skipped_by_compiler"] <= f["evaluations"]
            assert best["facts_ms"] <= f["facts_ms"]
            assert math.isfinite(f["facts_ms"]) and f["kernels"][0]["spill_bytes"] == 0
            assert run["verdict"] in ("facts better", "same", "estimate better", "estimate winner rejected")
            assert (run["verdict"] == "estimate winner rejected") == (e["status"] in ("spills", "dead_num_stages"))
            if e["status"] == "ok":
                better = f["facts_ms"] < e["facts_ms"] * (1 - 1e-9)
                assert (run["verdict"] == "facts better") == better
    out = capsys.readouterr().out
    assert "PREDICTED" in out and "tiny M=33" in out and "softmax M=64" in out
