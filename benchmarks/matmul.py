#!/usr/bin/env python3
"""GEMM over an LLM shape suite: warpsmith (tuned, verified) against ``torch.matmul``, in one run.

For every (shape, dtype) of the suite the script calls :func:`warpsmith.tune.tune`
(search, then verification of the finalists), which also times the PyTorch reference
(``torch.matmul``) in the same process, on the same inputs, with the same timer. It prints a
progress line per step, then writes a JSON file and prints the ratio table and the geometric
means against the project's targets (TARGETS.md) as the last thing it prints.

Shapes are ``C = A @ B`` with ``A`` (M, K) and ``B`` (K, N), M the number of tokens:

- ``llm``: the projections of Llama-3-8B and Llama-3-70B (qkv, o, gate_up, down) at
  M in {1, 16, 128, 4096};
- ``skinny_odd``: few rows and/or sizes that are no multiple of any block size.

With a GPU the times are measured (CUDA events); without one kernels run under Triton's
interpreter and times are *predicted* by the cost model of the target, so there is no
measured baseline and no ratio. ``--dry-run`` replaces the suite by three tiny shapes so the
whole pipeline runs on a CPU in seconds; then (unless ``--no-static``) it compiles, statically,
every problem the real run would tune (the real shapes of the selected groups and dtypes) for the
device's GPU (``--static-target``, default h200: sm_90), with Triton's real compiler behind a
stub driver (``warpsmith.gpucheck``): each variant at its default config and ``--static-sample``
configs of its space, launched twice through the real launchers; nothing runs. A compile error,
a launch-time failure, resources over the target's limits or a spill in a default config makes
the dry run exit 1 (after writing its JSON, ``static_compile`` section, and table); the full report
is ``gpucheck_matmul.json`` in the output folder.

Shapes run cheapest first (input generation and verification grow with the operands' size),
each in every dtype before the next shape, so when ``--total-time`` runs out it is the largest
shapes that are skipped, in every dtype alike; every skipped shape is listed, in the table and
in the JSON.

Usage::

    python benchmarks/matmul.py --dry-run --out /tmp/bench_dry   # CPU: tiny shapes, then the static compile
    python benchmarks/matmul.py                                 # GPU, < 8 minutes
"""
from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import math
import re
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import REPO, STATIC_TARGET, cuda_broken, say, static_compile, write_json  # noqa: E402  (makes src/ importable)

import torch  # noqa: E402

from warpsmith.db import TuningDB  # noqa: E402
from warpsmith.errors import VerificationError  # noqa: E402
from warpsmith.search import STRATEGIES  # noqa: E402
from warpsmith.tune import TuneResult, tune  # noqa: E402
from warpsmith.ops.matmul.spec import MATMUL  # noqa: E402
from warpsmith.core.dtypes import dtype_name, parse_dtype  # noqa: E402
from warpsmith.targets import current_device, get_target, measures, versions  # noqa: E402
from warpsmith.targets.detect import driver_version  # noqa: E402

BENCHMARK = "matmul"
FORMAT = 1
GROUPS = ("llm", "skinny_odd")
# TARGETS.md: "bf16/fp16 GEMM over an LLM shape suite: geomean >= 1.0x cuBLAS (torch.matmul);
# >= 1.2x on skinny and odd shapes". Ratio = torch ms / warpsmith ms (above 1: warpsmith faster).
TARGET_RATIO = {"llm": 1.0, "skinny_odd": 1.2}

# Llama-3 attention and MLP sizes (config.json of meta-llama/Meta-Llama-3-{8B,70B}).
LLAMA3 = {
    "llama3-8b": dict(hidden=4096, intermediate=14336, q_heads=32, kv_heads=8, head_dim=128),
    "llama3-70b": dict(hidden=8192, intermediate=28672, q_heads=64, kv_heads=8, head_dim=128),
}
LLM_TOKENS = (1, 16, 128, 4096)
SKINNY_ODD = (  # (M, N, K): decode-like M and sizes one past / short of a power of two, or prime-ish
    (1, 4099, 4097), (3, 4099, 4097), (33, 4099, 4097),
    (7, 1000, 12345), (33, 1000, 12345),
    (257, 129, 300), (4097, 4095, 1023), (8192, 64, 8192),
)
DRY_SUITE = (("skinny_odd", "tiny-decode", 1, 33, 48), ("skinny_odd", "tiny-odd", 3, 17, 33),
             ("llm", "tiny-prefill", 17, 40, 64))
