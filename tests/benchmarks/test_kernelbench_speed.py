"""benchmarks/kernelbench_speed.py on the CPU: a tiny KernelBench-shaped folder (written here: the
real one is fetched at run time, never vendored) is solved, run and tabulated; nothing is timed."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)).sum(dim=1, keepdim=True) * {k}


batch = 64
n = 48


def get_inputs():
    return [torch.randn(batch, n)]


def get_init_inputs():
    return [n]
'''


def test_dry_run_solves_and_tabulates(tmp_path):
    lv = tmp_path / "kb" / "KernelBench" / "level2"
    lv.mkdir(parents=True)
    (lv / "1_Gemm_Sigmoid_Sum.py").write_text(PROBLEM.format(k=2.0))
    (lv / "2_Conv2d_ReLU.py").write_text(PROBLEM.format(k=3.0))  # a convolution by its name: left out
    (lv / "3_Gemm_Median.py").write_text(PROBLEM.format(k=1.0).replace(".sum(dim=1, keepdim=True)", ".median(dim=1).values"))
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "kernelbench_speed.py"), "--repo", str(tmp_path / "kb"),
                        "--out", str(tmp_path / "out"), "--dry-run"], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    [doc_path] = (tmp_path / "out").glob("kernelbench_level2_*.json")
    doc = json.loads(doc_path.read_text())
    assert doc["dry_run"] is True and doc["timing_kind"].startswith("not timed")
    rows = {row["problem"]: row for row in doc["rows"]}
    assert set(rows) == {"1_Gemm_Sigmoid_Sum.py", "3_Gemm_Median.py"}
    assert rows["1_Gemm_Sigmoid_Sum.py"]["status"] == "solved" and rows["1_Gemm_Sigmoid_Sum.py"]["max_abs_diff"] < 1e-4
    assert rows["3_Gemm_Median.py"]["status"] == "not solved" and "median" in rows["3_Gemm_Median.py"]["reason"]
    assert "timed 0 of 2 problems" in r.stdout and "NOT MET" in r.stdout


def test_missing_kernelbench_is_exit_2(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "kernelbench_speed.py"), "--repo", str(tmp_path),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert r.returncode == 2 and "--fetch" in r.stderr
