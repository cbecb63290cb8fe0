"""benchmarks/memory_bound.py: the dry run end to end on the ops warpsmith has (CPU, interpreter,
correctness against an fp32 reference), the skip path for the ops it lacks, the suite, and the
measured path (timings, GB/s, copy fractions, speedups, verdicts, deadline, interrupt) with stand-ins
for the GPU timer and for warpsmith's ops."""
from __future__ import annotations

import json
import os
import subprocess
import types
from pathlib import Path

import pytest
from bench_scripts import dry_run, fake_check, load
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]


bench = load("memory_bound")


def _present_ops() -> list[str]:
    import warpsmith.ops as wops

    return [op for op in bench.OPS if callable(getattr(wops, op, None))]


# ----------------------------------------------------------------------------------- the real dry run
@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    """One real dry run, as a user types it: every op, the ones warpsmith lacks skipped (the static
    compile of the real plan is tested below on part of it: the whole takes minutes)."""
    out = tmp_path_factory.mktemp("mb_dry")
    return dry_run("memory_bound", out, timeout=300, args=("--no-static",))


def test_dry_run_json_structure(dry):
    out, doc, _ = dry
    for key in ("benchmark", "format", "date", "started", "wall_s", "complete", "interrupted", "dry_run", "timing_kind",
                "device", "versions", "settings", "copy_bandwidth", "ops", "liger", "cases", "skipped", "summary"):
        assert key in doc, key
    assert doc["benchmark"] == "memory_bound" and doc["dry_run"] is True and doc["timing_kind"] == "none"
    assert doc["device"]["measured"] is False and doc["copy_bandwidth"] == {} and doc["interrupted"] is False
    assert {"torch", "triton", "warpsmith", "driver", "liger_kernel"} <= set(doc["versions"])
    assert doc["settings"]["impls"] == ["warpsmith", "eager"] and doc["settings"]["tiny"] is True
    assert set(doc["ops"]) == set(bench.OPS)
    assert Path(doc["settings"]["db"]).parent == out and not (out / "must-not-be-used.db").exists()
    for key in ("copy_bandwidth", "faster", "flce_memory", "rules"):
        assert key in doc["summary"]
    assert doc["summary"]["flce_memory"]["met"] is None  # a dry run judges no target
    assert all(e["met"] is None for e in doc["summary"]["copy_bandwidth"].values())


def test_dry_run_each_present_op_is_correct(dry):
    _, doc, _ = dry
    present = _present_ops()
    assert [op for op in bench.OPS if doc["ops"][op]["available"]] == present
    tiny = bench.suite(tiny=True)
    for op in present:
        cases = [c for c in doc["cases"] if c["op"] == op]
        assert len(cases) == sum(c.op == op for c in tiny) >= 2, op
        for c in cases:
            ws, eager = c["impls"]["warpsmith"], c["impls"]["eager"]
            assert c["status"] == "ok", (op, c["name"], c["error"], ws)
            assert ws["correct"] is True and 0 <= ws["rel_err"] <= ws["tolerance"], (op, c["name"], ws)
            assert eager["status"] == "ok" and eager["correct"] is True, (op, c["name"], eager)  # the reference is sane
            assert "fwd_ms" not in ws  # nothing timed in a dry run
            assert c["bytes"]["fwd"] > 0 and c["bytes"]["bwd"] > 0 and c["bytes_source"]
            # the public op dispatched warpsmith kernels (the custom-op path, not a fallback), and the
            # bytes are those problems' spec min_bytes (fused linear CE computes its gradients in the forward)
            assert ws["problems"]["fwd"] + ws["problems"]["bwd"], (op, c["name"])
            dispatched = "dispatched problems' spec min_bytes"
            assert c["bytes_source"]["fwd"] == dispatched, (op, c["bytes_source"])
            if op != "fused_linear_cross_entropy":
                assert c["bytes_source"]["bwd"] == dispatched, (op, c["bytes_source"])
    if "softmax" in present:  # x read, y written (forward); y, dy read, dx written (backward): bf16, 3 x 37
        sm = next(c for c in doc["cases"] if c["op"] == "softmax" and c["name"] == "tiny-37")
        assert sm["bytes"] == {"fwd": 2 * 3 * 37 * 2, "bwd": 3 * 3 * 37 * 2, "fwd+bwd": 5 * 3 * 37 * 2}
    assert doc["complete"] is (len(present) == len(bench.OPS))


