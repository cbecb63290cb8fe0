"""KernelBench speed on a GPU: warpsmith's verified programs against eager PyTorch and torch.compile.

For each problem of a level (default 2), in one run:

1. ``warpsmith solve --strict`` at the problem's own sizes (``--cap N`` caps its size constants as
   ``kernelbench.py`` does): a program is timed only if ``warpsmith check`` accepted it with no
   ATen fallback;
2. in a fresh process per problem, ``Model`` and the emitted ``ModelNew`` are built on the GPU from
   the same seed, and three callables are timed on the same inputs with the same timer
   (``warpsmith.measure.timing.time_gpu``: CUDA events, L2 flushed, median): eager ``Model``,
   ``torch.compile(Model, mode=--compile-mode)`` (default ``max-autotune``) and ``ModelNew``;
   ``ModelNew``'s output is compared with eager's before timing (a sanity check; the proof of
   correctness is the solve's check).

The table at the end gives per problem the three times and the two speedups (eager / warpsmith,
torch.compile / warpsmith: above 1 means warpsmith is faster), the geometric means over the timed
problems, and the targets of ``shared/TARGETS.md`` (level 2: >= 1.5x eager, >= 1.0x torch.compile)
as MET / NOT MET, never asserted. Problems not solved are listed with the reason.

The device has no network: fetch KernelBench here first into a folder git ignores and carry it::

    python benchmarks/kernelbench_speed.py --fetch benchmarks/kernelbench_src     # here (clones it)
    bash benchmarks/run_h200.sh kernelbench    # on the device, carry=["benchmarks/kernelbench_src"]
    python benchmarks/kernelbench_speed.py --dry-run --out /tmp/kbs    # CPU: 2 tiny problems, no timing

``--total-time`` (run_h200.sh passes its own) stops starting new problems; a SIGINT writes the JSON
and prints the table of what finished.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench_common import REPO, say, write_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernelbench as kb  # noqa: E402  (the capping rules, shared)

URL = "https://github.com/ScalingIntelligence/KernelBench"
TARGETS = {2: (1.5, 1.0), 1: (1.0, 1.0), 3: (1.0, 1.0)}  # (vs eager, vs torch.compile) geomean targets

TIMER = r'''
import importlib.util, json, sys, torch
sys.path.insert(0, sys.argv[4])
from warpsmith.measure.timing import time_gpu
prob, new_file, mode = sys.argv[1], sys.argv[2], sys.argv[3]
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
N = load(new_file, "model_new")
P = N  # the emitted file holds the problem's own source, its size constants as solved
dev = "cuda" if torch.cuda.is_available() else "cpu"
init = P.get_init_inputs()
torch.manual_seed(0); ref = P.Model(*init).to(dev)
torch.manual_seed(0); new = N.ModelNew(*init).to(dev)
torch.manual_seed(1)
xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in P.get_inputs()]
out = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu"}
with torch.no_grad():
    a, b = ref(*xs), new(*xs)
    a = list(a) if isinstance(a, (list, tuple)) else [a]
    b = list(b) if isinstance(b, (list, tuple)) else [b]
    out["max_abs_diff"] = max(float((x.double() - y.double()).abs().max()) if x.numel() else 0.0
                              for x, y in zip(a, b))
    if dev == "cuda":
        comp = torch.compile(ref, mode=mode)  # wraps ref: calling ref itself stays eager
        for name, fn in (("eager_ms", ref), ("compile_ms", comp), ("warpsmith_ms", new)):
            out[name] = time_gpu(lambda args, f=fn: f(*args), [xs]).median_ms
print("RESULT " + json.dumps(out))
'''


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def solve_one(path: Path, cap: int, timeout: float, work: Path) -> dict:
    source, tuples = kb.capped_source(path.read_text(), cap) if cap else (path.read_text(), [])
    sets = kb.caps(source, cap) if cap else []
    prob = work / path.stem / path.name
    prob.parent.mkdir(parents=True, exist_ok=True)
    prob.write_text(source)
    out, rep = prob.with_name("model_new.py"), prob.with_name("report.json")
    cmd = [sys.executable, "-m", "warpsmith.cli.main", "solve", str(prob), "--strict", "-o", str(out), "--json", str(rep)]
    for s in sets:
        cmd += ["--set", s]
    row = {"problem": path.name, "sets": sets + tuples}
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        row.update(status="timeout", solve_s=round(time.time() - t0, 1))
        return row
    row["solve_s"] = round(time.time() - t0, 1)
    doc = json.loads(rep.read_text()) if rep.exists() else {}
    if r.returncode != 0 or not out.exists():
        fb = sorted({f["op"] for f in doc.get("fallbacks", [])})
        why = f"fallbacks {fb}" if fb else (doc.get("check") or {}).get("reason") or \
            (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        row.update(status="not solved", reason=why)
        return row
    row.update(status="solved", problem_file=str(prob), model_new=str(out))
    return row


def time_one(row: dict, mode: str, timeout: float) -> None:
    try:
        r = subprocess.run([sys.executable, "-c", TIMER, row["problem_file"], row["model_new"], mode, str(REPO / "src")],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        row.update(status="timing timeout")
        return
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode or not lines:
        row.update(status="timing failed", reason=(r.stderr.strip().splitlines() or ["?"])[-1][:200])
        return
    row.update(json.loads(lines[-1][7:]))
    if "warpsmith_ms" in row:
        row["vs_eager"] = row["eager_ms"] / row["warpsmith_ms"]
        row["vs_compile"] = row["compile_ms"] / row["warpsmith_ms"]
        row["status"] = "timed"


def table(doc: dict) -> str:
    rows, lv = doc["rows"], doc["level"]
    out = [f"KernelBench level {lv} on {doc.get('device', '?')} ({doc['timing_kind']}; torch.compile mode "
           f"{doc['compile_mode']}; sizes {'capped at ' + str(doc['cap']) if doc['cap'] else 'as the problems give'})",
           "| problem | eager ms | torch.compile ms | warpsmith ms | vs eager | vs compile | status |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        f = lambda k: f"{r[k]:.4f}" if isinstance(r.get(k), float) else "-"  # noqa: E731
        g = lambda k: f"{r[k]:.2f}x" if isinstance(r.get(k), float) else "-"  # noqa: E731
        out.append(f"| {r['problem']} | {f('eager_ms')} | {f('compile_ms')} | {f('warpsmith_ms')} | {g('vs_eager')} | "
                   f"{g('vs_compile')} | {r['status']}{' (' + str(r.get('reason')) + ')' if r.get('reason') else ''} |")
    timed = [r for r in rows if r["status"] == "timed"]
    e, c = geomean([r["vs_eager"] for r in timed]), geomean([r["vs_compile"] for r in timed])
    te, tc = TARGETS.get(lv, (1.0, 1.0))
    out.append("")
    out.append(f"timed {len(timed)} of {len(rows)} problems; geomean vs eager {e:.2f}x (target >= {te}x: "
               f"{'MET' if timed and e >= te else 'NOT MET'}), vs torch.compile {c:.2f}x (target >= {tc}x: "
               f"{'MET' if timed and c >= tc else 'NOT MET'})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=REPO / "benchmarks" / "kernelbench_src")
    ap.add_argument("--fetch", type=Path, default=None, help="clone KernelBench into this folder and exit")
    ap.add_argument("--level", type=int, default=2)
    ap.add_argument("--only", default="", help="a regular expression problems' file names must match")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--cap", type=int, default=0, help="cap size constants (0: the problems' own sizes)")
    ap.add_argument("--include-conv", action="store_true", help="also the convolution problems")
    ap.add_argument("--compile-mode", default="max-autotune")
    ap.add_argument("--solve-timeout", type=float, default=300.0)
    ap.add_argument("--time-timeout", type=float, default=300.0)
    ap.add_argument("--total-time", type=float, default=1e9, help="start no new problem after this many seconds")
    ap.add_argument("--out", type=Path, default=Path("out"))
    ap.add_argument("--dry-run", action="store_true", help="CPU: two tiny problems, solved and run, not timed")
    a = ap.parse_args(argv)
    if a.fetch:
        subprocess.run(["git", "clone", "--depth", "1", URL, str(a.fetch)], check=True)
        return 0
    folder = a.repo / "KernelBench" / f"level{a.level}"
    if not folder.is_dir():
        print(f"kernelbench_speed: no {folder} (fetch it with --fetch and carry it to the device)", file=sys.stderr)
        return 2
    files = sorted(folder.glob("*.py"), key=lambda f: int(f.name.split("_")[0]) if f.name[0].isdigit() else 0)
    if not a.include_conv:
        files = [f for f in files if kb.category(f.name) != "convolution"]
    if a.only:
        files = [f for f in files if re.search(a.only, f.name)]
    if a.dry_run:
        files, a.cap = files[:2], a.cap or 8
        os.environ.setdefault("TRITON_INTERPRET", "1")
    files = files[: a.limit] if a.limit else files
    a.out.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "kernelbench", "level": a.level, "date": str(date.today()), "dry_run": a.dry_run,
           "timing_kind": "not timed (dry run, CPU)" if a.dry_run else "measured", "cap": a.cap,
           "compile_mode": a.compile_mode, "rows": []}
    path = a.out / f"kernelbench_level{a.level}_{doc['date']}.json"
    stop = {"now": False}
    signal.signal(signal.SIGINT, lambda *_: stop.update(now=True))
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="kbspeed-") as tmp:
        for f in files:
            if stop["now"] or time.time() - t0 > a.total_time:
                doc["rows"].append({"problem": f.name, "status": "skipped (time)"})
                continue
            row = solve_one(f, a.cap, a.solve_timeout, Path(tmp))
            if row["status"] == "solved":
                time_one(row, a.compile_mode, a.time_timeout)
                doc["device"] = row.get("device", doc.get("device"))
            row.pop("problem_file", None), row.pop("model_new", None)
            doc["rows"].append(row)
            say(f"{f.name}: {row['status']} {row.get('vs_eager', '')} {row.get('reason', '')}")
            write_json(path, doc)
    if doc.get("device") == "cpu" and not a.dry_run:
        doc["timing_kind"] = "not timed (no GPU)"
    write_json(path, doc)
    say(table(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
