"""The learned move prior of the search over rewrite sequences, measured: collect the moves the search
evaluates on a set of problems, then, held out by problem, compare the prior's order with the cost
model's margins (compiler/move_prior.py).

1. **Collect.** Each problem is captured, lowered and searched (compiler.sequence.search_sequences, the
   moves in the margins' order, ``--sequences`` states, at most ``--seconds`` per problem); no program
   is emitted or verified, since only the search's moves are wanted. Problems: the compiler's test
   problems (tests/compiler/problems/*.py) and, with ``--repo`` (a KernelBench clone), KernelBench
   level 2's non-convolution problems at the capped sizes benchmarks/kernelbench.py uses. Every
   outcome is the program cost model's prediction (``timing_kind: predicted``) for ``--target``.
2. **Evaluate.** Leave one problem out: Spearman against the realised outcome of the prior's predicted
   outcome and of the margin (both ascending keys: positive = moves tried earlier fared better),
   pooled and within each held-out problem (compiler.move_prior.evaluate).
3. **Use (``--ab``).** For each problem, the search again with the prior trained without that problem,
   at the same budget: the winner's predicted time against the margins' search's.

Writes a markdown table and the JSON (records included) where asked::

    python benchmarks/move_prior.py --repo /tmp/KernelBench --sequences 16 --ab \\
        --markdown benchmarks/results/cpu/move_prior_2026-12-07.md --json benchmarks/results/cpu/move_prior_2026-12-07.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from warpsmith.compiler import move_prior as mp  # noqa: E402
from warpsmith.compiler.capture import capture, load_problem  # noqa: E402
from warpsmith.compiler.ir import build  # noqa: E402
from warpsmith.compiler.lower import lower  # noqa: E402
from warpsmith.compiler.sequence import search_sequences  # noqa: E402
from warpsmith.targets import get_target  # noqa: E402

PROBLEMS = ROOT / "tests" / "compiler" / "problems"


def problems(repo: Path | None, cap: int, workdir: Path, limit: int) -> list[tuple[str, Path, list[str]]]:
    """(name, file, --set overrides): the test problems, then KernelBench level 2's non-convolution ones."""
    out = [(f"tests/{f.stem}", f, []) for f in sorted(PROBLEMS.glob("*.py"))]
    if repo is not None:
        import kernelbench as kb

        folder = repo / "KernelBench" / "level2"
        files = sorted(folder.glob("*.py"), key=lambda f: int(f.name.split("_")[0]) if f.name[0].isdigit() else 0)
        for f in files:
            if kb.category(f.name) == "convolution":
                continue
            plan = kb.plan(f.read_text(), cap, kb.WORK_BUDGET)
            if plan["gpu_only"]:
                continue
            path = f
            if plan["tuples"] or plan["inner"]:
                path = workdir / f.stem / f.name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(plan["source"])
            out.append((f"kb2/{f.stem}", path, list(plan["sets"])))
    return out[:limit] if limit else out


def lowered(path: Path, sets: list[str]) -> Any:
    g = build(capture(load_problem(path, overrides=sets or None)))
    lower(g)
    return g


def search(g: Any, target: Any, budget: int, strategy: str, seconds: float, prior: Any) -> Any:
    t0 = time.monotonic()
    return search_sequences(g, target, budget, 0, strategy=strategy, prior=prior,
                            stop=lambda: time.monotonic() - t0 > seconds)[1]


