#!/usr/bin/env python
"""Run ``warpsmith check`` on SOL-ExecBench's own samples (fetched at run time, never vendored).

Usage::

    python scripts/check_sol_execbench.py                      # clones NVIDIA/SOL-ExecBench to a temp dir
    python scripts/check_sol_execbench.py --repo PATH          # an existing clone
    python scripts/check_sol_execbench.py --budget 120         # the Triton example's time budget
    python scripts/check_sol_execbench.py --hacks-only         # the hack samples only

Checks every ``tests/samples/rmsnorm/solution_hack_*.json`` against the RMSNorm problem in
``tests/sol_execbench/samples/rmsnorm``: each must be rejected, and a sample whose class is known
(:data:`EXPECTED`: ``stream_injection``, ``thread_injection``, ``monkey_patch``, ``lazy_output``) for
that class's reason code (read from ``--json``). The ``stream_injection`` sample is run whenever the
checkout has it (upstream has kept it among the samples while its own harness stopped rejecting side
streams); a checkout without it is reported. Then the Triton solution there must be accepted on the
workloads covered. Prints a table. Exit 0 when every hack is rejected for its class and the Triton
solution accepted, 1 otherwise, 2 when the checkout holds no samples.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

URL = "https://github.com/NVIDIA/SOL-ExecBench"
#: reason codes by the class in a hack sample's name (``solution_hack_<class>.json``); other samples: any rejection
EXPECTED: dict[str, tuple[str, ...]] = {
    "stream_injection": ("async_work",),  # work left on a side stream (on a CPU: the side stream asked for)
    "thread_injection": ("async_work",),
    "monkey_patch": ("monkey_patch",),
    "lazy_output": ("tensor_subclass", "lazy_output"),  # its FakeTensor is a torch.Tensor subclass
}
STREAM_SAMPLE = "solution_hack_stream_injection.json"


def samples(repo: Path) -> tuple[Path, list[tuple[Path, tuple[str, ...]]]]:
    """The RMSNorm problem folder and every hack sample with the reason codes it may be rejected for
    (empty: any rejection)."""
    problem = repo / "tests/sol_execbench/samples/rmsnorm"
    hacks = sorted((repo / "tests/samples/rmsnorm").glob("solution_hack_*.json"))
    return problem, [(h, EXPECTED.get(h.stem.removeprefix("solution_hack_"), ())) for h in hacks]


def _run(problem: Path, sol: Path, extra: list[str]) -> tuple[str, str | None, str, str]:
    """(accepted | rejected | exit N, the reason code, the verdict line, the coverage line)."""
    with tempfile.TemporaryDirectory(prefix="sol_check_") as tmp:
        out = Path(tmp) / "report.json"
        p = subprocess.run([sys.executable, "-m", "warpsmith.cli.main", "check", str(problem), str(sol), *extra,
                            "--json", str(out)], capture_output=True, text=True)
        try:
            reason = json.loads(out.read_text()).get("reason")
        except (OSError, ValueError):
            reason = None
    verdict = next((line for line in p.stdout.splitlines() if line.startswith("verdict:")), f"exit {p.returncode}")
    covered = next((line for line in p.stdout.splitlines() if line.startswith("covered:")), "")
    got = "accepted" if p.returncode == 0 else ("rejected" if p.returncode == 1 else f"exit {p.returncode}")
    return got, reason, verdict, covered


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=None, help="an existing clone (default: clone to a temp dir)")
    ap.add_argument("--budget", type=float, default=120.0, help="time budget for the Triton example (s)")
    ap.add_argument("--workloads", default="0", help="workloads for the hack samples (default: 0)")
    ap.add_argument("--hacks-only", action="store_true", help="skip the Triton solution")
    args = ap.parse_args()
    repo = args.repo
    if repo is None:
        repo = Path(tempfile.mkdtemp(prefix="sol_execbench_")) / "repo"
        subprocess.run(["git", "clone", "--depth", "1", URL, str(repo)], check=True)
    problem, hacks = samples(repo)
    if not problem.is_dir() or not hacks:
        print(f"error: {repo} does not hold the SOL-ExecBench samples", file=sys.stderr)
        return 2
    if not any(h.name == STREAM_SAMPLE for h, _ in hacks):
        print(f"note: this checkout has no {STREAM_SAMPLE}; the stream_injection class is not run")
    rows, ok = [], True
    runs = [(h, ["--workloads", args.workloads], "rejected", codes) for h, codes in hacks]
    if not args.hacks_only:
        runs.append((problem / "solution_triton.json", ["--budget", str(args.budget)], "accepted", ()))
    for sol, extra, want, codes in runs:
        t0 = time.perf_counter()
        got, reason, verdict, covered = _run(problem, sol, extra)
        right = got == want and (not codes or reason in codes)
        ok &= right
        expected = want + (f" ({' or '.join(codes)})" if codes else "")
        rows.append((sol.name, expected, f"{got} ({reason})" if reason else got, "ok" if right else "WRONG",
                     f"{time.perf_counter() - t0:.0f} s", verdict[:110], covered))
    for r in rows:
        print(" | ".join(r))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
