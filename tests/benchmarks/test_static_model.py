"""The static-model benchmark (issue 30) runs in quick mode: a library table and a ranking row."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from warpsmith.targets.compiler import nvdisasm_path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "static_model.py"


def test_quick_run_writes_the_table_and_the_rank_correlations(tmp_path, capsys):
    if nvdisasm_path() is None:
        pytest.skip("nvdisasm not found: the static machine-code model has nothing to count")
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("static_model", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--quick", "--out", str(tmp_path), "--facts-dir", str(tmp_path / "facts")]) == 0
    doc = json.loads((tmp_path / "static_model_h200_quick.json").read_text())
    assert doc["timing_kind"] == "predicted" and "Nothing was measured" in doc["statement"]
    rows = {r["op"]: r for r in doc["library"]}
    assert set(rows) == {"softmax", "matmul"} and not any("error" in r for r in rows.values())
    mm = rows["matmul"]  # 4096^3 bf16: far above the launch latency, a real bound
    assert mm["bound"] in ("tensor", "shared", "l2", "hbm", "alu", "issue") and 0 < mm["sol"] <= 1
    assert mm["static_ms"] >= mm["roofline_ms"] and mm["analytic_ms"] >= mm["roofline_ms"]
    (rank,) = doc["ranking"]
    assert rank["configs"] == 4 and all(p["analytic_ms"] > 0 for p in rank["points"])
    md = (tmp_path / "static_model_h200_quick.md").read_text()
    assert "| matmul | M=4096,N=4096,K=4096 bfloat16 | tiled |" in md and "Kendall tau-b" in md
    assert "Every figure is PREDICTED" in capsys.readouterr().out
