"""The static machine-code model on every library op, and its ranking against the analytic model (issue 30).

Every figure here is a *prediction*: nothing runs on a GPU. Each config is compiled for the target's
architecture (sm_90 for h200) by the compile-only worker, its SASS counted and priced by
``warpsmith.cost.static_sass`` (``warpsmith.profile.collect.profile_op``), beside the analytic cost
model (``warpsmith.cost.predict_ms``, fed the same compile's facts) and the op's roofline.

1. **Library table**: every op of ``warpsmith.gpucheck.PROBLEMS`` at its first (LLM-like) problem, rows
   (``M``) raised to 4096 tokens outside the GEMMs, in bfloat16 where the op has it, at dispatch's default config: the static model's time, bound and
   speed-of-light %, the analytic model's time and the roofline floor.
2. **Ranking**: on the search-quality GEMM problems (``search_quality.PROBLEMS``), ``--k`` configs
   drawn from the joint space of the variants, each priced by both models; the rank correlation
   (Kendall tau-b, Spearman) of the two rankings. Both are predictions: agreement, not accuracy.
3. **Against measurements**: the GEMMs of the one H200 run (``results/h200/matmul_2026-12-04.json``: each
   row's variant and config, timed there with CUDA events) priced by both models: each model's rank
   correlation with the measured times, and its median measured/predicted ratio.

    python benchmarks/static_model.py [--target h200] [--k 16] [--out benchmarks/results/static-model]
    python benchmarks/static_model.py --quick     # two ops, one small problem, K=4 (used by the tests)
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import write_json  # noqa: E402  (makes src/ importable)
from compiler_facts_ranking import kendall_tau_b, spearman_rho  # noqa: E402

STATEMENT = ("Every figure is PREDICTED: the static machine-code model (SASS counted from a compile-only build "
             "for {arch}, priced at datasheet rates), the analytic cost model and the roofline. Nothing was "
             "measured on a GPU; the rank correlations compare two predictions, not a prediction with a measurement.")


ROWS = 4096  # tokens: gpucheck's problems keep few rows (only the row length shapes the kernel there)
GEMMS = ("matmul", "int4_matmul", "scaled_matmul")  # M is a GEMM dimension: gpucheck's first problem stands


def _problem(op: str) -> Any:
    from warpsmith.core.dtypes import dtype_name
    from warpsmith.gpucheck import PROBLEMS
    from warpsmith.ops import get_op

    spec = get_op(op)
    names = [dtype_name(d) for d in spec.dtypes]
    shape, attrs = PROBLEMS[op][0]
    if "M" in shape and shape["M"] < ROWS and op not in GEMMS:  # rows are tokens: an LLM batch's worth
        shape = {**shape, "M": ROWS}
    return spec.problem(shape, "bfloat16" if "bfloat16" in names else names[0], attrs)


def library_table(ops: list[str], target: Any, facts: Any) -> list[dict[str, Any]]:
    from warpsmith.profile.collect import profile_op

    rows = []
    for op in ops:
        t0 = time.perf_counter()
        p = _problem(op)
        try:
            prof = profile_op(p, target, facts)
        except Exception as exc:  # one op that cannot be profiled is a row, not the end of the run
            rows.append({"op": op, "problem": p.describe(), "shape": _shape(p), "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        main = prof.kernels[0]
        static = sum(k.predicted_ms or 0.0 for k in prof.kernels) if prof.static_note is None else None
        rows.append({"op": op, "problem": p.describe(), "shape": _shape(p), "variant": prof.variant, "kernels": len(prof.kernels),
                     "static_ms": static, "bound": main.bound if static else None,
                     "sol": main.sol if static else None, "analytic_ms": prof.analytic_ms,
                     "roofline_ms": prof.roofline_ms, "note": prof.static_note,
                     "seconds": round(time.perf_counter() - t0, 1)})
        print(f"{op:36} {rows[-1]['bound'] or '-':8} static {_ms(static)} analytic {_ms(prof.analytic_ms)} "
              f"floor {_ms(prof.roofline_ms)}", flush=True)
    return rows


def ranking(label: str, shape: dict, dtype: str, target: Any, facts: Any, k: int, seed: int) -> dict[str, Any]:
    from warpsmith.ops import variants
    from warpsmith.ops.matmul.spec import MATMUL
    from warpsmith.profile.collect import profile_op
    from warpsmith.space import JointSpace

    p = MATMUL.problem(shape, dtype)
    vs = variants("matmul")
    space = JointSpace({n: v.space(p, target) for n, v in vs.items()})
    rng, seen, points = random.Random(seed), set(), []
    for _ in range(200 * k):
        if len(points) >= k:
            break
        pt = space.sample(rng)
        cfg = {a: b for a, b in pt.items() if a != "variant"}
        if space.key(pt) not in seen and vs[pt["variant"]].rejection(p, cfg, target) is None:
            seen.add(space.key(pt))
            points.append((pt["variant"], cfg))
    pairs = []
    for variant, cfg in points:
        prof = profile_op(p, target, facts, cfg, variant)
        static = sum(r.predicted_ms or 0.0 for r in prof.kernels) if prof.static_note is None else math.nan
        pairs.append({"variant": variant, "config": cfg, "analytic_ms": prof.analytic_ms, "static_ms": static,
                      "bound": prof.kernels[0].bound})
    both = [(r["analytic_ms"], r["static_ms"]) for r in pairs
            if r["analytic_ms"] is not None and math.isfinite(r["analytic_ms"]) and math.isfinite(r["static_ms"])]
    a, s = [x for x, _ in both], [y for _, y in both]
    best_a = min(range(len(a)), key=a.__getitem__) if a else None
    best_s = min(range(len(s)), key=s.__getitem__) if s else None
    row = {"label": label, "shape": shape, "dtype": dtype, "configs": len(pairs), "ranked": len(both),
           "kendall_tau_b": kendall_tau_b(a, s), "spearman": spearman_rho(a, s),
           "same_best": best_a == best_s if a else None, "points": pairs}
    print(f"{label:32} {len(both)} configs: tau-b {_r(row['kendall_tau_b'])} spearman {_r(row['spearman'])} "
          f"same #1: {row['same_best']}", flush=True)
    return row


MEASURED = Path(__file__).resolve().parent / "results" / "h200" / "matmul_2026-12-04.json"  # the one H200 run


def against_measured(path: Path, target: Any, facts: Any) -> dict[str, Any]:
    """The GEMMs of a measured run (each row's variant and config, timed with CUDA events), priced by both
    models: each model's rank correlation with the measured times and its median ratio to them."""
    from warpsmith.ops import variants
    from warpsmith.ops.matmul.spec import MATMUL
    from warpsmith.profile.collect import profile_op

    doc = json.loads(path.read_text())
    rows = []
    for r in doc["rows"]:
        if r.get("status") != "ok" or not r.get("time_ms") or r.get("variant") not in variants("matmul"):
            continue
        shape = {k: r[k] for k in ("M", "N", "K", "B") if r.get(k) is not None}
        p = MATMUL.problem(shape, r["dtype"], r.get("attrs") or {})
        if variants("matmul")[r["variant"]].rejection(p, r["config"], target):
            continue
        prof = profile_op(p, target, facts, r["config"], r["variant"])
        static = sum(k.predicted_ms or 0.0 for k in prof.kernels) if prof.static_note is None else None
        rows.append({"name": r["name"], "shape": _shape(p), "variant": r["variant"], "measured_ms": r["time_ms"],
                     "static_ms": static, "analytic_ms": prof.analytic_ms, "bound": prof.kernels[0].bound})
    rows = [r for r in rows if r["static_ms"] and r["analytic_ms"] and math.isfinite(r["analytic_ms"])]
    meas = [r["measured_ms"] for r in rows]
    out: dict[str, Any] = {"source": str(path.relative_to(Path(__file__).resolve().parents[1])),
                           "device": doc.get("device"), "rows": rows}
    for model in ("static", "analytic"):
        pred = [r[f"{model}_ms"] for r in rows]
        ratios = sorted(m / x for m, x in zip(meas, pred))
        out[model] = {"kendall_tau_b": kendall_tau_b(pred, meas), "spearman": spearman_rho(pred, meas),
                      "median_measured_over_predicted": ratios[len(ratios) // 2] if ratios else None}
    print(f"against {len(rows)} measured GEMMs: " + "; ".join(
        f"{m} tau-b {_r(out[m]['kendall_tau_b'])} spearman {_r(out[m]['spearman'])}" for m in ("static", "analytic")),
        flush=True)
    return out


def _shape(p: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in p.shape.items()) + f" {p.dtype_name}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g} ms"


def _r(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}"


def markdown(doc: dict[str, Any]) -> str:
    """The two tables (times in µs, all predicted)."""
    lines = ["| op | shape | variant | bound | SOL % | static µs | analytic µs | roofline µs |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    for r in doc["library"]:
        if "error" in r:
            lines.append(f"| {r['op']} | {r['shape']} | - | error | - | - | - | - |")
            continue
        sol = "-" if r["sol"] is None else f"{100 * r['sol']:.0f}"
        lines.append(f"| {r['op']} | {r['shape']} | {r['variant']} | {r['bound'] or '-'} | {sol} | "
                     f"{_us(r['static_ms'])} | {_us(r['analytic_ms'])} | {_us(r['roofline_ms'])} |")
    lines += ["", "| GEMM problem | configs | Kendall tau-b | Spearman | same #1 |", "|---|---:|---:|---:|---|"]
    for r in doc["ranking"]:
        lines.append(f"| {r['label']} | {r['ranked']} | {_r(r['kendall_tau_b'])} | {_r(r['spearman'])} | "
                     f"{'yes' if r['same_best'] else 'no'} |")
    m = doc.get("measured")
    if m:
        lines += ["", f"| model vs {len(m['rows'])} GEMMs measured on an H200 ({m['source']}) | Kendall tau-b | "
                  "Spearman | median measured / predicted |", "|---|---:|---:|---:|"]
        for model in ("static", "analytic"):
            x = m[model]
            ratio = "-" if x["median_measured_over_predicted"] is None else f"{x['median_measured_over_predicted']:.2f}"
            lines.append(f"| {model} | {_r(x['kendall_tau_b'])} | {_r(x['spearman'])} | {ratio} |")
    return "\n".join(lines)


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.3g}"


def main(argv: list[str] | None = None) -> int:
    from warpsmith.gpucheck import PROBLEMS
    from warpsmith.targets import get_target
    from warpsmith.targets.compiler import CompilerFacts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="h200")
    ap.add_argument("--k", type=int, default=16, help="configs ranked per GEMM problem")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ops", default="", help="comma-separated ops (default: every op gpucheck compiles)")
    ap.add_argument("--quick", action="store_true", help="two ops, one small GEMM problem, K=4")
    ap.add_argument("--facts-dir", type=Path, default=None, help="the compile cache (default: WARPSMITH_FACTS_DIR)")
    ap.add_argument("--measured", type=Path, default=MEASURED,
                    help="a measured matmul run to compare both models with (h200 only; not in --quick)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "static-model")
    a = ap.parse_args(argv)
    from search_quality import PROBLEMS as SQ, QUICK as SQ_QUICK

    target = get_target(a.target)
    ops = [o for o in a.ops.split(",") if o] or (["softmax", "matmul"] if a.quick else list(PROBLEMS))
    gemms = [SQ_QUICK[1]] if a.quick else SQ
    k = 4 if a.quick else a.k
    facts = CompilerFacts(target, a.facts_dir)
    t0 = time.perf_counter()
    print(STATEMENT.format(arch=target.arch), flush=True)
    try:
        doc = {"timing_kind": "predicted", "statement": STATEMENT.format(arch=target.arch), "target": target.name,
               "arch": target.arch, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
               "library": library_table(ops, target, facts),
               "ranking": [ranking(label, shape, dtype, target, facts, k, a.seed) for label, shape, dtype in gemms]}
        if not a.quick and a.measured and target.name == "h200":
            doc["measured"] = against_measured(a.measured, target, facts)
    finally:
        facts.close()
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    a.out.mkdir(parents=True, exist_ok=True)
    day = _dt.date.today().isoformat()
    name = f"static_model_{target.name}_quick" if a.quick else f"static_model_{target.name}_{day}"
    write_json(a.out / f"{name}.json", doc)
    (a.out / f"{name}.md").write_text(markdown(doc) + "\n")
    print(markdown(doc))
    print(f"wrote {a.out / name}.json and .md ({doc['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
