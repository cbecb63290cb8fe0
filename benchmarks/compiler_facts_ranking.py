"""How the cost model's ranking changes when it uses the compiler's facts (issue 14).

Every figure here is a *prediction*: the cost model of a target (default h200), first on its own
estimates of registers, shared memory and pipelining, then fed the facts a static compile for the
target's architecture (sm_90) gives (``warpsmith.targets.compiler.CompilerFacts``: registers,
spills, shared memory, pipelined loads, from ptxas, with no GPU). Nothing is run on a GPU.

For each problem (the search-quality GEMM problems, and memory-bound LLM shapes):

1. the joint space over all variants is enumerated (sampled where larger than ``--max-enumerate``)
   and ranked by the estimate-only model (``Evaluator.predict(p)``);
2. the estimate's top K are compiled and re-scored with facts (``Evaluator.predict(p, compile=True)``):
   how many the compiler rejects (spills, or ``num_stages`` > 1 where no load could be pipelined),
   whether the estimate's #1 survives, the new #1 and its predicted time against the estimate's #1,
   the rank correlation (Kendall tau-b, Spearman) of the two rankings on the survivors, and the
   registers / shared memory of both #1s; a spread of ``--spread`` more points, evenly spaced over
   the rest of the ranking, is compiled too (rejections and rank correlation over the whole range);
3. the whole ``search()`` runs with and without facts (same strategy, budget and seeds); the winner
   of the estimate-only search is compiled and scored under the facts-aware objective, so both
   winners are compared on the objective a facts-aware tuning run would use. The best config under
   facts among everything compiled is reported with its rank in the estimate.

    python benchmarks/compiler_facts_ranking.py [--k 24] [--seeds 2] [--out benchmarks/results/cost-model]
    python benchmarks/compiler_facts_ranking.py --quick    # two small problems, K=4 (used by the tests)

Compiles are cached on disk (``WARPSMITH_FACTS_DIR`` or ``--facts-dir``), so a re-run is fast. The
compile worker is warpsmith's own (``python -m warpsmith.gpucheck --serve``), which draws each
problem's random inputs once for all its configs.

Runtime on this project's 2 shared CPU cores: about 19 min with cold caches (Triton's and the
facts'; 1,130 configs compiled, 12 min of CPU time, the machine under a load of ~4 from other
jobs), about 1 min warm; a first run with ``--seeds 1`` and no spread took 12 min.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import REPO  # noqa: E402  (makes src/ importable)

STATEMENT = ("Every figure is a PREDICTED ranking from warpsmith's cost model; 'facts' are registers, spills, "
             "shared memory and pipelining from a static compile for {arch} by the installed Triton on this CPU "
             "(compile-only, nothing executed). Nothing was measured on a GPU.")


def _search_quality_problems() -> tuple[list, list]:
    from search_quality import PROBLEMS as SQ, QUICK as SQ_QUICK  # the search-quality GEMM problems

    return SQ, SQ_QUICK


def problems(quick: bool) -> list[dict[str, Any]]:
    """(a) the search-quality GEMM problems, (b) memory-bound ops at LLM shapes (bf16, rows 4k-16k)."""
    sq, sq_quick = _search_quality_problems()

    def gemm(label: str, shape: dict, dtype: str) -> dict[str, Any]:
        return {"label": label, "group": "gemm", "op": "matmul", "shape": shape, "dtype": dtype, "attrs": {}}

    def mem(label: str, op: str, shape: dict, dtype: str = "bfloat16", attrs: dict | None = None) -> dict[str, Any]:
        return {"label": label, "group": "memory", "op": op, "shape": shape, "dtype": dtype, "attrs": attrs or {}}

    if quick:
        return [gemm(*sq_quick[1]), mem("softmax M=64 N=4096", "softmax", {"M": 64, "N": 4096})]
    return [gemm(*p) for p in sq] + [
        # memory_bound_cases.py tier-1 shapes where they have >= 4k rows; the others at 4k rows
        mem("rms_norm llama3-8b M=16384 N=4096", "rms_norm", {"M": 16384, "N": 4096}),
        mem("rms_norm_bwd llama3-405b M=4096 N=16384", "rms_norm_backward", {"M": 4096, "N": 16384}),
        mem("softmax M=4096 N=16384", "softmax", {"M": 4096, "N": 16384}),
        mem("softmax_bwd M=4096 N=16384", "softmax_backward", {"M": 4096, "N": 16384}),
        mem("cross_entropy llama3 M=4096 V=128256", "cross_entropy", {"M": 4096, "V": 128256}),
        mem("swiglu llama3-8b M=4096 H=14336", "swiglu", {"M": 4096, "H": 14336}),
        mem("rope llama3-8b B=4 S=4096", "rope", {"B": 4, "S": 4096, "Hq": 32, "Hk": 8, "R2": 64}),
    ]


# ------------------------------------------------------------------------------ rank statistics
def _cmp(a: float, b: float, rel: float = 1e-12) -> int:
    if abs(a - b) <= rel * max(abs(a), abs(b)):
        return 0
    return -1 if a < b else 1


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (ties in either ranking accounted for); None where undefined (n < 2, or one
    ranking all ties)."""
    n = len(x)
    if n != len(y):
        raise ValueError("rankings of different lengths")
    conc = disc = tie_x = tie_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = _cmp(x[i], x[j]), _cmp(y[i], y[j])
            tie_x += dx == 0
            tie_y += dy == 0
            conc += dx * dy > 0
            disc += dx * dy < 0
    pairs = n * (n - 1) / 2
    denom = math.sqrt((pairs - tie_x) * (pairs - tie_y))
    return None if denom == 0 else (conc - disc) / denom


