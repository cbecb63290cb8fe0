"""KernelBench coverage of the compiler: ``warpsmith solve --strict`` on every problem of a level.

The public KernelBench repository is read at run time (``--repo`` a clone, or ``--fetch`` to clone
it into a temporary folder); nothing of it is vendored here. Each problem's top-level integer
constants above ``--cap`` are rewritten to ``--cap`` (``--cap - 1`` where the constant was odd, to
keep odd sizes odd) through ``solve --set``, so that the program is compiled and checked at sizes
a CPU runs under Triton's interpreter; the compiled program is specialized to those sizes.

Every problem runs as its own ``warpsmith solve --strict`` process with a time limit. Outcomes:

- ``solved``: verified by ``warpsmith check``, no ATen fallback (exit 0);
- ``fallbacks``: ``--strict`` refused it; the fallback ops are listed (what is missing);
- ``rejected``: the check rejected the program (a compiler bug: the reason is kept);
- ``capture``: the problem could not be captured or built (exit 2);
- ``timeout``.

Usage::

    python benchmarks/kernelbench.py --fetch --levels 1,2 --json kb.json
    python benchmarks/kernelbench.py --repo /path/to/KernelBench --levels 1 --limit 10

The table printed at the end (and ``--markdown FILE``) gives per level the counts by outcome and by
category, the solve times, and the most frequent missing ops.
"""
from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

URL = "https://github.com/ScalingIntelligence/KernelBench"
CATEGORIES = (("convolution", r"conv"), ("pooling", r"pool"), ("attention", r"attention"),
              ("normalization", r"norm"), ("matmul", r"matmul|gemm|matrix|bmm|linear|dense|mlp"),
              ("loss", r"loss|entropy|hinge|divergence"), ("reduction", r"sum|mean|max|min|argm|reduction|prod"),
              ("scan", r"cumsum|cumprod|scan"))


def category(name: str) -> str:
    low = name.lower()
    for cat, pat in CATEGORIES:
        if re.search(pat, low):
            return cat
    return "elementwise/other"


def _int_value(v: ast.expr) -> int | None:
    """The value of an integer constant expression (``2048 * 2``, ``1 << 12``), else None."""
    if not all(isinstance(n, (ast.Expression, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop))
               for n in ast.walk(v)):
        return None
    try:
        x = eval(compile(ast.Expression(v), "<constant>", "eval"), {"__builtins__": {}})  # noqa: S307 - constants only
    except Exception:  # noqa: BLE001
        return None
    return x if type(x) is int else None


def _capped(x: int, cap: int) -> int:
    return x if x <= cap else cap - 1 if x % 2 else cap