DRY_BUDGET, DRY_FINALISTS = 6, 1
ATTRS: dict[str, Any] = {}  # the attributes every shape is tuned with (the spec's defaults: plain C = A @ B)
# --dry-run's static step: configs drawn from each variant's space per problem, besides its default
# (benchmarks/README.md: what it costs on a 2-core CPU)
STATIC_SAMPLE = 1


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    M: int
    N: int
    K: int

    @property
    def elements(self) -> int:
        """Elements of A, B and C: what input generation and verification scale with."""
        return self.M * self.K + self.K * self.N + self.M * self.N

    def shape(self) -> dict[str, int]:
        return {"M": self.M, "N": self.N, "K": self.K}

    def describe(self) -> str:
        return f"{self.group} {self.name} M={self.M} N={self.N} K={self.K}"


def projections(hidden: int, intermediate: int, q_heads: int, kv_heads: int, head_dim: int) -> dict[str, tuple[int, int]]:
    """(N, K) of a Llama block's four linear layers (gate and up fused, q, k and v fused)."""
    return {"qkv": ((q_heads + 2 * kv_heads) * head_dim, hidden), "o": (hidden, q_heads * head_dim),
            "gate_up": (2 * intermediate, hidden), "down": (hidden, intermediate)}


def suite(groups: Iterable[str] = GROUPS, dry_run: bool = False) -> list[Case]:
    """The cases of the selected groups, in table order."""
    groups = tuple(groups)
    if dry_run:
        return [Case(g, n, m, nn, k) for g, n, m, nn, k in DRY_SUITE if g in groups]
    cases: list[Case] = []
    if "llm" in groups:
        for model, dims in LLAMA3.items():
            for proj, (n, k) in projections(**dims).items():
                cases += [Case("llm", f"{model}.{proj}", m, n, k) for m in LLM_TOKENS]
    if "skinny_odd" in groups:
        cases += [Case("skinny_odd", f"odd-{i + 1}", m, n, k) for i, (m, n, k) in enumerate(SKINNY_ODD)]
    return cases


def static_problems(groups: Iterable[str], dtypes: Iterable[str]) -> list[dict[str, Any]]:
    """What the real (non-dry) suite would tune for ``groups`` and ``dtypes``, as problems for the
    static compile (``warpsmith.gpucheck.check_problems``): every real shape in every dtype, in plan
    order (cheapest first), with the attributes :func:`run_case` uses."""
    cases = sorted(suite(groups), key=lambda c: c.elements)
    return [{"op": "matmul", "shape": c.shape(), "dtype": d, "attrs": dict(ATTRS)} for c in cases for d in dtypes]


# ----------------------------------------------------------------------------------- output helpers

def _fmt_ms(ms: float | None) -> str:
    if ms is None or not math.isfinite(ms):
        return "-"
    return f"{ms:.4f}" if ms < 10 else f"{ms:.2f}"


def geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"



# ----------------------------------------------------------------------------------- one (shape, dtype)
def _row(case: Case, dtype: str) -> dict[str, Any]:
    return {"group": case.group, "name": case.name, "M": case.M, "N": case.N, "K": case.K, "dtype": dtype,
            "status": "pending", "variant": None, "config": None, "time_ms": None, "predicted_ms": None,
            "baseline_ms": None, "speedup": None, "verified": False, "timing_kind": None, "seconds": None,
            "evaluations": None, "record_id": None, "checks": None, "rejected": [], "error": None}


def _fill(row: dict[str, Any], res: TuneResult) -> None:
    j = res.to_json()
    for k in ("variant", "config", "time_ms", "predicted_ms", "baseline_ms", "speedup", "verified", "timing_kind",
              "evaluations", "record_id", "rejected"):
        row[k] = j[k]
    if j["certificate"]:
        row["checks"] = {c["name"]: c["status"] for c in j["certificate"]["checks"]}
    if res.winner is None and res.leaderboard:  # nothing verified: keep what the search found
        best = res.leaderboard[0]
        row["best_unverified"] = {"variant": best.variant, "config": best.config, "time_ms": best.ms}
    if row["timing_kind"] != "measured":
        row["speedup"] = None  # no measured baseline: a ratio of a prediction would mean nothing


