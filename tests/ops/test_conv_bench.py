"""benchmarks/conv.py: its plan and argument parsing, and a dry run (CPU, interpreter) of two cases (a strided stem, a
depthwise 7x7) whose warpsmith results must match torch's."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_scripts import load  # noqa: E402


def test_plan_and_arguments(capsys):
    bench = load("conv")
    assert bench.main(["--print-plan"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    plan = [json.loads(s) for s in lines[:-1]]
    assert lines[-1] == f"{len(plan)} cases" and {c["suite"] for c in plan} == {"resnet50", "sd_unet", "convnext"}
    assert any(c["kind"] == "depthwise" for c in plan) and any(c["kind"] == "fused" for c in plan)
    assert bench.main(["--print-plan", "--suite", "convnext"]) == 0
    assert all(json.loads(s)["suite"] == "convnext" for s in capsys.readouterr().out.strip().splitlines()[:-1])
    with pytest.raises(SystemExit):
        bench.main(["--print-plan", "--suite", "vgg"])


def test_dry_run_matches_torch(tmp_path):
    bench = load("conv")
    assert bench.main(["--dry-run", "--out", str(tmp_path), "--suite", "convnext", "--max-cases", "2"]) == 0
    doc = json.loads((tmp_path / "conv_dry.json").read_text())
    assert doc["benchmark"] == "conv" and doc["dry_run"] and not doc["failed"] and len(doc["cases"]) == 2
    for row in doc["cases"]:
        assert row["impls"]["warpsmith"]["status"] == "ok" and max(row["impls"]["warpsmith"]["rel_err"].values()) < 1e-4
    # the stem runs the implicit GEMM, the depthwise 7x7 the direct depthwise kernel (dispatch's default)
    assert [row["impls"]["warpsmith"]["variant"] for row in doc["cases"]] == ["implicit_gemm", "depthwise"]
