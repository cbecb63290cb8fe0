"""How close each search strategy gets to the exhaustive optimum, on the cost model.

The objective is the GEMM cost model of a named target (predicted milliseconds), so this runs
anywhere and measures the *search*, not the hardware: the exhaustive best over the whole joint
space (every variant, every knob) is computed, then each strategy runs with budgets of 0.5%, 1%
and 5% of the space's size over several seeds, and reports best-found / exhaustive-best.
The project's target (../shared/TARGETS.md): within 2% of the exhaustive best after <= 5% of
the space's evaluations.

    python benchmarks/search_quality.py [--target h100] [--seeds 5] [--out benchmarks/results/cost-model]
    python benchmarks/search_quality.py --quick      # two small problems, one seed (used by the tests)
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import REPO  # noqa: E402  (makes src/ importable)

from warpsmith.ops import variants  # noqa: E402
from warpsmith.measure import Evaluator  # noqa: E402
from warpsmith.search import STRATEGIES  # noqa: E402
from warpsmith.tune import search  # noqa: E402
from warpsmith.space import JointSpace  # noqa: E402
from warpsmith.ops.matmul.spec import MATMUL  # noqa: E402
from warpsmith.targets import get_target, versions  # noqa: E402

PROBLEMS = [  # (label, shape, dtype)
    ("llama8b-qkv M=16", {"M": 16, "N": 6144, "K": 4096}, "bfloat16"),
    ("llama8b-down M=4096", {"M": 4096, "N": 4096, "K": 14336}, "bfloat16"),
    ("llama70b-gate_up M=128", {"M": 128, "N": 57344, "K": 8192}, "bfloat16"),
    ("odd M=257 N=129 K=300", {"M": 257, "N": 129, "K": 300}, "float16"),
    ("fp32 M=1024 N=1024 K=1024", {"M": 1024, "N": 1024, "K": 1024}, "float32"),
]
QUICK = [PROBLEMS[3], ("tiny M=33 N=20 K=48", {"M": 33, "N": 20, "K": 48}, "float16")]
FIXED = (32, 128)  # budgets a tuning run typically spends
FRACTIONS = (0.005, 0.01, 0.05)


def run(problems, target_name: str, seeds: int) -> dict:
    target = get_target(target_name)
    rows = []
    for label, shape, dtype in problems:
        p = MATMUL.problem(shape, dtype)
        vs = variants("matmul")
        space = JointSpace({n: v.space(p, target) for n, v in vs.items()})
        ev = Evaluator(MATMUL, p, vs, target, measured=False)
        t0 = time.perf_counter()
        best = min(ev.predict(pt).predicted_ms for pt in space.enumerate())
        exhaustive_s = time.perf_counter() - t0
        size = space.size()
        for strategy in sorted(STRATEGIES):
            for frac in FIXED + FRACTIONS:
                budget = frac if isinstance(frac, int) else max(1, int(size * frac))
                ratios = []
                for seed in range(seeds):
                    scores = search(space, ev, strategy, budget=budget, seed=seed, batch=16)
                    found = min((s.ms for s in scores if math.isfinite(s.ms)), default=math.inf)
                    ratios.append(found / best)
                rows.append({"problem": label, "shape": shape, "dtype": dtype, "space_size": size,
                             "exhaustive_best_ms": best, "exhaustive_s": round(exhaustive_s, 2), "strategy": strategy,
                             "fraction": frac, "budget": budget, "seeds": seeds, "ratio_median": statistics.median(ratios),
                             "ratio_worst": max(ratios), "within_2pct": sum(r <= 1.02 for r in ratios)})
                print(f"{label:28s} {strategy:13s} {_col(frac):>6s} ({budget:6d} evals): median {statistics.median(ratios):.4f}"
                      f"  worst {max(ratios):.4f}  within 2%: {rows[-1]['within_2pct']}/{seeds}", flush=True)
    return {"benchmark": "search_quality", "date": _dt.date.today().isoformat(), "objective": f"cost model, {target.name}",
            "timing_kind": "predicted", "versions": versions(), "rows": rows}


def _col(frac: float | int) -> str:
    return f"{frac} ev" if isinstance(frac, int) else f"{frac:.1%}"


def table(doc: dict) -> str:
    lines = [f"search quality on the {doc['objective']} objective ({doc['date']}); ratio = best found / exhaustive best",
             f"{'problem':28s} {'strategy':13s} " + " ".join(f"{_col(f):>14s}" for f in FIXED + FRACTIONS)]
    by = {}
    for r in doc["rows"]:
        by.setdefault((r["problem"], r["strategy"]), {})[r["fraction"]] = r
    for (prob, strat), cells in by.items():
        lines.append(f"{prob:28s} {strat:13s} " + " ".join(
            f"{cells[f]['ratio_median']:8.4f} ({cells[f]['within_2pct']}/{cells[f]['seeds']})" for f in FIXED + FRACTIONS))
    five = [r for r in doc["rows"] if r["fraction"] == 0.05 and r["strategy"] != "random"]
    ok = all(r["within_2pct"] == r["seeds"] for r in five)
    lines.append(f"target (within 2% of exhaustive at <= 5% of the space, evolutionary and pattern, every seed): "
                 f"{'MET' if ok else 'NOT MET'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="h100")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="two small problems, one seed")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "cost-model")
    args = ap.parse_args(argv)
    doc = run(QUICK if args.quick else PROBLEMS, args.target, 1 if args.quick else args.seeds)
    doc["quick"] = args.quick
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"search_quality_{args.target}{'_quick' if args.quick else ''}_{doc['date']}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {path}")
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