def test_dry_run_skips_missing_ops_with_reasons(dry):
    _, doc, _ = dry
    missing = [op for op in bench.OPS if op not in _present_ops()]
    for op in missing:
        assert "not importable" in doc["ops"][op]["reason"]
        skipped = [s for s in doc["skipped"] if s["op"] == op]
        assert len(skipped) == sum(c.op == op for c in bench.suite(tiny=True)) and all(s["reason"] for s in skipped)
        assert not [c for c in doc["cases"] if c["op"] == op]


def test_dry_run_prints_table_last(dry):
    _, doc, stdout = dry
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    head = next(i for i, ln in enumerate(lines) if ln.startswith("op ") and "x compile" in ln)
    assert not any(ln.startswith("[") for ln in lines[head:])  # no progress line after the table
    assert "fused linear CE peak memory" in lines[-1] and "n/a" in lines[-1]
    body = lines[head + 2:]
    assert sum("correct (rel err" in ln for ln in body) == len(doc["cases"])
    assert sum("skipped" in ln for ln in body) >= len(doc["skipped"])


# ----------------------------------------------------------------------------------- stand-ins
def _fake_ops(broken: str | None = None, raising: str | None = None) -> types.SimpleNamespace:
    """warpsmith.ops as documented, computed in fp32 by PyTorch; ``broken`` names one that is wrong,
    ``raising`` one that fails."""
    def rms_norm(x, weight=None, eps=1e-6, residual=None):
        return F.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps).to(x.dtype)

    def layer_norm(x, weight=None, bias=None, eps=1e-5, residual=None):
        if raising == "layer_norm":
            raise RuntimeError("launch failed (simulated)")
        return F.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), eps).to(x.dtype)

    def softmax(x):
        y = torch.softmax(x.float(), -1)
        return (y * 1.5 if broken == "softmax" else y).to(x.dtype)

    def rope(q, k, cos, sin, positions=None, layout="neox", rotary_dim=None):
        c, s = torch.cat((cos, cos), -1).float(), torch.cat((sin, sin), -1).float()

        def rot(t):
            t, h = t.float(), t.shape[-1] // 2
            return t * c + torch.cat((-t[..., h:], t[..., :h]), -1) * s
        return rot(q).to(q.dtype), rot(k).to(k.dtype)

    def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        return F.cross_entropy(logits.float(), target).to(logits.dtype)

    def fused_linear_cross_entropy(hidden, weight, target, bias=None, ignore_index=-100, label_smoothing=0.0,
                                   reduction="mean"):
        return F.cross_entropy(hidden.float() @ weight.float().T, target).to(hidden.dtype)
    return types.SimpleNamespace(rms_norm=rms_norm, layer_norm=layer_norm, softmax=softmax, rope=rope,
                                 cross_entropy=cross_entropy, fused_linear_cross_entropy=fused_linear_cross_entropy)


class FakeTimer:
    """The GPU timer's interface; calls each function once and returns fixed times per impl."""
    MS = {"warpsmith": 1e-3, "eager": 3e-3, "compile": 1.5e-3, "liger": 0.8e-3}
    COPY_GBPS = 0.5  # tiny on purpose: the tiny cases' GB/s land near it

    def __init__(self, interrupt_at: int | None = None):
        self.calls, self.interrupt_at = 0, interrupt_at

    def fwd(self, impl, fn):
        self.calls += 1
        if self.interrupt_at is not None and self.calls >= self.interrupt_at:
            raise KeyboardInterrupt
        fn()
        return self.MS[impl]

    def bwd(self, impl, forward, backward):
        backward(forward())
        return 2 * self.MS[impl]

    def peak(self, impl, fn):
        fn()
        return (10 if impl == "warpsmith" else 100) * 2.0**20, 2.0**30

    def copy_gbps(self):
        return {"bytes": 2.0, "ms": 1.0, "gbps": self.COPY_GBPS}