def run_case(case: Case, dtype: str, args: argparse.Namespace, db: TuningDB, tag: str) -> dict[str, Any]:
    """Tune one (shape, dtype); every failure becomes a row, nothing is raised (but KeyboardInterrupt)."""
    row = _row(case, dtype)
    t = time.perf_counter()

    def progress(done: int, budget: int, best: Any) -> None:
        b = f"best {best.variant} {_fmt_ms(best.ms)} ms" if best is not None else "no valid candidate yet"
        say(f"{tag}   {done}/{budget} evaluated, {b} ({time.perf_counter() - t:.1f} s)")

    try:
        problem = MATMUL.problem(case.shape(), dtype, ATTRS)
        res = tune(problem, target=args.target, budget=args.budget, time_budget_s=args.time_budget_per_shape,
                   strategy=args.strategy, seed=args.seed, finalists=args.finalists, db=db, progress=progress)
        _fill(row, res)
        row["status"] = "ok"
    except VerificationError as exc:
        if isinstance(exc.result, TuneResult):
            _fill(row, exc.result)
        row["status"], row["verified"], row["error"] = "unverified", False, str(exc)[:2000]
    except Exception as exc:  # a per-shape failure (compile, OOM, launch, ...) never aborts the suite
        row["status"], row["error"] = "error", f"{type(exc).__name__}: {exc}"[:2000]
        row["traceback"] = traceback.format_exc(limit=6)[-4000:]
    finally:
        row["seconds"] = round(time.perf_counter() - t, 2)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return row



def estimate_seconds(case: Case, done: list[tuple[Case, dict[str, Any]]]) -> float:
    """Seconds ``case`` will likely take, from the finished case of nearest size.

    The smallest time seen is taken as fixed overhead (compiles, search); the rest is scaled up
    (never down) with the number of elements.
    """
    timed = [(c, r["seconds"]) for c, r in done if r.get("seconds")]
    if not timed:
        return 0.0
    base = min(s for _, s in timed)
    near, s = min(timed, key=lambda cs: abs(math.log(cs[0].elements / case.elements)))
    return base + (s - base) * max(1.0, case.elements / near.elements)


# ----------------------------------------------------------------------------------- summary and table
def summarize(rows: list[dict[str, Any]], groups: Iterable[str], dtypes: Iterable[str],
              planned: dict[tuple[str, str], int], dry_run: bool = False) -> dict[str, Any]:
    """Geomean of ratios per group and dtype (verified, measured rows only) and the targets' verdicts.

    A dry run's tiny shapes say nothing about the targets: there ``met`` is always None.
    """
    per: list[dict[str, Any]] = []
    for g in groups:
        for d in dtypes:
            mine = [r for r in rows if r["group"] == g and r["dtype"] == d]
            ratios = [r["speedup"] for r in mine
                      if r["verified"] and r["timing_kind"] == "measured" and r["speedup"] and r["speedup"] > 0]
            gm = geomean(ratios)
            thr = TARGET_RATIO.get(g)
            per.append({"group": g, "dtype": d, "geomean": None if gm is None else round(gm, 4),
                        "counted": len(ratios), "rows": len(mine), "planned": planned.get((g, d), len(mine)),
                        "target": thr, "met": None if gm is None or thr is None or dry_run else gm >= thr,
                        "complete": len(ratios) == planned.get((g, d), len(mine))})
    return {"ratio": "torch.matmul ms / warpsmith ms (above 1: warpsmith faster)",
            "geomeans": per,
            "targets_met": {f"{e['group']}/{e['dtype']}": e["met"] for e in per if e["target"] is not None}}


def _verdict(e: dict[str, Any], timing_kind: str) -> str:
    where = f"{e['group']:<10} {e['dtype']:<9}"
    if e["geomean"] is None:
        why = "predicted timings, no measured baseline" if timing_kind != "measured" else "no verified measured row"
        return f"{where} geomean n/a ({why}); target >= {e['target']}x: not evaluated"
    cover = f"{e['counted']}/{e['planned']} shapes" + ("" if e["complete"] else ", INCOMPLETE")
    met = "not evaluated (dry run)" if e["met"] is None else "MET" if e["met"] else "NOT MET"
    return f"{where} geomean {e['geomean']:.3f}x over {cover}; target >= {e['target']}x: {met}"


