#!/usr/bin/env python
"""Run ``warpsmith solve`` on SOL-ExecBench's public examples (fetched at run time, never vendored).

Usage::

    python scripts/solve_sol_execbench.py                          # clones NVIDIA/SOL-ExecBench to a temp dir
    python scripts/solve_sol_execbench.py --repo PATH              # a clone (or a bare mirror, cloned locally)
    python scripts/solve_sol_execbench.py --cpu-cap 16 --timeout 420 --markdown table.md

Every ``examples/<language>/<name>/`` folder holding a ``definition.json`` (11 at upstream's
8d2237d: the solutions there are CUDA, cuDNN, CUTLASS, CuTe DSL, cuTile, PyTorch and Triton, but
the definitions, references and workloads are what ``solve`` reads) is solved by
``warpsmith solve DIR --cpu-cap N`` in its own process with a time limit. On a CPU the cap sets
every axis above N to N (consts too, unless the reference refuses them: ``assert hidden_size ==
4096``) so that Triton's interpreter finishes; on a GPU it is not applied (full sizes). Prints one
row per example: captured / solved (a solution compiled) / accepted (by ``warpsmith check`` over
every workload) / time, and what was capped. Exit 0 when every example is accepted, 1 otherwise,
2 when the checkout holds no examples.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

URL = "https://github.com/NVIDIA/SOL-ExecBench"


def examples(repo: Path) -> list[Path]:
    return sorted(p.parent for p in (repo / "examples").glob("*/*/definition.json"))


def checkout(repo: Path | None) -> Path:
    """A work tree of SOL-ExecBench: ``repo`` itself, a local clone of it when it is a bare mirror, or a
    fresh shallow clone of upstream."""
    if repo is not None and (repo / "examples").is_dir():
        return repo
    dest = Path(tempfile.mkdtemp(prefix="sol_execbench_")) / "repo"
    subprocess.run(["git", "clone", "--quiet", "--depth", "1",
                    f"file://{repo.resolve()}" if repo is not None else URL, str(dest)], check=True)
    return dest


def solve_one(folder: Path, cap: int | None, timeout: float, out_dir: Path) -> dict:
    name = f"{folder.parent.name}/{folder.name}"
    sol, rep = out_dir / f"{folder.parent.name}_{folder.name}.json", out_dir / f"{folder.parent.name}_{folder.name}.report.json"
    cmd = [sys.executable, "-m", "warpsmith.cli.main", "solve", str(folder), "-o", str(sol), "--json", str(rep)]
    if cap is not None:
        cmd += ["--cpu-cap", str(cap)]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
        code, tail = p.returncode, (err.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the solve and the check's processes with it
        p.communicate()
        code, tail = None, f"timeout ({timeout:g} s)"
    took = time.perf_counter() - t0
    doc = json.loads(rep.read_text()) if rep.exists() else {}
    captured = bool(doc.get("programs"))
    accepted = code == 0 and doc.get("status") == "accepted" and sol.exists()
    cap_doc = doc.get("cpu_cap") or {}
    consts = ", ".join(f"{k} {a}->{b}" for k, (a, b) in (cap_doc.get("consts") or {}).items())
    if cap_doc.get("consts_kept"):
        consts = "consts kept (reference asserts them)"
    cov = (doc.get("check") or {}).get("coverage", "")
    return {"example": name, "captured": captured, "solved": captured and doc.get("status") in ("accepted", "rejected"),
            "accepted": accepted, "status": doc.get("status") or ("timeout" if code is None else f"exit {code}"),
            "time_s": round(took, 1), "capped": consts or ("-" if cap_doc else "no cap"), "coverage": cov,
            "note": "" if accepted else tail[:200],
            "fallbacks": sum(len(p.get("fallbacks", [])) for p in doc.get("programs", [])),
            "as_given": doc.get("reference_as_given") or []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=None, help="a clone or bare mirror (default: clone upstream)")
    ap.add_argument("--cpu-cap", type=int, default=16, help="the CPU cap (default 16; 0: none)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per example (default 900)")
    ap.add_argument("--only", default=None, help="a substring of the examples to run")
    ap.add_argument("--json", type=Path, default=None, help="write the rows as JSON here")
    ap.add_argument("--markdown", type=Path, default=None, help="write the table as Markdown here")
    ap.add_argument("--out", type=Path, default=None, help="keep solutions and reports here (default: a temp dir)")
    args = ap.parse_args()
    repo = checkout(args.repo)
    found = [f for f in examples(repo) if args.only is None or args.only in str(f)]
    if not found:
        print(f"error: {repo} holds no examples/*/*/definition.json", file=sys.stderr)
        return 2
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="sol_solve_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    rows = []
    for f in found:
        rows.append(solve_one(f, args.cpu_cap or None, args.timeout, out_dir))
        r = rows[-1]
        print(f"{r['example']}: {r['status']} in {r['time_s']} s {r['note']}", file=sys.stderr, flush=True)
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    lines = [f"SOL-ExecBench {head}: {sum(r['accepted'] for r in rows)} of {len(rows)} examples accepted "
             f"(cpu cap {args.cpu_cap or 'none'}, timeout {args.timeout:g} s)", "",
             "| example | captured | solved | accepted | time | capped consts | note |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['example']} | {yes(r['captured'])} | {yes(r['solved'])} | {yes(r['accepted'])} | {r['time_s']} s | "
              f"{r['capped']} | {r['note'] or r['coverage']} |" for r in rows]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["accepted"] for r in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.exit(main())