def _run(monkeypatch, tmp_path, argv, timer, ops=None, **patch):
    ops = ops or _fake_ops()
    present = {op: None if hasattr(ops, op) else f"warpsmith.ops.{op} not importable yet (test)" for op in bench.OPS}
    monkeypatch.setattr(bench, "import_warpsmith_ops", lambda: (ops, present))
    for k, v in patch.items():
        monkeypatch.setattr(bench, k, v)
    assert bench.main(["--tiny", "--out", str(tmp_path), *argv], timer=timer) == 0
    return json.loads(next(tmp_path.glob("memory_bound_*.json")).read_text())


def test_measured_path_times_fractions_speedups_and_verdicts(tmp_path, monkeypatch, capsys):
    timer = FakeTimer()
    doc = _run(monkeypatch, tmp_path, ["--impls", "warpsmith,eager,liger", "--tune-budget", "0", "--ops",
                                      "rms_norm,layer_norm,softmax,cross_entropy,fused_linear_cross_entropy,swiglu"],
               timer, ops=_fake_ops(broken="softmax", raising="layer_norm"), FLCE_TARGET_VOCAB=100)
    assert doc["timing_kind"] == "measured" and doc["dry_run"] is False
    assert doc["copy_bandwidth"]["used_gbps"] == FakeTimer.COPY_GBPS
    assert doc["liger"]["available"] in (True, False)
    by = {(c["op"], c["name"]): c for c in doc["cases"]}
    rms = by[("rms_norm", "tiny-37")]
    assert rms["status"] == "ok" and rms["impls"]["eager"]["fwd_ms"] == 3e-3
    fwd = rms["directions"]["fwd"]
    assert fwd["speedup"]["eager"] == pytest.approx(3.0) and fwd["warpsmith_config"] == "default"
    assert fwd["gbps"] == pytest.approx(rms["bytes"]["fwd"] / 1e-3 / 1e6)
    assert fwd["copy_fraction"] == pytest.approx(fwd["gbps"] / FakeTimer.COPY_GBPS)
    assert rms["directions"]["bwd"]["speedup"]["eager"] == pytest.approx(3.0)
    if not doc["liger"]["available"]:
        assert rms["impls"]["liger"]["status"] == "unavailable" and rms["impls"]["liger"]["reason"]
    # a wrong kernel is timed but flagged, and fails its op's verdicts
    sm = by[("softmax", "tiny-37")]
    assert sm["status"] == "incorrect" and not sm["impls"]["warpsmith"]["correct"]
    assert doc["summary"]["faster"]["softmax"]["compile"]["incorrect"] == ["tiny-37", "tiny-300"]
    # a failing kernel: an error row (the baselines still ran), its op's verdicts fail
    ln = by[("layer_norm", "tiny-37")]
    assert ln["status"] == "error" and "simulated" in ln["error"] and ln["impls"]["eager"]["status"] == "ok"
    assert ln["impls"]["warpsmith"]["traceback"] and ln["directions"] == {}
    assert doc["summary"]["faster"]["layer_norm"]["liger"]["incorrect"] == ["tiny-37 (error)", "tiny-300 (error)"]
    # swiglu is not in the stand-in: skipped with the reason
    assert {s["op"] for s in doc["skipped"]} == {"swiglu"} and "not importable" in doc["skipped"][0]["reason"]
    # fused linear CE peak memory: 10 MiB / 100 MiB (tiny cases judge no target)
    mem = doc["summary"]["flce_memory"]
    assert mem["ratio"] == pytest.approx(0.1) and mem["met"] is None
    assert bench.summarize([r for r in doc["cases"] if r["op"] != "softmax"], tiny=False,
                           measured=True)["flce_memory"]["met"] is True
    flce = by[("fused_linear_cross_entropy", "tiny-100")]
    assert flce["flops"]["fwd"] == 2 * 5 * 32 * 100 and flce["directions"]["fwd+bwd"]["tflops"] > 0
    text = capsys.readouterr().out
    tail = text[text.rindex("op  "):]
    assert "INCORRECT" in tail and "3.00x" in tail and "skipped" in tail
    assert tail.strip().splitlines()[-1].startswith("  fused linear CE peak memory at V=100: 10 MiB vs unfused 100 MiB")
    assert "not evaluated: tiny cases" in tail