def render_table(rows: list[dict[str, Any]], summary: dict[str, Any], timing_kind: str, title: str) -> str:
    head = ("group", "shape", "M", "N", "K", "dtype", "variant", "warpsmith ms", "torch ms", "ratio", "verified", "s")
    body = []
    for r in rows:
        if r["status"] == "skipped":
            ratio, ver = "skipped", "-"
        else:
            ver = "yes" if r["verified"] else ("NO (error)" if r["status"] == "error" else "NO")
            if r["status"] != "ok":
                ratio = "failed"
            elif r["timing_kind"] != "measured":
                ratio = "n/a (predicted)"
            else:
                ratio = f"{r['speedup']:.3f}x" if r["speedup"] else "-"
        body.append((r["group"], r["name"], str(r["M"]), str(r["N"]), str(r["K"]), r["dtype"], r["variant"] or "-",
                     _fmt_ms(r["time_ms"]), _fmt_ms(r["baseline_ms"]), ratio, ver,
                     "-" if r["seconds"] is None else f"{r['seconds']:.1f}"))
    width = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    right = {2, 3, 4, 7, 8, 9, 11}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, width))).rstrip()

    rule = "-" * len(line(head))
    out = [rule, title, rule, line(head), rule, *(line(b) for b in body), rule,
           "geomean of ratios (torch.matmul ms / warpsmith ms; verified, measured rows only):"]
    out += ["  " + _verdict(e, timing_kind) for e in summary["geomeans"]]
    return "\n".join(out)