def _avg_ranks(v: Sequence[float]) -> list[float]:
    order = sorted(range(len(v)), key=lambda i: v[i])
    ranks = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and _cmp(v[order[j + 1]], v[order[i]]) == 0:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's correlation of the average ranks; None where undefined."""
    if len(x) != len(y):
        raise ValueError("rankings of different lengths")
    if len(x) < 2:
        return None
    rx, ry = _avg_ranks(x), _avg_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


# ------------------------------------------------------------------------------ one problem
def _kernels(facts: Any) -> list[dict[str, Any]] | None:
    if facts is None:
        return None
    return [{"name": k.name, "regs": k.regs, "spill_bytes": k.spill_bytes, "smem_bytes": k.smem_bytes,
             "num_warps": k.num_warps, "num_stages": k.num_stages, "loop_loads": k.loop_loads,
             "pipelined_loads": k.pipelined_loads} for k in facts.kernels]


def _status(score: Any) -> str:
    """ok | spills | dead_num_stages | invalid | no_facts (the compile failed: the estimate stands)."""
    if score.error:
        if "spills" in score.error:
            return "spills"
        if "could not pipeline" in score.error:
            return "dead_num_stages"
        return "invalid"
    return "ok" if score.facts is not None else "no_facts"


def _rejected_kernel(score: Any) -> str | None:
    """The kernel the compiler's rejection names ("compiler: <kernel> spills ...")."""
    if score.error and score.error.startswith("compiler: "):
        return score.error.split()[1]
    return None