@pytest.mark.skipif("softmax" not in _present_ops(), reason="warpsmith.ops.softmax not there yet")
def test_tuned_pass_tunes_dispatched_problems_and_measures_again(tmp_path, monkeypatch, capsys):
    """With time left, the problems warpsmith dispatched are tuned into the run's DB, dispatch then
    picks the tuned configs, and warpsmith is measured again (here: predicted tuning, interpreter)."""
    import warpsmith.ops as wops
    monkeypatch.setenv("WARPSMITH_INTERPRET", "1")
    doc = _run(monkeypatch, tmp_path, ["--ops", "softmax", "--impls", "warpsmith,eager", "--tune-budget", "3",
                                      "--tune-time", "5"], FakeTimer(), ops=wops)
    case = doc["cases"][0]
    assert [p["problem"].split("[")[0] for p in case["tuned"]["problems"]] == ["softmax", "softmax_backward"]
    assert all(p["verified"] for p in case["tuned"]["problems"]), case["tuned"]
    res = case["tuned"]["result"]
    assert res["dispatched"] == "db" and res["correct"] and {p["source"] for p in res["problems"]["fwd"]} == {"db"}
    assert case["impls"]["warpsmith"]["problems"]["fwd"][0]["source"] == "default"  # the first pass: defaults
    assert case["directions"]["fwd"]["warpsmith_config"] == "tuned"
    assert Path(doc["settings"]["db"]).exists()


def test_summary_verdicts():
    def row(op, name, frac, sp, status="ok", judged=True):
        d = {"copy_fraction": frac, "speedup": {"eager": 2.0, "compile": sp, "liger": sp}}
        return {"op": op, "name": name, "status": status, "bw_judged": judged, "dims": {},
                "directions": {"fwd": d, "bwd": d, "fwd+bwd": d}}
    rows = [row("rms_norm", "a", 0.95, 1.2), row("rms_norm", "b", 0.91, 0.9), row("rms_norm", "c", 0.3, 0.5, judged=False),
            row("softmax", "a", 0.85, 1.5), row("cross_entropy", "a", 0.99, 1.1),
            row("layer_norm", "a", 0.99, 1.3, status="incorrect")]
    s = bench.summarize(rows, tiny=False, measured=True)
    bw = s["copy_bandwidth"]
    assert bw["rms_norm"]["met"] is True and bw["rms_norm"]["min_fraction"] == 0.91 and bw["rms_norm"]["counted"] == 4
    assert bw["softmax"]["met"] is False and bw["layer_norm"]["met"] is False  # incorrect fails its op
    f = s["faster"]
    assert f["rms_norm"]["compile"]["wins"] == 2 and f["rms_norm"]["compile"]["counted"] == 6
    assert f["rms_norm"]["compile"]["met"] is False  # geomean of 1.2, 0.9, 0.5 (twice each) < 1
    assert f["softmax"]["liger"]["met"] is True and f["cross_entropy"]["liger"]["counted"] == 1  # CE: fwd+bwd only
    assert bench.summarize(rows, tiny=True, measured=True)["faster"]["softmax"]["liger"]["met"] is None
    assert bench.summarize(rows, tiny=False, measured=False)["copy_bandwidth"]["rms_norm"]["met"] is None


