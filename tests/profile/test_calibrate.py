"""Calibration: `benchmarks/calibrate.py --dry-run` (kernels compiled for sm_90 and their machine code
checked, tiny sizes interpreted), the peaks taken from results, and a calibration file overriding a
target's table (its peaks, and the provenance `warpsmith profile` prints). No GPU here: the results and
calibration files below are hand-written inputs, not measurements."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.core.errors import InvalidInputError
from warpsmith.profile import microbench
from warpsmith.targets import get_target
from warpsmith.targets.compiler import nvdisasm_path
from warpsmith.targets.compiler.sass import SassCounts

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(tmp_path: Path, only: str, monkeypatch) -> tuple[int, dict]:
    """``benchmarks/calibrate.py --dry-run`` in this process (its compile-only half in a child)."""
    if nvdisasm_path() is None:
        pytest.skip("nvdisasm not found: the compiled kernels' machine code cannot be checked")
    monkeypatch.setenv("WARPSMITH_FACTS_DIR", str(tmp_path / "facts"))
    spec = importlib.util.spec_from_file_location("calibrate_script", ROOT / "benchmarks" / "calibrate.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rc = script.main(["--dry-run", "--only", only, "--out", str(tmp_path)])
    files = list(tmp_path.glob("calibration_h200_*_dry.json"))
    return rc, json.loads(files[0].read_text()) if files else {}


def test_dry_run_compiles_for_sm90_and_interprets(tmp_path, monkeypatch):
    rc, doc = _dry_run(tmp_path, "copy", monkeypatch)
    assert rc == 0, doc
    assert doc["dry_run"] is True and "peaks" not in doc and "results" not in doc  # nothing measured
    compiled = {r["case"]: r for r in doc["compile_check"]}
    assert set(compiled) == {"copy 32-bit", "copy 64-bit", "copy 128-bit"}
    for bits in (32, 64, 128):  # one global load of the width the case names
        assert compiled[f"copy {bits}-bit"]["loads"] == {str(bits): 1} and compiled[f"copy {bits}-bit"]["arch"] == "sm_90"
    assert all(r["ok"] for r in doc["interpret_check"]) and len(doc["interpret_check"]) == 3


@pytest.mark.slow
def test_dry_run_of_every_kernel(tmp_path, monkeypatch):
    rc, doc = _dry_run(tmp_path, "copy,shared,mma,launch", monkeypatch)
    assert rc == 0, doc
    assert len(doc["compile_check"]) == len(microbench.cases()) and all(r["ok"] for r in doc["compile_check"])
    mma = {r["case"]: r["mma"] for r in doc["compile_check"] if r["case"].startswith("mma")}
    assert any("E4M3" in m for m in mma["mma fp8 128x128x64"]) and any("S8" in m for m in mma["mma int8 128x128x64"])
    interp = [r for r in doc["interpret_check"] if not r["case"].startswith("shared")]
    assert interp and all(r["ok"] for r in interp)


def test_interpreted_tensor_core_loop_computes_iters_times_the_product():
    rows = microbench.interpret_check(only=["mma"])
    assert [r["ok"] for r in rows] == [True] * len(microbench.MMA_TYPES) * len(microbench.MMA_TILES)


@pytest.mark.parametrize("case,counts,why", [
    ("copy 128-bit", SassCounts("k", global_loads={"32": 4}), "128-bit global load"),
    ("shared stride 1", SassCounts("k", loops=1), "shared-memory loads inside a loop"),
    ("mma bf16 128x128x64", SassCounts("k", loops=1, loop_mma={"HGMMA.64x128x16.F32": 4}), "bf16 tensor-core"),
])
def test_machine_code_check_rejects_what_the_case_does_not_measure(case, counts, why):
    (c,) = [c for c in microbench.cases() if c.name == case]
    assert why in microbench._sass_problem(c, counts)


def test_peaks_from_results():
    """Hand-written rows in the shape `microbench.run` returns (not measurements)."""
    rows = [{"kind": "copy", "case": "copy 32-bit", "bits": 32, "tbps": 3.1},
            {"kind": "copy", "case": "copy 128-bit", "bits": 128, "tbps": 4.2},
            {"kind": "shared", "case": "shared stride 1", "stride": 1, "ms": 0.5, "tbps": 30.0},
            {"kind": "shared", "case": "shared stride 32", "stride": 32, "ms": 16.0, "tbps": 0.94},
            {"kind": "mma", "case": "mma bf16 128x128x64", "math": "bf16", "tflops": 600.0},
            {"kind": "mma", "case": "mma bf16 128x256x64", "math": "bf16", "tflops": 700.0},
            {"kind": "mma", "case": "mma fp8 128x128x64", "math": "fp8", "error": "CompilationError: ..."},
            {"kind": "launch", "case": "launch", "us": 2.5, "graph_us": 1.1}]
    p = microbench.peaks(rows)
    assert p == {"hbm_tbps": 4.2, "smem_tbps": 30.0, "bank_conflict_slowdown": {"1": 1.0, "32": 32.0},
                 "peak_tflops": {"bf16": 700.0}, "launch_us": 2.5}  # the failed fp8 case is left out


def _calibration(tmp_path: Path, **over) -> Path:
    doc = {"kind": "warpsmith-calibration", "target": "h200", "gpu": "Fake GPU (hand-written test file)",
           "date": "2026-12-01T00:00:00+00:00", "dry_run": False,
           "peaks": {"hbm_tbps": 2.4, "smem_tbps": 20.0, "launch_us": 5.0, "peak_tflops": {"bf16": 500.0}}}
    doc.update(over)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_calibration_file_overrides_the_targets_peaks(tmp_path, monkeypatch):
    nominal = get_target("h200")
    assert nominal.provenance == "nominal (datasheet)"
    monkeypatch.setenv("WARPSMITH_CALIBRATION", str(_calibration(tmp_path)))
    t = get_target("h200")
    assert t.hbm_tbps == 2.4 and t.peak("bf16") == 500.0 and t.launch_us == 5.0
    assert t.peak("fp16") == nominal.peak("fp16")  # what was not measured stays nominal
    assert t.throughput.per_s(t.throughput.smem_bytes_per_clk, t.sms) == pytest.approx(20e12)
    assert t.provenance.startswith("calibrated on Fake GPU (hand-written test file) 2026-12-01: hbm_tbps, launch_us, "
                                   "smem_tbps, bf16 peak")
    assert get_target("h100").provenance == "nominal (datasheet)"  # the file calibrates h200 only


def test_profile_reports_calibrated_rates_and_uses_them(tmp_path, monkeypatch):
    args = ["profile", "rms_norm", "--shape", "M=64,N=4096", "--dtype", "bfloat16", "--target", "h200", "--no-compile"]
    res = CliRunner().invoke(cli, [*args, "--json", str(tmp_path / "nominal.json")])
    assert res.exit_code == 0, res.output
    assert "h200 rates: nominal (datasheet)" in res.output
    monkeypatch.setenv("WARPSMITH_CALIBRATION", str(_calibration(tmp_path)))
    res = CliRunner().invoke(cli, [*args, "--json", str(tmp_path / "cal.json")])
    assert res.exit_code == 0, res.output
    assert "h200 rates: calibrated on Fake GPU (hand-written test file) 2026-12-01" in res.output
    before, after = (json.loads((tmp_path / f).read_text()) for f in ("nominal.json", "cal.json"))
    # rms_norm is bound by HBM: its roofline floor scales with the bandwidth, 4.8 -> 2.4 TB/s
    assert after["roofline_ms"] == pytest.approx(before["roofline_ms"] * 4.8 / 2.4)
    assert after["target_provenance"].startswith("calibrated on")


@pytest.mark.parametrize("over,expected", [
    ({"dry_run": True}, "a measured run"),
    ({"peaks": {"hbm_tbps": -1}}, "a positive number"),
    ({"kind": "something else"}, '"kind": "warpsmith-calibration"'),
    ({"peaks": {"peak_tflops": {"fp4": 9.0}}}, "math kinds of h200"),
])
def test_a_bad_calibration_file_is_refused_naming_what_was_expected(tmp_path, monkeypatch, over, expected):
    monkeypatch.setenv("WARPSMITH_CALIBRATION", str(_calibration(tmp_path, **over)))
    with pytest.raises(InvalidInputError, match="expected .*" + re.escape(expected)):
        get_target("h200")
