"""benchmarks/matmul.py: the dry run end to end (CPU, interpreter, predicted timings), the suite,
and the measured path (ratios, geomeans, targets, failures, skips) with a stand-in for tune()."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bench_scripts import dry_run, fake_check, load

bench = load("matmul")


@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    """One real dry run, as a user types it (tiny shapes, real tune(), Triton interpreter); the static
    compile of the real suite is tested below on part of it (the whole takes minutes)."""
    out = tmp_path_factory.mktemp("bench_dry")
    return dry_run("matmul", out, timeout=120, args=("--no-static",))


def test_dry_run_json_structure(dry):
    out, doc, _ = dry
    for key in ("benchmark", "date", "dry_run", "device", "target", "timing_kind", "versions", "settings", "rows",
                "summary", "skipped"):
        assert key in doc, key
    assert doc["benchmark"] == "matmul" and doc["dry_run"] is True and doc["complete"] is True
    assert doc["timing_kind"] == "predicted" and doc["device"]["measured"] is False
    assert doc["skipped"] == []
    assert {"torch", "triton", "warpsmith", "driver"} <= set(doc["versions"])
    assert doc["settings"]["budget"] == bench.DRY_BUDGET and doc["settings"]["finalists"] == bench.DRY_FINALISTS
    assert Path(doc["settings"]["db"]).parent == out and Path(doc["settings"]["db"]).exists()
    assert not (out / "must-not-be-used.db").exists()  # never the default (user's) DB
    assert len(doc["rows"]) == len(bench.DRY_SUITE) * 2  # bf16 and fp16
    assert doc["static_compile"] == {"ok": True, "skipped": "--no-static"}
    assert not (out / "gpucheck_matmul.json").exists()


def test_dry_run_rows_are_verified_predictions(dry):
    _, doc, _ = dry
    assert {(r["dtype"], r["group"]) for r in doc["rows"]} == {
        (d, g) for d in ("bfloat16", "float16") for g in ("llm", "skinny_odd")}
    for r in doc["rows"]:
        assert r["status"] == "ok" and r["verified"] is True, r
        assert r["timing_kind"] == "predicted"
        assert r["variant"] and r["config"] and r["time_ms"] > 0 and math.isfinite(r["time_ms"])
        assert r["baseline_ms"] is None and r["speedup"] is None  # no measured baseline without a GPU
        assert r["checks"] and not any(s.startswith("failed") for s in r["checks"].values())
        assert r["seconds"] >= 0
    for e in doc["summary"]["geomeans"]:
        assert e["geomean"] is None and e["met"] is None and e["counted"] == 0


def test_dry_run_prints_table_last(dry):
    _, doc, stdout = dry
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    head = next(i for i, ln in enumerate(lines) if ln.startswith("group ") and "ratio" in ln)
    assert not any(ln.startswith("[") for ln in lines[head:])  # no progress line after the table
    table = lines[head + 2: head + 2 + len(doc["rows"])]
    assert all("n/a (predicted)" in ln and ln.rstrip().split()[-2] == "yes" for ln in table), table
    tail = lines[-4:]
    assert [ln.split()[:2] for ln in tail] == [["llm", "bfloat16"], ["llm", "float16"], ["skinny_odd", "bfloat16"],
                                               ["skinny_odd", "float16"]]
    assert all("not evaluated" in ln for ln in tail)


def test_suite_is_the_llama3_projections_and_odd_shapes():
    cases = bench.suite()
    llm = [c for c in cases if c.group == "llm"]
    odd = [c for c in cases if c.group == "skinny_odd"]
    assert len(llm) == 2 * 4 * 4 and 6 <= len(odd) <= 10
    nk = {c.name: (c.N, c.K) for c in llm}
    assert nk == {
        "llama3-8b.qkv": (6144, 4096), "llama3-8b.o": (4096, 4096), "llama3-8b.gate_up": (28672, 4096),
        "llama3-8b.down": (4096, 14336), "llama3-70b.qkv": (10240, 8192), "llama3-70b.o": (8192, 8192),
        "llama3-70b.gate_up": (57344, 8192), "llama3-70b.down": (8192, 28672)}
    assert sorted({c.M for c in llm}) == [1, 16, 128, 4096]
    assert all(min(c.M, c.N) <= 64 or c.M % 16 or c.N % 16 or c.K % 16 for c in odd)  # skinny, or an odd size
    assert bench.suite(["skinny_odd"]) == odd


def _fake_tune(calls):
    """tune() as on a GPU: measured times, a failing verification, a crash, by shape."""
    from warpsmith.errors import VerificationError
    from warpsmith.measure import Score
    from warpsmith.tune import TuneResult
    from warpsmith.targets import get_target
    from warpsmith.verify import Certificate, Check

    def fake(problem, **kw):
        calls.append((dict(problem.shape), problem.dtype_name))
        M, t = problem.shape["M"], get_target("h200")
        s = Score("splitk", {"BLOCK_M": 16}, predicted_ms=0.01, measured_ms=0.010)
        cert = Certificate("matmul", "splitk", {}, {}, [], "h200", "x", True, {}, checks=[Check("error_contract", "tested(4 trials)")])
        if M == 3:
            res = TuneResult(problem, t, "measured", "evolutionary", 0, [s], 6, 1.0, baseline_ms=0.02)
            raise VerificationError("no finalist passed", res)
        if M == 17 and problem.dtype_name == "float16":
            raise RuntimeError("CUDA out of memory (simulated)")
        base = 0.015 if M == 1 else 0.008  # 1.5x and 0.8x
        return TuneResult(problem, t, "measured", "evolutionary", 0, [s], 6, 1.0, winner=s, certificate=cert,
                          baseline_ms=base)
    return fake


def test_measured_path_ratios_failures_and_targets(tmp_path, monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(bench, "tune", _fake_tune(calls))
    assert bench.main(["--dry-run", "--out", str(tmp_path), "--no-static"]) == 0
    doc = json.loads(next(tmp_path.glob("matmul_*.json")).read_text())
    assert len(calls) == 6 and doc["complete"]
    by = {(r["name"], r["dtype"]): r for r in doc["rows"]}
    ok = by[("tiny-decode", "bfloat16")]
    assert ok["status"] == "ok" and ok["verified"] and ok["speedup"] == pytest.approx(1.5)
    bad = by[("tiny-odd", "bfloat16")]
    assert bad["status"] == "unverified" and not bad["verified"] and bad["speedup"] is None
    assert bad["baseline_ms"] == 0.02 and bad["best_unverified"]["variant"] == "splitk"
    crash = by[("tiny-prefill", "float16")]
    assert crash["status"] == "error" and "out of memory" in crash["error"] and crash["traceback"]
    g = {(e["group"], e["dtype"]): e for e in doc["summary"]["geomeans"]}
    assert g[("skinny_odd", "bfloat16")]["geomean"] == pytest.approx(1.5)  # only the verified row counts
    assert g[("skinny_odd", "bfloat16")]["counted"] == 1 and not g[("skinny_odd", "bfloat16")]["complete"]
    assert g[("llm", "bfloat16")]["geomean"] == pytest.approx(0.8) and g[("llm", "float16")]["geomean"] is None
    assert all(e["met"] is None for e in g.values())  # dry run: tiny shapes judge no target
    text = capsys.readouterr().out
    assert "1.500x" in text and "0.800x" in text and "failed" in text and "NO (error)" in text

    # The same rows outside a dry run are judged against the targets.
    s = bench.summarize(doc["rows"], ["llm", "skinny_odd"], ["bfloat16", "float16"], {}, dry_run=False)
    met = s["targets_met"]
    assert met["llm/bfloat16"] is False and met["skinny_odd/bfloat16"] is True and met["llm/float16"] is None


def test_total_time_skips_and_reports(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "tune", lambda *a, **k: pytest.fail("nothing should run"))
    assert bench.main(["--dry-run", "--out", str(tmp_path), "--total-time", "1e-9", "--dtypes", "bf16", "--no-static"]) == 0
    doc = json.loads(next(tmp_path.glob("matmul_*.json")).read_text())
    assert doc["rows"] == [] and len(doc["skipped"]) == len(bench.DRY_SUITE) and doc["complete"] is False
    assert all("total-time" in s["reason"] for s in doc["skipped"])
    assert capsys.readouterr().out.count("skipped") >= 2 * len(bench.DRY_SUITE)  # progress lines and table


def test_estimate_scales_with_size():
    small, big = bench.Case("llm", "a", 1, 100, 100), bench.Case("llm", "b", 1, 1000, 1000)
    assert bench.estimate_seconds(big, []) == 0.0
    done = [(small, {"seconds": 2.0}), (bench.Case("llm", "c", 1, 10, 10), {"seconds": 1.0})]
    assert bench.estimate_seconds(big, done) == pytest.approx(1.0 + 1.0 * big.elements / small.elements)
    assert bench.estimate_seconds(small, done) == pytest.approx(2.0)


def test_short_total_time_leaves_every_dtype_time(tmp_path, monkeypatch):
    """Shapes run cheapest first, each in both dtypes: a --total-time that fits two tunings runs the
    cheapest shape in bf16 and fp16 (run dtype by dtype, it would run two bf16 shapes and no fp16)."""
    clock, calls = [0.0], []

    def fake_tune(problem, **kw):  # 10 s of a fake clock per shape
        calls.append((problem.shape["M"], problem.dtype_name))
        clock[0] += 10.0
        return _fake_tune([])(problem, **kw)

    monkeypatch.setattr(bench, "tune", fake_tune)
    monkeypatch.setattr(bench, "time", type("FakeTime", (), {"perf_counter": staticmethod(lambda: clock[0])}))
    assert bench.main(["--dry-run", "--out", str(tmp_path), "--total-time", "25", "--no-static"]) == 0
    cheapest = min(bench.suite(dry_run=True), key=lambda c: c.elements)
    assert calls == [(cheapest.M, "bfloat16"), (cheapest.M, "float16")]
    doc = json.loads(next(tmp_path.glob("matmul_*.json")).read_text())
    assert {r["dtype"] for r in doc["rows"]} == {"bfloat16", "float16"}
    assert len(doc["skipped"]) == 2 * len(bench.DRY_SUITE) - 2
    assert doc["settings"]["order"] == "cheapest shape first, each in every dtype"


# ----------------------------------------------------------------------------------- the static step
def test_static_problems_are_the_real_suite():
    probs = bench.static_problems(["llm", "skinny_odd"], ["bfloat16", "float16"])
    cases = bench.suite()
    assert len(probs) == 2 * len(cases)
    assert {(tuple(sorted(p["shape"].items())), p["dtype"]) for p in probs} == {
        (tuple(sorted(c.shape().items())), d) for c in cases for d in ("bfloat16", "float16")}
    assert {p["op"] for p in probs} == {"matmul"} and all(p["attrs"] == bench.ATTRS for p in probs)
    big = max(probs, key=lambda p: p["shape"]["N"] * p["shape"]["K"])
    assert (big["shape"]["N"], big["shape"]["K"]) == (57344, 8192)  # Llama-3-70B gate_up, as the real run tunes it
    assert [p["dtype"] for p in bench.static_problems(["skinny_odd"], ["float16"])] == ["float16"] * 8


@pytest.mark.slow  # the static step's path runs end to end in test_dry_run_static_step_end_to_end; CI's gpucheck compiles matmul for sm_90
def test_static_step_compiles_real_llm_shapes(tmp_path):
    """The real static step (compile-only process, sm_90) on Llama-3-8B qkv and o projections of the
    suite, M = 1 included (its tiled default spilled under Triton 3.9 before it took 8 warps)."""
    from bench_common import static_compile

    probs = [p for p in bench.static_problems(["llm"], ["bfloat16"])
             if p["shape"]["K"] == 4096 and p["shape"]["N"] in (4096, 6144)]
    assert len(probs) == 8
    sec = static_compile(probs, "h200", 0, tmp_path / "gpucheck.json")
    assert sec["ok"] is True, sec["failures"]
    assert sec["configs"] >= len(probs) * 2 and sec["kernels"] >= 3 and sec["failed"] == 0 and sec["arch"] == "sm_90"
    report = json.loads((tmp_path / "gpucheck.json").read_text())
    assert report["ok"] is True and {r["problem"].split("[")[0] for r in report["rows"]} == {"matmul"}


def test_dry_run_static_step_end_to_end(tmp_path):
    """As a user types it: the tiny shapes, then the static compile of the real skinny/odd suite in bf16."""
    out, doc, stdout = dry_run("matmul", tmp_path, timeout=600,
                               args=("--groups", "skinny_odd", "--dtypes", "bf16", "--static-sample", "0"))
    sec = doc["static_compile"]
    assert sec["ok"] is True and sec["exit_status"] == 0 and sec["failures"] == [], sec
    assert sec["target"] == "h200" and sec["arch"] == "sm_90" and sec["sample"] == 0
    assert sec["problems"] == len(bench.suite(["skinny_odd"])) and sec["configs"] >= sec["problems"] and sec["kernels"] > 0
    assert Path(sec["report"]) == out / "gpucheck_matmul.json" and json.loads(Path(sec["report"]).read_text())["ok"]
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    summary = next(i for i, ln in enumerate(lines) if ln.startswith("static compile for h200"))
    head = next(i for i, ln in enumerate(lines) if ln.startswith("group ") and "ratio" in ln)
    assert summary < head and "ok:" in lines[summary] and "configs compiled" in lines[summary]


def test_static_failure_fails_the_dry_run(tmp_path, monkeypatch, capsys):
    """A static failure: exit 1, the JSON and the table still written, the failure listed."""
    import warpsmith.gpucheck

    calls: list = []
    monkeypatch.setattr(bench, "tune", _fake_tune([]))
    monkeypatch.setattr(warpsmith.gpucheck, "check_problems", fake_check(1, calls, failing="matmul"))
    assert bench.main(["--dry-run", "--out", str(tmp_path), "--groups", "skinny_odd", "--static-sample", "3",
                       "--static-target", "h100"]) == 1
    assert calls[0]["problems"] == bench.static_problems(["skinny_odd"], ["bfloat16", "float16"])
    assert (calls[0]["target"], calls[0]["sample"], calls[0]["json_out"]) == ("h100", 3, tmp_path / "gpucheck_matmul.json")
    doc = json.loads(next(tmp_path.glob("matmul_*.json")).read_text())
    sec = doc["static_compile"]
    assert sec["ok"] is False and sec["exit_status"] == 1 and sec["failed"] == sec["problems"] == 16
    assert sec["failures"][0]["errors"] == ["CompilationError on the first launch: simulated"]
    assert len(doc["rows"]) == 4  # the tiny shapes ran and were written
    text = capsys.readouterr().out
    assert "static compile for h100 (sm_90): FAILED" in text
    assert text.rstrip().splitlines()[-1].split()[:2] == ["skinny_odd", "float16"]  # the table is still last

    # no report (the compile-only process died), or it could not start: failures too
    for check in (fake_check(1, calls, report=False), lambda *a, **k: (_ for _ in ()).throw(OSError("no python"))):
        monkeypatch.setattr(warpsmith.gpucheck, "check_problems", check)
        assert bench.main(["--dry-run", "--out", str(tmp_path), "--groups", "skinny_odd", "--dtypes", "bf16"]) == 1
        sec = json.loads(next(tmp_path.glob("matmul_*.json")).read_text())["static_compile"]
        assert sec["ok"] is False and sec["error"] and sec["report"] is None

    # a clean report passes; --no-static skips the step
    monkeypatch.setattr(warpsmith.gpucheck, "check_problems", fake_check(0, calls))
    assert bench.main(["--dry-run", "--out", str(tmp_path), "--groups", "skinny_odd", "--dtypes", "bf16"]) == 0
    sec = json.loads(next(tmp_path.glob("matmul_*.json")).read_text())["static_compile"]
    assert sec["ok"] is True and sec["sample"] == bench.STATIC_SAMPLE and sec["target"] == "h200" and sec["configs"] == 8
    n = len(calls)
    assert bench.main(["--dry-run", "--out", str(tmp_path), "--groups", "skinny_odd", "--no-static"]) == 0
    assert len(calls) == n