def test_total_time_skips_everything_and_still_reports(tmp_path, monkeypatch, capsys):
    doc = _run(monkeypatch, tmp_path, ["--total-time", "1e-9", "--impls", "warpsmith,eager"], FakeTimer())
    assert doc["cases"] == [] and doc["complete"] is False
    assert {s["reason"] for s in doc["skipped"] if "not importable" not in s["reason"]} == {"--total-time 1e-09 s reached"}
    assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith("  fused linear CE")


def test_interrupt_keeps_what_ran(tmp_path, monkeypatch, capsys):
    handler, before_db = __import__("signal").getsignal(__import__("signal").SIGINT), os.environ.get("WARPSMITH_DB")
    timer = FakeTimer(interrupt_at=6)  # copy (1), then 2 fwd timings per impl: inside the second case
    doc = _run(monkeypatch, tmp_path, ["--impls", "warpsmith,eager", "--ops", "rms_norm,softmax", "--tune-budget", "0"], timer)
    assert __import__("signal").getsignal(__import__("signal").SIGINT) == handler  # restored
    assert os.environ.get("WARPSMITH_DB") == before_db  # the run's own DB does not leak
    assert doc["interrupted"] is True and doc["complete"] is False
    assert [c["name"] for c in doc["cases"]] == ["tiny-37"]
    assert {s["reason"] for s in doc["skipped"]} == {"interrupted"} and len(doc["skipped"]) == 3
    assert "interrupted: the remaining cases are skipped" in capsys.readouterr().out


def test_suite_shapes():
    cases = bench.suite()
    assert {c.op for c in cases} == set(bench.OPS)
    for c in cases:
        if c.op not in ("rope", "fused_linear_cross_entropy"):
            assert c.rows * c.N >= bench.ELEMENTS, c  # the main input holds at least 64 Mi elements
    norms = sorted(c.N for c in cases if c.op == "rms_norm")
    assert norms[0] == 1024 and 4096 in norms and 8192 in norms
    assert sorted(c.N for c in cases if c.op == "softmax") == [1024, 4096, 16384, 65536, 262144]
    assert sorted(c.N for c in cases if c.op == "cross_entropy") == [32000, 128256, 256000]
    flce = [c for c in cases if c.op == "fused_linear_cross_entropy" and c.N == bench.FLCE_TARGET_VOCAB]
    assert flce and flce[0].d == {"M": 8192, "H": 4096, "V": 128256} and flce[0].tier == 1
    assert {c.op for c in cases if c.tier == 1} == set(bench.OPS)  # every op has a first-tier case
    assert all(c.bw_judged == (c.N >= 4096) for c in cases if c.op in ("rms_norm", "softmax", "cross_entropy"))
    assert bench.OPDEFS["log_softmax"].liger is None and all(bench.OPDEFS[o].liger for o in bench.OPS if o != "log_softmax")


def test_run_h200_suite_selector(tmp_path):
    script = REPO / "benchmarks" / "run_h200.sh"
    for argv in (["bogus"], ["all", "--dtypes", "bfloat16"]):
        p = subprocess.run(["bash", str(script), *argv], capture_output=True, text=True, timeout=30,
                           env={**os.environ, "OUT": str(tmp_path)})
        assert p.returncode == 2 and "run_h200.sh" in p.stderr, (argv, p.stderr)
    text = script.read_text()
    assert "script=memory_bound" in text and "script=matmul" in text and "benchmarks/$script.py" in text
    assert "benchmarks/unpack_wheel.py" in text and "benchmarks/wheels" in text and "pip install" not in text