def _by_kernel(scores: Sequence[Any]) -> dict[str, int]:
    """Rejections counted per "<status>: <kernel>"."""
    out: dict[str, int] = {}
    for s in scores:
        k = _rejected_kernel(s)
        if k:
            key = f"{_status(s)}: {k}"
            out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def _point(score: Any) -> dict[str, Any]:
    return {"variant": score.variant, **score.config}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def rank_problem(prob: Mapping[str, Any], target: Any, facts: Any, args: argparse.Namespace) -> dict[str, Any]:
    import random

    from warpsmith.measure import Evaluator
    from warpsmith.ops import get_op, variants
    from warpsmith.space import JointSpace
    from warpsmith.tune import search

    spec = get_op(prob["op"])
    p = spec.problem(prob["shape"], prob["dtype"], prob["attrs"])
    vs = variants(prob["op"])
    space = JointSpace({n: v.space(p, target) for n, v in vs.items()})
    est = Evaluator(spec, p, vs, target, measured=False)
    fac = Evaluator(spec, p, vs, target, measured=False, facts=facts)
    size = space.size()
    out: dict[str, Any] = {**prob, "space_size": size}

    # 1. the estimate-only ranking
    t0 = time.perf_counter()
    if size <= args.max_enumerate:
        pts, enumerated = list(space.enumerate()), True
    else:
        rng, seen, pts = random.Random(0), set(), []
        for _ in range(20 * args.sample):
            if len(pts) >= args.sample:
                break
            q = space.sample(rng)
            if space.key(q) not in seen:
                seen.add(space.key(q))
                pts.append(q)
        enumerated = False
    ranked = sorted(((est.predict(q).predicted_ms, i, q) for i, q in enumerate(pts)), key=lambda t: t[:2])
    ranked = [(ms, q) for ms, _, q in ranked if math.isfinite(ms)]
    out.update(enumerated=enumerated, points_ranked=len(pts), valid_points=len(ranked),
               rank_s=round(time.perf_counter() - t0, 2))
    if not ranked:
        raise SystemExit(f"{prob['label']}: no valid point in the space")
    out["estimate_ties_with_top1"] = sum(1 for ms, _ in ranked if _cmp(ms, ranked[0][0], 1e-9) == 0)
    est_rank: dict[Any, int] = {}  # competition rank ("1224": ties share the best) of every valid point
    rank = 0
    for i, (ms, q) in enumerate(ranked):
        if i == 0 or _cmp(ms, ranked[i - 1][0], 1e-9):
            rank = i + 1
        est_rank[space.key(q)] = rank

    # 2. the estimate's top K, compiled and re-scored with facts
    t0, c0 = time.perf_counter(), facts.compiled
    seen: dict[Any, tuple[float, Any]] = {}  # every compiled point: (facts ms, score)

    def rescore(q: Mapping[str, Any], position: int, ms: float) -> dict[str, Any]:
        s = fac.predict(q, compile=True)
        if facts.failed:
            raise SystemExit(f"the compile worker failed ({facts.failed}): no compiler facts for {target.arch}")
        st = _status(s)
        if st == "ok":
            seen[space.key(q)] = (s.predicted_ms, s)
        scored.append(s)
        return {"est_rank": est_rank[space.key(q)], "est_position": position, "variant": s.variant,
                "config": s.config, "est_ms": ms, "facts_ms": _finite(s.predicted_ms) if st == "ok" else None,
                "status": st, "reason": s.error, "rejected_kernel": _rejected_kernel(s), "kernels": _kernels(s.facts)}

    scored: list[Any] = []

    rows = [rescore(q, r, ms) for r, (ms, q) in enumerate(ranked[: args.k], 1)]
    topk_by_kernel = _by_kernel(scored)
    surv = sorted((x for x in rows if x["status"] == "ok"), key=lambda x: (x["facts_ms"], x["est_position"]))
    for i, x in enumerate(surv, 1):
        x["facts_rank"] = i
    counts = {k: sum(x["status"] == k for x in rows)
              for k in ("ok", "spills", "dead_num_stages", "no_facts", "invalid")}
    top, new = rows[0], (surv[0] if surv else None)
    out["topk"] = {
        "k": len(rows), "compiled": facts.compiled - c0, "seconds": round(time.perf_counter() - t0, 2),
        "survivors": counts["ok"], "rejected": counts["spills"] + counts["dead_num_stages"],
        "rejected_by_reason": {"spills": counts["spills"], "dead_num_stages": counts["dead_num_stages"]},
        "rejected_by_kernel": topk_by_kernel,
        "no_facts": counts["no_facts"], "invalid": counts["invalid"],
        "facts_changed_estimate": sum(1 for x in surv if _cmp(x["facts_ms"], x["est_ms"], 1e-9) != 0),
        "est_top1_survives": top["status"] == "ok",
        "est_top1": top, "facts_top1": new,
        # the new #1's predicted time (with facts) against what the estimate promised for its #1
        "facts_top1_over_est_top1": (new["facts_ms"] / top["est_ms"]) if new else None,
        "est_top1_facts_over_est": (top["facts_ms"] / top["est_ms"]) if top["facts_ms"] else None,
        "kendall_tau_b": kendall_tau_b([x["est_ms"] for x in surv], [x["facts_ms"] for x in surv]),
        "spearman_rho": spearman_rho([x["est_ms"] for x in surv], [x["facts_ms"] for x in surv]),
        "rows": rows,
    }
    ref = new["facts_ms"] if new else None

    # 2b. a spread: S points at evenly spaced positions of the rest of the estimate ranking
    tail = len(ranked) - len(rows)
    picks = sorted({len(rows) + max(1, round(tail * (i + 1) / args.spread))
                    for i in range(args.spread)}) if tail > 0 else []
    scored.clear()
    spread = [rescore(ranked[i - 1][1], i, ranked[i - 1][0]) for i in picks]
    both = [x for x in rows + spread if x["status"] == "ok"]
    out["spread"] = {
        "points": len(spread), "positions": picks, "survivors": sum(x["status"] == "ok" for x in spread),
        "rejected_by_reason": {k: sum(x["status"] == k for x in spread) for k in ("spills", "dead_num_stages")},
        "rejected_by_kernel": _by_kernel(scored),
        "no_facts": sum(x["status"] == "no_facts" for x in spread),
        # over the top K and the spread together: the whole range of the estimate
        "kendall_tau_b": kendall_tau_b([x["est_ms"] for x in both], [x["facts_ms"] for x in both]),
        "spearman_rho": spearman_rho([x["est_ms"] for x in both], [x["facts_ms"] for x in both]),
        "rows": spread,
    }

    # 3. the whole search, without and with facts
    budget = max(1, min(size, args.budget_cap, max(args.budget_min, int(size * args.budget_frac))))
    runs = []
    for seed in range(args.seeds):
        t0 = time.perf_counter()
        sc = search(space, est, args.strategy, budget=budget, seed=seed, batch=args.batch)
        best = min((s for s in sc if math.isfinite(s.ms)), key=lambda s: s.ms, default=None)
        est_s = time.perf_counter() - t0
        c0 = facts.compiled
        rescored = fac.predict(_point(best), compile=True) if best else None
        if rescored is not None and _status(rescored) == "ok":
            seen[space.key(_point(best))] = (rescored.predicted_ms, rescored)
        t0 = time.perf_counter()
        sf = search(space, fac, args.strategy, budget=budget, seed=seed, batch=args.batch)
        fbest = min((s for s in sf if math.isfinite(s.ms)), key=lambda s: s.ms, default=None)
        fac_s = time.perf_counter() - t0
        if facts.failed:
            raise SystemExit(f"the compile worker failed ({facts.failed})")
        for q, s in zip((_point(s) for s in sf), sf):
            if math.isfinite(s.ms) and s.facts is not None:
                seen.setdefault(space.key(q), (s.ms, s))
        e_ms = rescored.predicted_ms if rescored else math.inf
        f_ms = fbest.ms if fbest else math.inf
        if rescored is not None and _status(rescored) in ("spills", "dead_num_stages"):
            verdict = "estimate winner rejected"  # by the compiler: the facts-aware objective scores it inf
        else:
            verdict = ("facts better" if f_ms < e_ms * (1 - 1e-9) else "same" if _cmp(f_ms, e_ms, 1e-9) == 0
                       else "estimate better")
        runs.append({
            "seed": seed,
            "estimate_search": None if best is None else {
                "variant": best.variant, "config": best.config, "est_ms": best.predicted_ms,
                "facts_ms": _finite(e_ms), "status": _status(rescored), "reason": rescored.error,
                "kernels": _kernels(rescored.facts), "evaluations": len(sc), "seconds": round(est_s, 2)},
            "facts_search": None if fbest is None else {
                "variant": fbest.variant, "config": fbest.config, "facts_ms": fbest.ms,
                "est_ms": est.predict(_point(fbest)).predicted_ms, "kernels": _kernels(fbest.facts),
                "evaluations": len(sf), "seconds": round(fac_s, 2),
                "skipped_by_compiler": sum(1 for s in sf if s.error and s.error.startswith("compiler:")),
                "skipped_by_reason": {k: sum(1 for s in sf if _status(s) == k) for k in ("spills", "dead_num_stages")},
                "skipped_by_kernel": _by_kernel(sf),
                "est_rank": est_rank.get(space.key(_point(fbest))),
                "no_facts": sum(1 for s in sf if s.error is None and s.facts is None)},
            "compiled": facts.compiled - c0,
            "verdict": verdict,
            "facts_search_over_estimate_search": (f_ms / e_ms) if math.isfinite(e_ms) and math.isfinite(f_ms) else None,
            "facts_search_over_topk_best": (f_ms / ref) if ref and math.isfinite(f_ms) else None,
        })
    out["search"] = {"strategy": args.strategy, "budget": budget, "fraction": budget / size, "runs": runs}

    # the best config under facts among everything compiled (top K, spread, both searches), against
    # the estimate's #1: what ranking by the estimate alone leaves on the table, by the facts' own account
    ms, s = min(seen.values(), key=lambda t: t[0]) if seen else (None, None)
    out["best_seen"] = None if s is None else {
        "variant": s.variant, "config": s.config, "facts_ms": ms, "est_rank": est_rank.get(space.key(_point(s))),
        "est_ms": est.predict(_point(s)).predicted_ms, "kernels": _kernels(s.facts), "compiled_points": len(seen),
        "est_top1_facts_over_best": (top["facts_ms"] / ms) if top["facts_ms"] else None}
    return out