def collect(items: list[tuple[str, Path, list[str]]], target: Any, budget: int, strategy: str,
            seconds: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    records: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    graphs: dict[str, Any] = {}
    for name, path, sets in items:
        t0 = time.monotonic()
        try:
            g = lowered(path, sets)
            rec = search(g, target, budget, strategy, seconds, None)
        except Exception as e:  # noqa: BLE001 - a problem the compiler cannot take: reported, skipped
            rows.append({"problem": name, "error": f"{type(e).__name__}: {str(e)[:160]}",
                         "seconds": round(time.monotonic() - t0, 1)})
            print(f"{name}: {rows[-1]['error']}", flush=True)
            continue
        graphs[name] = (path, sets)
        q = rec.to_json()
        moves = mp.stamped(name, q["moves"])
        records += moves
        rows.append({"problem": name, "states": q["evaluated"], "moves": len(moves),
                     "paid": sum(map(mp.paid, moves)),
                     "dead_ends": sum(m["dead_end"] for m in moves), "predicted_ms": q["predicted_ms"],
                     "greedy_rewrites_ms": q["greedy_rewrites_ms"], "stopped": q["stopped"],
                     "seconds": round(time.monotonic() - t0, 1)})
        print(f"{name}: {len(moves)} moves, {rows[-1]['paid']} paid, {rows[-1]['dead_ends']} dead ends "
              f"({rows[-1]['seconds']} s)", flush=True)
    return records, rows, graphs


def ab(records: list[dict[str, Any]], graphs: dict[str, Any], rows: list[dict[str, Any]], target: Any,
       budget: int, strategy: str, seconds: float) -> list[dict[str, Any]]:
    """Each problem with moves searched again under the prior trained without it."""
    out = []
    base = {r["problem"]: r for r in rows if "error" not in r}
    for name, (path, sets) in graphs.items():
        if not base[name]["moves"]:
            continue
        train_set = [r for r in records if r["problem"] != name]
        try:
            prior = mp.train(train_set, target.name)
        except ValueError as e:
            out.append({"problem": name, "skipped": str(e)[:200]})
            continue
        t0 = time.monotonic()
        rec = search(lowered(path, sets), target, budget, strategy, seconds, prior).to_json()
        margin_ms, prior_ms = base[name]["predicted_ms"], rec["predicted_ms"]
        first_paid = [i for i, m in enumerate(rec["moves"]) if mp.paid(m)]
        out.append({"problem": name, "margin_ms": margin_ms, "prior_ms": prior_ms,
                    "ratio": margin_ms / prior_ms if prior_ms else None, "prior_states": rec["evaluated"],
                    "prior_first_paying_move": first_paid[0] if first_paid else None,
                    "seconds": round(time.monotonic() - t0, 1)})
        print(f"ab {name}: margins {margin_ms * 1e3:.3f} us, prior {prior_ms * 1e3:.3f} us", flush=True)
    return out


def fmt(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:+.3f}"


def markdown(doc: dict[str, Any]) -> str:
    rep, setup = doc["evaluation"], doc["setup"]
    rows = [r for r in doc["problems"] if "error" not in r]
    lines = [f"# The learned move prior, measured ({setup['date'][:10]})", "",
             f"Machine: {setup['machine']}. Every outcome is the program cost model's prediction for "
             f"{setup['target']} (`timing_kind: predicted`): outcome = log(child predicted_ms / parent predicted_ms) "
             f"of one flip of the search over rewrite sequences. Search: {setup['strategy']}, {setup['sequences']} "
             f"states, at most {setup['seconds']} s per problem, moves in the margins' order. Command: "
             f"`{setup['command']}`.", "",
             f"Problems: {len(rows)} searched ({sum(1 for r in doc['problems'] if 'error' in r)} not captured or "
             f"lowered), {sum(r['moves'] for r in rows)} moves, {sum(r['dead_ends'] for r in rows)} dead ends "
             f"(excluded), {sum(r['paid'] for r in rows)} moves that paid (outcome < 0); "
             f"{rep['records']} trainable moves of {rep['problems']} problems.", "",
             f"Held out by problem ({rep['split']}); Spearman against the realised outcome, both keys ascending "
             f"(positive = moves tried earlier fared better):", "",
             "| ordering key | pooled | mean within a problem |", "|---|---|---|",
             f"| learned prior (predicted outcome) | {fmt(rep['spearman_pooled']['prior'])} | "
             f"{fmt(rep['spearman_within_mean'].get('prior'))} |",
             f"| cost model's margin at the site | {fmt(rep['spearman_pooled']['margin'])} | "
             f"{fmt(rep['spearman_within_mean'].get('margin'))} |", "",
             f"Within-problem means over the {rep['within_mean_problems']} held-out problems with at least 3 moves "
             "where both correlations are defined (a problem whose outcomes or keys are all equal has none).", ""]
    if not any(r["paid"] for r in rows):
        lines += ["No move lowered the predicted time on these problems (the greedy rewrites were already the "
                  "best state the search met), so no order of the moves can reach a better winner here: the "
                  "correlations only rank how much worse each flip was.", ""]
    if doc.get("ab"):
        done = [r for r in doc["ab"] if r.get("ratio")]
        better = sum(r["ratio"] > 1 + 1e-9 for r in done)
        worse = sum(r["ratio"] < 1 - 1e-9 for r in done)
        geo = math.exp(sum(math.log(r["ratio"]) for r in done) / len(done)) if done else float("nan")
        lines += ["Use: each problem with moves searched again with the prior trained without it, same budget: "
                  f"{better} problems with a lower predicted time than the margins' search, {worse} higher, "
                  f"{len(done) - better - worse} equal; geometric mean margins/prior {geo:.4f}x (predicted).", ""]
    lines += ["| problem | moves | paid | dead ends | within: prior | within: margin |", "|---|---|---|---|---|---|"]
    for r in rows:
        w = rep["within_problem"].get(r["problem"], {})
        lines.append(f"| {r['problem']} | {r['moves']} | {r['paid']} | {r['dead_ends']} | {fmt(w.get('prior'))} | "
                     f"{fmt(w.get('margin'))} |")
    p, m = rep["spearman_pooled"]["prior"], rep["spearman_pooled"]["margin"]
    verdict = ("beats" if p > m else "does not beat") if math.isfinite(p) and math.isfinite(m) else "cannot be compared with"
    lines += ["", f"Verdict (pooled, held out): the prior {verdict} the margin ordering on these predicted outcomes."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=Path, default=None, help="a KernelBench clone (adds level 2's non-conv problems)")
    p.add_argument("--cap", type=int, default=32, help="largest top-level int constant kept (benchmarks/kernelbench.py)")
    p.add_argument("--target", default="h100")
    p.add_argument("--sequences", type=int, default=16, help="states per search (solve's default is 8)")
    p.add_argument("--strategy", default="hill", choices=("hill", "mcts"))
    p.add_argument("--seconds", type=float, default=40.0, help="search time per problem (then its best so far)")
    p.add_argument("--limit", type=int, default=0, help="at most this many problems (0: all)")
    p.add_argument("--ab", action="store_true", help="also search each problem again under the held-out prior")
    p.add_argument("--moves", type=Path, default=None, help="also write the records here as JSONL")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None)
    a = p.parse_args(argv)
    target = get_target(a.target)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="warpsmith-move-prior-") as tmp:
        items = problems(a.repo, a.cap, Path(tmp), a.limit)
        records, rows, graphs = collect(items, target, a.sequences, a.strategy, a.seconds)
        rep = mp.evaluate(records, target.name)
        print(mp.summary_line(rep), flush=True)
        use = ab(records, graphs, rows, target, a.sequences, a.strategy, a.seconds) if a.ab else None
    command = "python benchmarks/move_prior.py " + " ".join(argv if argv is not None else sys.argv[1:])
    doc = {"setup": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "target": target.name,
                     "machine": f"{platform.machine()} CPU ({os.cpu_count()} cores), {platform.system()}, no GPU",
                     "sequences": a.sequences, "strategy": a.strategy, "seconds": a.seconds, "cap": a.cap,
                     "command": command, "wall_s": round(time.monotonic() - t0, 1),
                     "timing_kind": mp.TIMING_KIND, "outcome": mp.TRAINING_TARGET},
           "evaluation": rep, "ab": use, "problems": rows, "records": records}
    text = markdown(doc)
    print(text)
    if a.moves:
        a.moves.parent.mkdir(parents=True, exist_ok=True)
        a.moves.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    if a.markdown:
        a.markdown.parent.mkdir(parents=True, exist_ok=True)
        a.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