# ----------------------------------------------------------------------------------- the static step
def test_trace_finds_what_the_real_call_dispatched(dry):
    """trace_problems (no kernel launched) finds exactly the problems the dry run's real warpsmith call
    dispatched, forward then backward, for every tiny case (but the GEMMs fused linear CE's launcher
    dispatches inside its launch: compiled by that launcher in the static step)."""
    import warpsmith.ops as wops

    _, doc, _ = dry
    assert doc["static_compile"] == {"ok": True, "skipped": "--no-static"}
    tiny = {(c.op, c.name): c for c in bench.suite(tiny=True)}
    assert doc["cases"]
    for row in doc["cases"]:
        seen = row["impls"]["warpsmith"]["problems"]
        expected = [p["problem"] for p in seen["fwd"] + seen["bwd"]
                    if not (row["op"] == "fused_linear_cross_entropy" and p["op"] == "matmul")]
        traced = bench.trace_problems(tiny[(row["op"], row["name"])], wops, torch.bfloat16, "cpu")
        assert [p.describe() for p in traced] == expected, row["name"]


@pytest.mark.slow  # the plan's problems, built at the real sizes; test_dry_run_static_step_end_to_end builds two of them
@pytest.mark.skipif(len(_present_ops()) < len(bench.OPS), reason="warpsmith.ops lacks some ops")
def test_static_problems_of_the_real_plan():
    """Every case of the real suite: its op forward and backward at the case's sizes (fused linear CE
    in bf16 computes its gradients in the forward, and launches its GEMMs itself)."""
    import warpsmith.ops as wops

    cases = bench.suite()
    probs, errors = bench.static_problems(cases, wops, torch.bfloat16, "cpu")
    assert errors == []
    ops = {p["op"] for p in probs}
    assert ops == {o for o in bench.OPS if o != "fused_linear_cross_entropy"} | {
        f"{o}_backward" for o in bench.OPS if o != "fused_linear_cross_entropy"} | {"fused_linear_cross_entropy"}
    assert all(p["dtype"] == "bfloat16" for p in probs) and len(probs) == 2 * len(cases) - 2
    by = {(p["op"], tuple(sorted(p["shape"].items()))): p for p in probs}
    flce = by[("fused_linear_cross_entropy", (("H", 4096), ("M", 8192), ("V", 128256)))]
    assert flce["attrs"]["grads"] == "all" and flce["attrs"]["reduction"] == "mean"
    geglu = [p for p in probs if p["op"] == "geglu_backward"]
    assert len(geglu) == 3 and all(p["attrs"]["approximate"] == "tanh" for p in geglu)
    rope = next(p for p in probs if p["op"] == "rope_backward" and p["shape"]["S"] == 8192)
    assert rope["shape"] == {"B": 1, "S": 8192, "Hq": 64, "Hk": 8, "R2": 64, "P": 8192}
    json.dumps(probs)  # what check_problems writes for the compile-only process


@pytest.mark.skipif(not {"rms_norm", "cross_entropy"} <= set(_present_ops()), reason="warpsmith.ops lacks them")
def test_dry_run_static_step_end_to_end(tmp_path):
    """As a user types it: the tiny cases, then the real static step (compile-only, sm_90) on the real
    plan's first-tier RMSNorm (16384 x 4096) and cross-entropy (1024 x 128256) cases, forward and backward."""
    out, doc, stdout = dry_run("memory_bound", tmp_path, timeout=600,
                               args=("--ops", "rms_norm,cross_entropy", "--tiers", "1", "--static-sample", "0"))
    sec = doc["static_compile"]
    assert sec["ok"] is True and sec["exit_status"] == 0 and sec["failures"] == [] and sec["trace_errors"] == [], sec
    assert sec["target"] == "h200" and sec["arch"] == "sm_90" and sec["cases"] == 2 and sec["problems"] == 4
    assert sec["configs"] >= 4 and sec["kernels"] > 0
    report = json.loads((out / "gpucheck_memory_bound.json").read_text())
    assert report["ok"] and {r["problem"] for r in report["rows"]} == {
        "rms_norm[M=16384,N=4096] bfloat16 (eps=1e-06,residual=False,weight=True,weight_dtype=input)",
        "rms_norm_backward[M=16384,N=4096] bfloat16 (eps=1e-06,residual=False,weight=True,weight_dtype=input)",
        "cross_entropy[M=1024,V=128256] bfloat16 (ignore_index=-100,label_smoothing=0.0,reduction=mean)",
        "cross_entropy_backward[M=1024,V=128256] bfloat16 (ignore_index=-100,label_smoothing=0.0,reduction=mean)"}
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    summary = next(i for i, ln in enumerate(lines) if ln.startswith("static compile for h200"))
    head = next(i for i, ln in enumerate(lines) if ln.startswith("op ") and "x compile" in ln)
    assert summary < head and "ok:" in lines[summary]


