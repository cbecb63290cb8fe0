#!/usr/bin/env python
"""Run ``warpsmith check`` on SOL-ExecBench's own samples (fetched at run time, never vendored).

Usage::

    python scripts/check_sol_execbench.py                      # clones NVIDIA/SOL-ExecBench to a temp dir
    python scripts/check_sol_execbench.py --repo PATH          # an existing clone
    python scripts/check_sol_execbench.py --budget 120         # the Triton example's time budget

Checks every ``tests/samples/rmsnorm/solution_hack_*.json`` against the RMSNorm problem in
``tests/sol_execbench/samples/rmsnorm`` (each must be rejected), then the Triton solution there
(which must be accepted on the workloads covered), and prints a table. Exit 0 when every hack is
rejected and the Triton solution accepted, 1 otherwise.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

URL = "https://github.com/NVIDIA/SOL-ExecBench"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=None, help="an existing clone (default: clone to a temp dir)")
    ap.add_argument("--budget", type=float, default=120.0, help="time budget for the Triton example (s)")
    ap.add_argument("--workloads", default="0", help="workloads for the hack samples (default: 0)")
    args = ap.parse_args()
    repo = args.repo
    if repo is None:
        repo = Path(tempfile.mkdtemp(prefix="sol_execbench_")) / "repo"
        subprocess.run(["git", "clone", "--depth", "1", URL, str(repo)], check=True)
    problem = repo / "tests/sol_execbench/samples/rmsnorm"
    hacks = sorted((repo / "tests/samples/rmsnorm").glob("solution_hack_*.json"))
    if not problem.is_dir() or not hacks:
        print(f"error: {repo} does not hold the SOL-ExecBench samples", file=sys.stderr)
        return 2
    rows, ok = [], True
    runs = [(h, ["--workloads", args.workloads], "rejected") for h in hacks]
    runs.append((problem / "solution_triton.json", ["--budget", str(args.budget)], "accepted"))
    for sol, extra, want in runs:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "warpsmith.cli.main", "check", str(problem), str(sol), *extra],
                           capture_output=True, text=True)
        verdict = next((line for line in p.stdout.splitlines() if line.startswith("verdict:")), f"exit {p.returncode}")
        covered = next((line for line in p.stdout.splitlines() if line.startswith("covered:")), "")
        got = "accepted" if p.returncode == 0 else ("rejected" if p.returncode == 1 else f"exit {p.returncode}")
        ok &= got == want
        rows.append((sol.name, want, got, f"{time.perf_counter() - t0:.0f} s", verdict[:110], covered))
    for r in rows:
        print(" | ".join(r))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
