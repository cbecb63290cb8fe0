"""benchmarks/lowprec_int4.py: its plan builds (cases, the problems warpsmith dispatches), and its dry run
(CPU, interpreter) runs and checks correctness."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import lowprec_int4 as B  # noqa: E402

from warpsmith.ops import get_op  # noqa: E402


def test_plan_builds():
    cases = B.cases()
    assert len(cases) == len(B.SHAPES) * 4 * 2
    assert {c["M"] for c in cases} == {1, 16, 64, 4096} and {c["format"] for c in cases} == {"awq", "gptq"}
    spec = get_op("int4_matmul")
    for c in cases:
        for p in B.problems(c):
            prob = spec.problem(p["shape"], p["dtype"], p["attrs"])  # valid: N % 8, K % 128
            assert prob.shape["K"] % 128 == 0 and prob.shape["N"] % 8 == 0


def test_dry_run_checks_correctness(tmp_path):
    rc = B.main(["--dry-run", "--no-static", "--formats", "awq", "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "lowprec_int4_dry.json").read_text())
    assert rc == 0 and doc["benchmark"] == "lowprec_int4" and not doc["failed"]
    assert len(doc["cases"]) == 2 and all(r["status"] == "ok" and r["rel_err"] < 1e-2 for r in doc["cases"])


@pytest.mark.parametrize("bad", ["--formats=exl2"])
def test_bad_format_fails_the_run(tmp_path, bad):
    assert B.main(["--dry-run", "--no-static", bad, "--out", str(tmp_path)]) == 1