@pytest.mark.skipif("softmax" not in _present_ops(), reason="warpsmith.ops.softmax not there yet")
def test_static_failure_fails_the_dry_run(tmp_path, monkeypatch, capsys):
    """A static failure (or a case whose call fails) makes the dry run exit 1; the JSON and table are still written."""
    import warpsmith.gpucheck

    calls: list = []
    monkeypatch.setenv("WARPSMITH_INTERPRET", "1")
    monkeypatch.setattr(warpsmith.gpucheck, "check_problems", fake_check(1, calls, failing="softmax_backward"))
    argv = ["--dry-run", "--ops", "softmax", "--tiers", "1,2", "--out", str(tmp_path)]
    assert bench.main([*argv, "--static-sample", "2", "--static-target", "b200"]) == 1
    real = [c for c in bench.suite(("softmax",)) if c.tier in (1, 2)]
    assert [(p["op"], p["shape"]) for p in calls[0]["problems"]] == [
        (op, c.d) for c in real for op in ("softmax", "softmax_backward")]
    assert (calls[0]["target"], calls[0]["sample"]) == ("b200", 2)
    doc = json.loads(next(tmp_path.glob("memory_bound_*.json")).read_text())
    sec = doc["static_compile"]
    assert sec["ok"] is False and sec["failed"] == len(real) and sec["cases"] == len(real)
    assert {f["op"] for f in sec["failures"]} == {"softmax_backward"}
    assert [c["status"] for c in doc["cases"]] == ["ok", "ok"]  # the tiny cases ran and were written
    text = capsys.readouterr().out
    assert "static compile for b200 (sm_100): FAILED" in text
    assert "fused linear CE peak memory" in text.rstrip().splitlines()[-1]  # the table is still last

    # a case whose warpsmith call fails while traced fails the step, the other cases are still compiled
    def boom(*a, **k):
        raise RuntimeError("simulated")
    monkeypatch.setattr(warpsmith.gpucheck, "check_problems", fake_check(0, calls))
    monkeypatch.setitem(bench.OPDEFS, "rms_norm", bench.OPDEFS["rms_norm"].__class__(
        *(boom if f == "warpsmith" else getattr(bench.OPDEFS["rms_norm"], f)
          for f in bench.OPDEFS["rms_norm"].__dataclass_fields__)))
    assert bench.main(["--dry-run", "--ops", "softmax,rms_norm", "--tiers", "1", "--out", str(tmp_path),
                       "--impls", "warpsmith"]) == 1
    sec = json.loads(next(tmp_path.glob("memory_bound_*.json")).read_text())["static_compile"]
    assert sec["ok"] is False and [e["case"] for e in sec["trace_errors"]] == ["rms_norm M=16384 N=4096"]
    assert "simulated" in sec["trace_errors"][0]["error"] and sec["problems"] == 2 and sec["failed"] == 0

    # --no-static: no compile-only process
    n = len(calls)
    assert bench.main([*argv, "--no-static"]) == 0 and len(calls) == n