def caps(source: str, cap: int) -> list[str]:
    """``NAME=VALUE`` overrides bringing the problem's top-level int constants (literals or constant
    expressions such as ``2048 * 2``) down to ``cap``."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            x = _int_value(node.value)
            if x is not None and x > cap:
                out.append(f"{node.targets[0].id}={_capped(x, cap)}")
    return out


def capped_source(source: str, cap: int) -> tuple[str, list[str]]:
    """The problem's source with the top-level int constants ``--set`` cannot reach capped in place, and
    what was changed: tuples of ints (``input_shape = (32768,)``, element-wise), chained assignments
    (``height = width = 128``) and unpacking (``depth, height, width = 16, 32, 32``)."""
    tree = ast.parse(source)
    changed = []
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        x = _int_value(node.value)
        if len(node.targets) > 1 and len(names) == len(node.targets) and x is not None and x > cap:
            node.value = ast.Constant(_capped(x, cap))
            changed += [f"{n}={_capped(x, cap)}" for n in names]
            continue
        t = node.targets[0]
        if len(node.targets) == 1 and isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and \
                len(t.elts) == len(node.value.elts) and all(isinstance(e, ast.Name) for e in t.elts):
            vals = [_int_value(e) for e in node.value.elts]
            if any(v is not None and v > cap for v in vals):
                node.value.elts = [ast.Constant(_capped(v, cap)) if v is not None else e
                                   for v, e in zip(vals, node.value.elts)]
                changed += [f"{e.id}={_capped(v, cap)}" for e, v in zip(t.elts, vals) if v is not None and v > cap]
            continue
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                isinstance(node.value, (ast.Tuple, ast.List)):
            vals = [_int_value(e) for e in node.value.elts]
            if vals and all(v is not None for v in vals) and any(v > cap for v in vals):
                new = [_capped(v, cap) for v in vals]
                node.value = ast.Tuple([ast.Constant(v) for v in new], ast.Load()) if isinstance(node.value, ast.Tuple) \
                    else ast.List([ast.Constant(v) for v in new], ast.Load())
                changed.append(f"{node.targets[0].id}={tuple(new)}")
    return (ast.unparse(tree) + "\n" if changed else source), changed


def run_one(path: Path, cap: int, timeout: float, workdir: Path) -> dict:
    source, tuples = capped_source(path.read_text(), cap)
    sets = caps(source, cap)
    if tuples:  # a capped copy of the problem, in a folder of its own
        copy = workdir / path.stem / path.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(source)
        path = copy
    report = workdir / f"{path.stem}.json"
    cmd = [sys.executable, "-m", "warpsmith.cli.main", "solve", str(path), "--strict", "--json", str(report)]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.time()
    row = {"problem": path.name, "category": category(path.name), "sets": sets + tuples}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1")})
    except subprocess.TimeoutExpired:
        row.update(outcome="timeout", seconds=round(time.time() - t0, 1))
        return row
    row["seconds"] = round(time.time() - t0, 1)
    doc = json.loads(report.read_text()) if report.exists() else {}
    fallbacks = sorted({f["op"] for f in doc.get("fallbacks", [])})
    if r.returncode == 0:
        row["outcome"] = "solved"
    elif r.returncode == 2:
        row.update(outcome="capture", reason=(r.stderr.strip().splitlines() or [""])[-1][:300])
    elif doc.get("status") == "refused":
        row.update(outcome="fallbacks", fallbacks=fallbacks)
    else:
        verdict = doc.get("check") or {}
        row.update(outcome="rejected", reason=f"{verdict.get('reason')}: {str(verdict.get('message'))[:300]}"
                   if verdict else (r.stderr.strip().splitlines() or [""])[-1][:300])
    return row


def table(rows: list[dict], levels: list[int]) -> str:
    out = []
    for lv in levels:
        rs = [r for r in rows if r["level"] == lv]
        if not rs:
            continue
        c = collections.Counter(r["outcome"] for r in rs)
        non_conv = [r for r in rs if r["category"] != "convolution"]
        solved_nc = sum(r["outcome"] == "solved" for r in non_conv)
        times = sorted(r["seconds"] for r in rs if r["outcome"] == "solved")
        med = times[len(times) // 2] if times else 0
        out.append(f"### level {lv}: {len(rs)} problems")
        out.append(f"solved strictly {c['solved']}, refused for fallbacks {c['fallbacks']}, rejected {c['rejected']}, "
                   f"not captured {c['capture']}, timeout {c['timeout']}; non-convolution: {solved_nc} of "
                   f"{len(non_conv)} solved strictly; median solve time {med} s")
        out.append("")
        out.append("| category | problems | solved | fallbacks | rejected | not captured | timeout |")
        out.append("|---|---|---|---|---|---|---|")
        for cat in sorted({r["category"] for r in rs}):
            cs = collections.Counter(r["outcome"] for r in rs if r["category"] == cat)
            out.append(f"| {cat} | {sum(cs.values())} | {cs['solved']} | {cs['fallbacks']} | {cs['rejected']} | "
                       f"{cs['capture']} | {cs['timeout']} |")
        missing = collections.Counter(op for r in rs for op in r.get("fallbacks", []))
        if missing:
            out.append("")
            out.append("most frequent missing ops: " + ", ".join(f"{op} ({n})" for op, n in missing.most_common(12)))
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--repo", type=Path, help="a clone of KernelBench")
    src.add_argument("--fetch", action="store_true", help=f"clone {URL} into a temporary folder")
    p.add_argument("--levels", default="1,2")
    p.add_argument("--cap", type=int, default=32, help="largest value kept for a top-level int constant")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per problem")
    p.add_argument("--limit", type=int, default=0, help="at most this many problems per level (0: all)")
    p.add_argument("--only", default="", help="a regular expression problems' file names must match")
    p.add_argument("--skip-category", default="", help="comma-separated categories to leave out (e.g. convolution)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None)
    a = p.parse_args(argv)
    levels = [int(x) for x in a.levels.split(",") if x]
    tmp = tempfile.TemporaryDirectory(prefix="warpsmith-kernelbench-")
    repo = a.repo
    if a.fetch:
        repo = Path(tmp.name) / "KernelBench"
        subprocess.run(["git", "clone", "--depth", "1", URL, str(repo)], check=True)
    rows: list[dict] = []
    for lv in levels:
        folder = repo / "KernelBench" / f"level{lv}"
        if not folder.is_dir():
            print(f"kernelbench: no {folder}", file=sys.stderr)
            return 2
        files = sorted(folder.glob("*.py"), key=lambda f: int(f.name.split("_")[0]) if f.name[0].isdigit() else 0)
        files = [f for f in files if re.search(a.only, f.name)] if a.only else files
        skip = {c for c in a.skip_category.split(",") if c}
        files = [f for f in files if category(f.name) not in skip]
        files = files[: a.limit] if a.limit else files
        for f in files:
            row = run_one(f, a.cap, a.timeout, Path(tmp.name))
            row["level"] = lv
            rows.append(row)
            extra = row.get("reason") or ", ".join(row.get("fallbacks", []))
            print(f"level {lv} {f.name}: {row['outcome']} ({row['seconds']} s) {extra}"[:300], flush=True)
            if a.json:
                a.json.write_text(json.dumps({"cap": a.cap, "rows": rows}, indent=1))
    text = table(rows, levels)
    print(text)
    if a.markdown:
        a.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