# ----------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", default="bfloat16,float16", help="comma-separated (default: bfloat16,float16)")
    p.add_argument("--groups", default="llm,skinny_odd", help="comma-separated from: " + ", ".join(GROUPS))
    p.add_argument("--budget", type=int, default=None, help="evaluations per shape (default 12; dry run 6)")
    p.add_argument("--finalists", type=int, default=None, help="candidates verified at most (default 2; dry run 1)")
    p.add_argument("--time-budget-per-shape", type=float, default=30.0,
                   help="seconds of search per shape (verification not counted; default 30)")
    p.add_argument("--total-time", type=float, default=450.0,
                   help="start no new shape after this many seconds, nor one unlikely to end by then (default 450)")
    p.add_argument("--strategy", default="evolutionary", choices=sorted(STRATEGIES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", default=None, help="hardware model (default: this device's; without a GPU WARPSMITH_TARGET)")
    p.add_argument("--out", default=None, help="output folder (default benchmarks/results/<gpu>/)")
    p.add_argument("--db", default=None, help="tuning DB (default: a fresh file in the output folder)")
    p.add_argument("--dry-run", action="store_true", help="three tiny shapes, small budget: a CPU check of the pipeline; "
                   "then the static compile of every problem the real run would tune (see --static-sample)")
    p.add_argument("--static-sample", type=int, default=STATIC_SAMPLE,
                   help="dry run's static compile: configs drawn from each variant's space per problem, besides its "
                        f"default config (default {STATIC_SAMPLE}; 0: default configs only)")
    p.add_argument("--static-target", default=None,
                   help=f"dry run's static compile: the GPU to compile for (default: --target if given, else {STATIC_TARGET})")
    p.add_argument("--no-static", action="store_true", help="dry run without the static compile")
    args = p.parse_args(argv)
    try:
        args.dtypes = [dtype_name(parse_dtype(d.strip(), MATMUL.dtypes)) for d in args.dtypes.split(",") if d.strip()]
    except ValueError as exc:  # warpsmith's UnknownNameError says what is allowed
        p.error(f"--dtypes: {exc}")
    args.groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    bad = [g for g in args.groups if g not in GROUPS]
    if bad or not args.groups or not args.dtypes:
        p.error(f"--groups: expected some of {', '.join(GROUPS)}, got {bad or 'nothing'}; --dtypes must not be empty")
    if args.target is not None:
        try:
            args.target = get_target(args.target).name
        except ValueError as exc:
            p.error(f"--target: {exc}")
    if args.budget is None:
        args.budget = DRY_BUDGET if args.dry_run else 12
    if args.finalists is None:
        args.finalists = DRY_FINALISTS if args.dry_run else 2
    if args.budget < 1 or args.finalists < 1 or args.total_time <= 0 or args.time_budget_per_shape <= 0:
        p.error("--budget and --finalists must be >= 1, --total-time and --time-budget-per-shape > 0")
    if args.static_sample < 0:
        p.error("--static-sample must be >= 0")
    try:
        args.static_target = get_target(args.static_target or args.target or STATIC_TARGET).name
    except ValueError as exc:
        p.error(f"--static-target: {exc}")
    return args


def device_info(target_name: str | None) -> tuple[dict[str, Any], str, str]:
    """(device JSON, timing kind, folder slug) of this run."""
    dev = current_device()
    tgt = get_target(target_name) if target_name else dev.target
    measured = measures(tgt)  # the same rule as tune()
    info: dict[str, Any] = {"kind": dev.kind, "name": dev.name, "measured": measured, "target": tgt.to_json()}
    if dev.kind in ("cuda", "rocm"):
        props = torch.cuda.get_device_properties(0)
        info.update(memory_gib=round(props.total_memory / 2**30, 1), multiprocessors=props.multi_processor_count)
    if measured:
        slug = tgt.name if not tgt.approximate else _slug(dev.name)
    else:
        slug = f"{dev.kind}-predicted-{tgt.name}"
    return info, ("measured" if measured else "predicted"), slug


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    started = _dt.datetime.now(_dt.timezone.utc)
    dev, timing_kind, slug = device_info(args.target)
    out = Path(args.out) if args.out else REPO / "benchmarks" / "results" / slug
    out.mkdir(parents=True, exist_ok=True)
    date = started.astimezone().strftime("%Y-%m-%d")
    json_path = out / f"{BENCHMARK}_{date}.json"
    db_path = Path(args.db) if args.db else out / f"{BENCHMARK}_{started.astimezone().strftime('%Y-%m-%d_%H%M%S')}.db"
    db = TuningDB(db_path)

    cases = suite(args.groups, args.dry_run)
    # Execution order: cheapest shape first, each in every dtype (as given) before the next, so that a
    # short --total-time leaves every dtype the same shapes; the table keeps suite order.
    plan = [(c, d) for c in sorted(cases, key=lambda c: c.elements) for d in args.dtypes]
    planned = {(g, d): sum(1 for c in cases if c.group == g) for g in args.groups for d in args.dtypes}
    vers = {**versions(), "driver": driver_version()}
    settings = {"budget": args.budget, "finalists": args.finalists, "time_budget_per_shape_s": args.time_budget_per_shape,
                "total_time_s": args.total_time, "strategy": args.strategy, "seed": args.seed, "dtypes": args.dtypes,
                "groups": args.groups, "db": str(db_path), "order": "cheapest shape first, each in every dtype"}
    say(f"{BENCHMARK}: {len(plan)} (shape, dtype) pairs on {dev['name']}, target {dev['target']['name']}, "
        f"timings {timing_kind}{' (DRY RUN)' if args.dry_run else ''}")
    say(f"versions: {json.dumps(vers)}")
    say(f"settings: {json.dumps(settings)}")

    done: dict[tuple[Case, str], dict[str, Any]] = {}
    skipped: dict[tuple[Case, str], str] = {}
    stop: str | None = None
    static: dict[str, Any] | None = None  # the dry run's static compile (None: not a dry run)

    def table_rows() -> list[dict[str, Any]]:
        """Every planned (shape, dtype) in table order (group, suite order, dtype); skipped ones marked."""
        rows = []
        for g in args.groups:
            for c in (c for c in cases if c.group == g):
                for d in args.dtypes:
                    if (c, d) in done:
                        rows.append(done[(c, d)])
                    elif (c, d) in skipped:
                        rows.append({**_row(c, d), "status": "skipped", "error": skipped[(c, d)]})
        return rows

    def document(final: bool) -> dict[str, Any]:
        rows = [r for r in table_rows() if r["status"] != "skipped"]
        return {
            "benchmark": BENCHMARK, "format": FORMAT, "date": date, "started": started.isoformat(timespec="seconds"),
            "wall_s": round(time.perf_counter() - t0, 1), "complete": final and not skipped,
            "interrupted": stop == "interrupted", "dry_run": args.dry_run,
            "device": dev, "target": dev["target"]["name"], "timing_kind": timing_kind, "versions": vers,
            "settings": settings, "rows": rows, "summary": summarize(rows, args.groups, args.dtypes, planned, args.dry_run),
            "skipped": [{"group": c.group, "name": c.name, "M": c.M, "N": c.N, "K": c.K, "dtype": d, "reason": why}
                        for (c, d), why in skipped.items()],
            "static_compile": static,
        }

    for i, (case, dtype) in enumerate(plan, 1):
        tag = f"[{i:>2}/{len(plan)} {time.perf_counter() - t0:6.1f}s]"
        try:
            elapsed = time.perf_counter() - t0
            est = estimate_seconds(case, [(c, r) for (c, _), r in done.items()])
            if stop is None and elapsed >= args.total_time:
                stop = f"--total-time {args.total_time:g} s reached"
            if stop is not None or elapsed + est > args.total_time:
                skipped[(case, dtype)] = stop or f"would likely end after --total-time {args.total_time:g} s (estimate {est:.0f} s)"
                say(f"{tag} {case.describe()} {dtype}: skipped ({skipped[(case, dtype)]})")
                continue
            say(f"{tag} {case.describe()} {dtype}: tuning (budget {args.budget})")
            row = done[(case, dtype)] = run_case(case, dtype, args, db, tag)
            if row["status"] == "ok":
                ratio = f" = {row['speedup']:.3f}x torch" if row["speedup"] else ""
                say(f"{tag}   -> {row['variant']} {_fmt_ms(row['time_ms'])} ms ({row['timing_kind']}), torch.matmul "
                    f"{_fmt_ms(row['baseline_ms'])} ms{ratio}, verified, {row['seconds']:.1f} s")
            else:
                say(f"{tag}   -> FAILED ({row['status']}): {(row['error'] or '').splitlines()[0][:300]}")
                broken = cuda_broken()
                if broken:
                    stop = f"CUDA context unusable after {case.describe()} {dtype}: {broken}"
            write_json(json_path, document(False))
        except KeyboardInterrupt:  # Ctrl-C or `timeout -s INT`: keep what ran, report the rest as skipped
            stop = "interrupted"
            if (case, dtype) not in done:
                skipped[(case, dtype)] = stop
            say(f"{tag} interrupted: the remaining shapes are skipped")

    if args.dry_run:  # after the tiny shapes, so its time does not count against --total-time
        static = dry_run_static(args, out)
    doc = document(True)
    write_json(json_path, doc)
    say(f"wrote {json_path} ({len(doc['rows'])} rows run, {len(skipped)} skipped) and tuning DB {db_path}")
    say(f"total {time.perf_counter() - t0:.1f} s")
    sys.stderr.flush()
    title = (f"{BENCHMARK} {date}  {dev['name']}  target {dev['target']['name']}  timings {timing_kind}"
             + ("  DRY RUN (tiny shapes)" if args.dry_run else "") + ("  (predicted: no ratios)" if timing_kind != "measured" else ""))
    say(render_table(table_rows(), doc["summary"], timing_kind, title))  # the last thing printed
    return 1 if static is not None and not static["ok"] else 0


def dry_run_static(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The dry run's static step: compile what the real run would tune (:func:`static_problems`) for
    ``--static-target``; the JSON's ``static_compile`` section (``{"ok": True, "skipped": ...}`` with
    ``--no-static``)."""
    if args.no_static:
        return {"ok": True, "skipped": "--no-static"}
    try:
        return static_compile(static_problems(args.groups, args.dtypes), args.static_target, args.static_sample,
                              out / f"gpucheck_{BENCHMARK}.json")
    except KeyboardInterrupt:
        say("static compile interrupted")
        return {"ok": False, "error": "interrupted", "target": args.static_target, "sample": args.static_sample}


if __name__ == "__main__":
    sys.exit(main())