# ------------------------------------------------------------------------------ report
def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _regs(k: list[dict] | None) -> str:
    if not k:
        return "-"
    m = k[0]
    return f"{m['regs']}r/{m['smem_bytes'] // 1024 if m['smem_bytes'] >= 1024 else m['smem_bytes']}" \
           f"{'K' if m['smem_bytes'] >= 1024 else 'B'}/{m['num_warps']}w"


def _f(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(doc: dict[str, Any]) -> str:
    lines = [f"compiler facts vs estimate, {doc['target']} ({doc['arch']}), {doc['date']} -- PREDICTED (cost model + "
             f"static compile, nothing run on a GPU)",
             f"{'problem':38s} {'space':>6s} {'ties':>4s} {'K':>3s} {'rej sp/st':>9s} {'#1 ok':>5s} {'new#1':>5s} "
             f"{'new/est#1':>9s} {'tau':>5s} {'rho':>5s} {'tauS':>5s} {'rejS':>4s} {'est#1 r/smem/w':>14s} "
             f"{'e#1/best':>8s} {'best@':>6s}  search: est-winner facts ms | facts-winner ms (verdict)"]
    for r in doc["problems"]:
        t = r["topk"]
        new = t["facts_top1"]
        srch = []
        for run in r["search"]["runs"]:
            e, f = run["estimate_search"] or {}, run["facts_search"] or {}
            e_s = _f(e.get("facts_ms"), "{:.4f}") if e.get("status") == "ok" else f"REJ({e.get('status')})"
            srch.append(f"{e_s} | {_f(f.get('facts_ms'), '{:.4f}')} ({run['verdict']})")
        sp, best = r["spread"], r["best_seen"] or {}
        lines.append(
            f"{r['label'][:38]:38s} {r['space_size']:6d} {r['estimate_ties_with_top1']:4d} {t['k']:3d} "
            f"{t['rejected_by_reason']['spills']:4d}/{t['rejected_by_reason']['dead_num_stages']:<4d} "
            f"{'yes' if t['est_top1_survives'] else 'NO':>5s} {new['est_position'] if new else '-':>5} "
            f"{_f(t['facts_top1_over_est_top1']):>9s} {_f(t['kendall_tau_b'], '{:+.2f}'):>5s} "
            f"{_f(t['spearman_rho'], '{:+.2f}'):>5s} {_f(sp['kendall_tau_b'], '{:+.2f}'):>5s} "
            f"{sum(sp['rejected_by_reason'].values()):2d}/{sp['points']:<2d}"
            f"{_regs(t['est_top1']['kernels']):>14s} {_f(best.get('est_top1_facts_over_best')):>8s} "
            f"{best.get('est_rank') or '-':>6}  " + "; ".join(srch))
    lines.append("ties: configs tied with the estimate's #1; rej sp/st: of the estimate's top K, rejected by the "
                 "compiler for spills / for num_stages > 1 with no pipelined load; '#1 ok': the estimate's #1 "
                 "survives; new#1: the facts' #1 of the top K, its position in the estimate; new/est#1: its time "
                 "with facts / the estimate's #1 time without; tau/rho: Kendall tau-b / Spearman between the two "
                 "rankings on the top-K survivors ('-': undefined, the estimate ties them all); tauS, rejS: tau and "
                 "rejections with the spread sample of the rest of the ranking added; r/smem/w: registers per "
                 "thread, shared memory, warps of the estimate #1's main kernel; e#1/best: the estimate #1's time "
                 "with facts / the best time with facts among every config compiled (top K, spread, searches), "
                 "best@: that config's rank in the estimate.")
    agg: dict[str, int] = {}
    for r in doc["problems"]:
        parts = [r["topk"].get("rejected_by_kernel", {}), r["spread"].get("rejected_by_kernel", {})]
        parts += [run["facts_search"].get("skipped_by_kernel", {})
                  for run in r["search"]["runs"] if run["facts_search"]]
        for part in parts:
            for k, n in part.items():
                agg[k] = agg.get(k, 0) + n
    lines.append("compiler rejections by kernel (top K, spread and facts-aware searches, all problems): "
                 + (", ".join(f"{k} x{n}" for k, n in sorted(agg.items())) or "none"))
    lines.append(f"total {doc['seconds']:.0f} s on {doc['machine']['cpu']} ({doc['machine']['cpus']} CPUs), "
                 f"{doc['compiled']} configs compiled (facts cache "
                 f"{'warm' if doc['cache_entries_at_start'] else 'cold'}"
                 f": {doc['cache_entries_at_start']} entries at start)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="h200")
    ap.add_argument("--k", type=int, default=24, help="top-K of the estimate ranking to compile")
    ap.add_argument("--spread", type=int, default=8, help="points compiled at evenly spaced positions of the rest "
                    "of the estimate ranking (rank correlation over its whole range)")
    ap.add_argument("--strategy", default="evolutionary")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--budget-frac", type=float, default=0.05, help="search budget: this fraction of the space ...")
    ap.add_argument("--budget-min", type=int, default=16, help="... at least this many evaluations ...")
    ap.add_argument("--budget-cap", type=int, default=64, help="... at most this many (each one compiles)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-enumerate", type=int, default=400_000, help="sample instead above this space size")
    ap.add_argument("--sample", type=int, default=4096, help="points sampled where the space is not enumerated")
    ap.add_argument("--only", default="", help="comma-separated substrings of problem labels")
    ap.add_argument("--quick", action="store_true", help="two small problems, K=4, budget 8, one seed")
    ap.add_argument("--facts-dir", type=Path, default=None, help="compiler-facts cache (default: WARPSMITH_FACTS_DIR)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "cost-model")
    args = ap.parse_args(argv)
    if args.quick:
        args.k, args.spread, args.budget_cap, args.budget_min, args.seeds = min(args.k, 4), 2, 8, 8, 1

    from warpsmith.targets.compiler import CompilerFacts
    from warpsmith.core.settings import settings
    from warpsmith.targets import get_target, versions

    target = get_target(args.target)
    cache = args.facts_dir or settings().facts_dir
    entries = sum(1 for _ in cache.glob("*/*.json")) if cache.is_dir() else 0
    facts = CompilerFacts(target, cache)
    probs = [p for p in problems(args.quick)
             if not args.only or any(s.strip() and s.strip() in p["label"] for s in args.only.split(","))]
    t0 = time.perf_counter()
    rows = []
    try:
        for prob in probs:
            t1 = time.perf_counter()
            r = rank_problem(prob, target, facts, args)
            r["seconds"] = round(time.perf_counter() - t1, 1)
            rows.append(r)
            t = r["topk"]
            print(f"{prob['label']:40s} rejected {t['rejected']}/{t['k']} (spills {t['rejected_by_reason']['spills']}, "
                  f"dead stages {t['rejected_by_reason']['dead_num_stages']}), #1 survives: {t['est_top1_survives']}, "
                  f"tau {_f(t['kendall_tau_b'], '{:+.2f}')}, {r['seconds']:.0f} s", flush=True)
    finally:
        facts.close()
    date = _dt.date.today().isoformat()
    doc = {
        "benchmark": "compiler_facts_ranking", "date": date, "target": target.name, "arch": target.arch,
        "timing_kind": "predicted", "statement": STATEMENT.format(arch=target.arch),
        "versions": versions(),
        "machine": {"cpu": _cpu(), "cpus": os.cpu_count(), "platform": platform.platform(), "gpu": None},
        "settings": {"k": args.k, "spread": args.spread, "strategy": args.strategy, "seeds": args.seeds,
                     "budget_frac": args.budget_frac,
                     "budget_min": args.budget_min, "budget_cap": args.budget_cap, "batch": args.batch,
                     "max_enumerate": args.max_enumerate},
        "quick": args.quick, "cache_entries_at_start": entries, "compiled": facts.compiled,
        "seconds": round(time.perf_counter() - t0, 1), "problems": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"compiler_facts_ranking_{target.name}{'_quick' if args.quick else ''}_{date}.json"
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(f"wrote {path}")
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
