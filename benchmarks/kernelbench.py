"""KernelBench coverage of the compiler: ``warpsmith solve --strict`` on every problem of a level.

The public KernelBench repository is read at run time (``--repo`` a clone, or ``--fetch`` to clone
it into a temporary folder); nothing of it is vendored here. Each problem's top-level integer
constants above ``--cap`` are rewritten to ``--cap`` (``--cap - 1`` where the constant was odd, to
keep odd sizes odd) through ``solve --set``, and lists and tuples of them element-wise, so that the
program is compiled and checked at sizes a CPU runs under Triton's interpreter; the compiled
program is specialized to those sizes. Where the capped forward still does more than
``--work-budget`` work, the sizes written inside the model (layer widths, constructor defaults,
literal input shapes) are capped too, each rewrite kept only if the capped model's forward still
runs on the meta device (:func:`plan_caps`).

Every problem runs as its own ``warpsmith solve --strict --timeout`` process. Outcomes:

- ``solved``: verified by ``warpsmith check``, no ATen fallback (exit 0);
- ``fallbacks``: ``--strict`` refused it; the fallback ops are listed (what is missing);
- ``rejected``: the check rejected the program (a compiler bug: the reason is kept);
- ``capture``: the problem could not be captured or built (exit 2);
- ``timeout``: with the stage, candidate and check calls where ``solve --timeout`` stopped;
- ``gpu_only``: no cap the forward allows brings the problem under ``--work-budget`` (the reason
  names the sizes that cannot be capped and the error capping them raises); not run.

Usage::

    python benchmarks/kernelbench.py --fetch --levels 1,2 --json kb.json
    python benchmarks/kernelbench.py --repo /path/to/KernelBench --levels 1 --limit 10
    python benchmarks/kernelbench.py --repo /path/to/KernelBench --levels 3 --timeout 45 --table
    python benchmarks/kernelbench.py --rows kb.json --table

The table printed at the end (and ``--markdown FILE``) gives per level the counts by outcome and by
category, the solve times, the most frequent missing ops and the count "search left greedy on X of Y
solved problems" (:func:`search_summary`, from each report's predicted times); ``--table`` adds one
line per problem, with its search summary.
"""
from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

URL = "https://github.com/ScalingIntelligence/KernelBench"
SOLVE_MARGIN_S = 15.0  # solve gets --timeout (--timeout - this); the process group is killed at --timeout + this
WORK_BUDGET = 2e8  # FLOPs + parameter and input elements of the capped forward (see plan_caps)
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


def _value(v: ast.expr) -> object:
    """The value of a constant expression (``2048 * 2``, ``1 << 12``, ``[1024] * 16``), else None."""
    if not all(isinstance(n, (ast.Expression, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
                              ast.List, ast.Tuple, ast.expr_context)) for n in ast.walk(v)):
        return None
    try:
        return eval(compile(ast.Expression(v), "<constant>", "eval"), {"__builtins__": {}})  # noqa: S307 - constants only
    except Exception:  # noqa: BLE001
        return None


def _int_value(v: ast.expr) -> int | None:
    """The value of an integer constant expression (``2048 * 2``, ``1 << 12``), else None."""
    if isinstance(v, (ast.List, ast.Tuple)) or any(isinstance(n, (ast.List, ast.Tuple)) for n in ast.walk(v)):
        return None
    x = _value(v)
    return x if type(x) is int else None


def _int_seq(v: ast.expr) -> list[int] | tuple[int, ...] | None:
    """The value of a list or tuple of ints written as constants (``[16384, 16384]``, ``[1024] * 16``)."""
    x = _value(v)
    return x if isinstance(x, (list, tuple)) and x and all(type(e) is int for e in x) else None


def _capped(x: int, cap: int) -> int:
    return x if x <= cap else cap - 1 if x % 2 else cap


def caps(source: str, cap: int, only: set[str] | None = None) -> list[str]:
    """``NAME=VALUE`` overrides bringing the problem's top-level int constants (literals or constant
    expressions such as ``2048 * 2``) down to ``cap``; with ``only``, those names only."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            x = _int_value(node.value)
            if x is not None and x > cap and (only is None or node.targets[0].id in only):
                out.append(f"{node.targets[0].id}={_capped(x, cap)}")
    return out


def capped_source(source: str, cap: int, only: set[str] | None = None) -> tuple[str, list[str]]:
    """The problem's source with the top-level int constants ``--set`` cannot reach capped in place, and
    what was changed: tuples and lists of ints (``input_shape = (32768,)``, ``layer_sizes = [16384, 16384]``,
    ``[1024] * 16``, element-wise), chained assignments (``height = width = 128``) and unpacking
    (``depth, height, width = 16, 32, 32``); with ``only``, those names only."""
    tree = ast.parse(source)
    changed = []
    ok = (lambda n: True) if only is None else (lambda n: n in only)
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        x = _int_value(node.value)
        if len(node.targets) > 1 and len(names) == len(node.targets) and x is not None and x > cap:
            if all(ok(n) for n in names):
                node.value = ast.Constant(_capped(x, cap))
                changed += [f"{n}={_capped(x, cap)}" for n in names]
            continue
        t = node.targets[0]
        if len(node.targets) == 1 and isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and \
                len(t.elts) == len(node.value.elts) and all(isinstance(e, ast.Name) for e in t.elts):
            vals = [_int_value(e) if ok(n.id) else None for e, n in zip(node.value.elts, t.elts)]
            if any(v is not None and v > cap for v in vals):
                node.value.elts = [ast.Constant(_capped(v, cap)) if v is not None else e
                                   for v, e in zip(vals, node.value.elts)]
                changed += [f"{e.id}={_capped(v, cap)}" for e, v in zip(t.elts, vals) if v is not None and v > cap]
            continue
        if len(node.targets) == 1 and isinstance(t, ast.Name) and ok(t.id) and _int_value(node.value) is None:
            vals = _int_seq(node.value)
            if vals and any(v > cap for v in vals):
                new = [_capped(v, cap) for v in vals]
                node.value = ast.Tuple([ast.Constant(v) for v in new], ast.Load()) if isinstance(vals, tuple) \
                    else ast.List([ast.Constant(v) for v in new], ast.Load())
                changed.append(f"{t.id}={tuple(new)}")
    return (ast.unparse(tree) + "\n" if changed else source), changed


def _names(items: list[str]) -> list[str]:
    return [i.split("=", 1)[0] for i in items]


def with_sets(source: str, sets: list[str]) -> str:
    """``source`` with the ``NAME=VALUE`` items of :func:`caps` written in place (what ``solve --set`` does)."""
    if not sets:
        return source
    values = dict(s.split("=", 1) for s in sets)
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in values:
            node.value = ast.Constant(int(values[node.targets[0].id]))
    return ast.unparse(tree) + "\n"


def _inner_scopes(tree: ast.Module) -> list[ast.AST]:
    """Where sizes written as literals live: the classes (layer widths, constructor defaults), the
    input builders (``torch.rand(batch_size, 3, 224, 224)``) and top-level tuples or lists that mix
    names and literals (``input_shape = (batch_size, 3, 224, 224)``; all-literal ones are capped with
    the top-level constants, :func:`capped_source`)."""
    return [n for n in tree.body if isinstance(n, ast.ClassDef)
            or isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs")
            or isinstance(n, ast.Assign) and isinstance(n.value, (ast.Tuple, ast.List)) and _int_seq(n.value) is None]


class _InnerCaps(ast.NodeTransformer):
    """Rewrites the int constants above ``cap`` whose value is in ``values`` (None: all): the largest
    constant expressions (``512 * 7 * 7`` as one value), or with ``leaves`` the literals alone
    (``512 * 7 * 7`` becomes ``32 * 7 * 7``, which follows a channel count capped elsewhere). A value
    is brought to ``cap``, or where ``values`` maps it to a size, to that size."""

    def __init__(self, cap: int, values: set[int] | dict[int, int] | None, leaves: bool = False) -> None:
        self.cap, self.values, self.leaves, self.seen, self.done = cap, values, leaves, [], []

    def _to(self, x: int) -> int:
        return self.values[x] if isinstance(self.values, dict) else self.cap

    def visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr) and (not self.leaves or isinstance(node, ast.Constant)):
            x = _int_value(node)
            if x is not None:
                if x > self.cap:
                    self.seen.append(x)
                    if self.values is None or x in self.values:
                        self.done.append(x)
                        return ast.copy_location(ast.Constant(_capped(x, self._to(x))), node)
                return node
        return self.generic_visit(node)


def inner_sizes(source: str, cap: int, leaves: bool = False) -> list[int]:
    """The distinct int sizes above ``cap`` written inside the model's classes and input builders,
    largest first (see :class:`_InnerCaps` for ``leaves``)."""
    t = _InnerCaps(cap, set(), leaves)
    for scope in _inner_scopes(ast.parse(source)):
        t.visit(scope)
    return sorted(set(t.seen), reverse=True)


def inner_capped(source: str, cap: int, values: set[int] | dict[int, int] | None = None, leaves: bool = False) -> str:
    """``source`` with the sizes of :func:`inner_sizes` in ``values`` (None: all) brought down to ``cap``
    (or, where ``values`` maps a size to another, to that one)."""
    tree = ast.parse(source)
    t = _InnerCaps(cap, values, leaves)
    for scope in _inner_scopes(tree):
        t.visit(scope)
    return ast.unparse(tree) + "\n" if t.done else source


def meta_forward(source: str) -> tuple[str | None, float]:
    """Build the problem's model and inputs on the meta device (no memory, no compute) and run its
    forward: ``(None, work)`` when it runs, where work is the FLOPs PyTorch counts plus the elements of
    the parameters and inputs; ``(error, 0)`` when building or the forward raises."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    ns: dict = {"__name__": "kernelbench_problem"}
    try:
        exec(compile(source, "<problem>", "exec"), ns)  # noqa: S102 - the benchmark's own problem files
        with torch.device("meta"):
            torch.manual_seed(0)
            model = ns["Model"](*ns["get_init_inputs"]())
            inputs = ns["get_inputs"]()
            with FlopCounterMode(display=False) as fc:
                model(*inputs)
        numel = sum(p.numel() for p in model.parameters()) + sum(x.numel() for x in inputs if hasattr(x, "numel"))
        return None, float(fc.get_total_flops() + numel)
    except BaseException as e:  # noqa: BLE001 - any failure of the problem's own code is the answer
        if isinstance(e, KeyboardInterrupt):
            raise
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200], 0.0


def _module_capped(source: str, cap: int, only: set[str] | None = None) -> tuple[str, list[str], list[str]]:
    """The top-level caps (``only`` those names): the source with the forms ``--set`` cannot reach capped in
    place, the ``--set`` items, and what was capped in place."""
    src, tuples = capped_source(source, cap, only)
    return src, caps(src, cap, only), tuples


def _inner_targets(v: int, cap: int) -> list[int]:
    """The sizes tried for an inner size ``v`` above ``cap``, smallest first: ``cap``, then doubling
    while below ``v`` (an image of 224 that a network's strides need at 32 or more: 32, 64, 128)."""
    out, to = [], cap
    while to < v:
        out.append(to)
        to *= 2
    return out


def plan_caps(source: str, cap: int, budget: float) -> dict:
    """How a problem is brought to CPU size, decided by building the capped model on the meta device.

    1. The top-level constants (ints, tuples and lists of ints) are capped, as for levels 1 and 2. If
       the forward so capped raises while the original runs, the names are capped one at a time, each
       kept only when the forward still runs (a rewrite whose forward raises is rejected, never taken).
    2. When the work of the capped forward (:func:`meta_forward`) is still above ``budget``, the sizes
       written inside the classes and input builders are capped too: all at once if the forward still
       runs, else one size (every occurrence of one value) at a time, largest first, kept when the
       forward still runs and its work drops; a size the forward refuses at ``cap`` is tried at twice,
       four times ... ``cap`` (below the size as written), the smallest the forward allows taken
       (``inner_to``: an image of 224 kept at 32 where a network's strides need that).
    3. A problem still above ``budget`` with a size left uncapped because capping it breaks the forward
       is ``gpu_only`` (the reason names the sizes and the error).

    Returns ``source`` (to run), ``sets`` (``--set`` items), ``tuples`` (capped in place), ``inner`` (the
    inner sizes capped), ``uncapped`` (what capping breaks, with the error), ``work`` and ``gpu_only``."""
    src, sets, tuples = _module_capped(source, cap)
    out = {"source": src, "sets": sets, "tuples": tuples, "inner": [], "uncapped": [], "work": None,
           "gpu_only": None}
    err, work = meta_forward(with_sets(src, sets))
    if err is not None:
        err0, _ = meta_forward(source)
        if err0 is not None:  # not buildable on the meta device at all: the run decides (as before)
            out["meta"] = f"no meta forward ({err0})"
            return out
        kept: list[str] = []
        for name in _names(sets + tuples):
            s2, st2, t2 = _module_capped(source, cap, set(kept + [name]))
            e, _w = meta_forward(with_sets(s2, st2))
            if e is None:
                kept.append(name)
            else:
                out["uncapped"].append(f"{name} ({e})")
        src, sets, tuples = _module_capped(source, cap, set(kept))
        out.update(source=src, sets=sets, tuples=tuples)
        err, work = meta_forward(with_sets(src, sets))
        assert err is None, err
    out["work"] = work
    if work <= budget:
        return out
    tries = []  # (uncapped, work, source, capped, mode): expressions whole, then literals alone
    for leaves in (False, True):
        sizes = inner_sizes(src, cap, leaves)
        if not sizes:
            continue
        whole = inner_capped(src, cap, None, leaves)
        e, w = meta_forward(with_sets(whole, sets))
        if e is None:
            tries.append(([], w, whole, {v: cap for v in sizes}, leaves))
            break
        kept_v: dict[int, int] = {}
        left: list[str] = []
        cur, w_cur = src, work
        for v in sizes:
            first = None
            for to in _inner_targets(v, cap):  # the cap, else the smallest larger size the forward allows
                trial = inner_capped(src, cap, {**kept_v, v: to}, leaves)
                e, w = meta_forward(with_sets(trial, sets))
                first = first or e
                if e is None:
                    if w < w_cur:
                        kept_v[v] = to
                        cur, w_cur = trial, w
                    break
            else:
                left.append(f"{v} inside the model ({first})")
        tries.append((left, w_cur, cur, kept_v, leaves))
    if tries:
        left, w, cur, kept_v, leaves = min(tries, key=lambda t: (len(t[0]), t[1]))
        out.update(source=cur, inner=list(kept_v), work=w, inner_mode="literals" if leaves else "expressions")
        out["inner_to"] = {v: _capped(v, to) for v, to in kept_v.items() if to != cap}
        out["uncapped"] += left
    if out["work"] > budget and out["uncapped"]:
        out["gpu_only"] = (f"work {out['work']:.3g} > budget {budget:.3g} at the largest caps the forward allows; "
                           f"capping breaks the forward for: " + "; ".join(out["uncapped"][:4]))[:400]
    return out


def plan(source: str, cap: int, budget: float) -> dict:
    """:func:`plan_caps` at ``cap``; when a size is left uncapped there (``groups=3`` wants channels
    divisible by 3; ``n_embd % n_head``), also at ``3 * cap // 4`` (24 for 32: divisible by 2, 3, 4, 6,
    8, 12), the one with fewer uncapped sizes (then less work) taken. ``cap`` says which."""
    best = dict(plan_caps(source, cap, budget), cap=cap)
    alt = 3 * cap // 4
    if best["uncapped"] and alt >= 2:
        other = dict(plan_caps(source, alt, budget), cap=alt)
        if (len(other["uncapped"]), other["work"] or 0) < (len(best["uncapped"]), best["work"] or 0):
            best = other
    return best


RUNNING: set[subprocess.Popen] = set()  # the solve in progress, ended if the driver is stopped (SIGTERM)


def _end(proc: subprocess.Popen) -> None:
    """End a solve's process group (its check's processes run in sessions of their own and end with
    their harness)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stopped(signum: int, _frame: object) -> None:
    for proc in list(RUNNING):
        _end(proc)
    raise SystemExit(128 + signum)


def run_one(path: Path, cap: int, timeout: float, workdir: Path, budget: float = WORK_BUDGET) -> dict:
    plan_ = plan(path.read_text(), cap, budget)
    source, tuples, sets = plan_["source"], plan_["tuples"], plan_["sets"]
    row = {"problem": path.name, "category": category(path.name), "sets": sets + tuples,
           "inner": plan_["inner"], "work": plan_["work"]}
    if plan_.get("inner_to"):
        row["inner_to"] = {str(v): to for v, to in plan_["inner_to"].items()}
    if plan_["cap"] != cap:
        row["cap"] = plan_["cap"]
    if plan_["uncapped"]:
        row["uncapped"] = plan_["uncapped"]
    if plan_.get("meta"):
        row["meta"] = plan_["meta"]
    if plan_["gpu_only"]:
        row.update(outcome="gpu_only", reason=plan_["gpu_only"], seconds=0.0)
        return row
    if tuples or plan_["inner"]:  # a capped copy of the problem, in a folder of its own
        copy = workdir / path.stem / path.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(source)
        path = copy
    report = workdir / f"{path.stem}.json"
    cmd = [sys.executable, "-m", "warpsmith.cli.main", "solve", str(path), "--strict", "--json", str(report),
           "--timeout", f"{max(1.0, timeout - SOLVE_MARGIN_S):g}"]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.time()
    env = {**os.environ, "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # its own group; the check's processes die with it (PR_SET_PDEATHSIG)
    RUNNING.add(proc)
    try:  # solve stops itself (exit 3, a partial report); the margin covers its start and its clean-up
        stdout, stderr = proc.communicate(timeout=timeout + SOLVE_MARGIN_S)
    except subprocess.TimeoutExpired:
        _end(proc)
        _, stderr = proc.communicate()
        last = [ln for ln in (stderr or "").splitlines() if ln.strip()]
        row.update(outcome="timeout", seconds=round(time.time() - t0, 1),
                   reason=f"stopped at: {last[-1][:200]}" if last else "no output")
        return row
    finally:
        RUNNING.discard(proc)
    r = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    row["seconds"] = round(time.time() - t0, 1)
    doc = json.loads(report.read_text()) if report.exists() else {}
    summary = search_summary(doc)
    if summary is not None:
        row["search"] = summary
    fallbacks = sorted({f["op"] for f in doc.get("fallbacks", [])})
    if r.returncode == 3 and doc.get("status") == "timeout":
        w = doc.get("stopped") or {}
        cand = f", candidate {w.get('candidate')}/{w.get('candidates')}" if w.get("candidates") else ""
        row.update(outcome="timeout", stopped=w,
                   reason=f"stopped after {w.get('elapsed_s')} s during {w.get('stage')}{cand}, "
                          f"{w.get('check_calls_all', 0)} check call(s)")
    elif r.returncode == 0:
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


LEFT_GREEDY = 0.05  # a change of the predicted time larger than this share counts as leaving greedy fusion


def search_summary(doc: dict) -> dict | None:
    """What the search did to a problem, from its ``solve --json`` report (None: no search ran).

    All times are the report's, predicted by ``warpsmith.cost.program`` for its target, not measured.
    ``left_greedy_by`` names how the chosen program differs from greedy fusion: ``partition`` (the
    chosen partition is not the greedy one), ``rewrite`` (a rewrite taken or a value hoisted),
    ``tuned config`` (a generated kernel at a searched launch config other than its default, or a
    library call at a tuned config). ``left_greedy`` is true when it differs AND its predicted time
    differs by more than :data:`LEFT_GREEDY` from greedy fusion at default configs
    (``greedy_untuned_ms``, the compiler before the search; ``greedy_ms`` where a report lacks it).
    ``left_greedy_structural`` counts the partition and the rewrites only, against ``greedy_ms``
    (greedy fusion, no rewrite, its generated kernels at their searched configs, its library calls at
    their launchers' tiles), the chosen program's library calls priced at their launchers' tiles too."""
    s = doc.get("search")
    if not s:
        return None
    taken = [f"{r['rewrite']}@{r['at']}" for r in s.get("rewrites", []) if r.get("taken")]
    tuned_kernels = [k["name"] for k in s.get("kernels", []) if k.get("config") != k.get("default_config")]
    tuned_library = [c["node"] for c in s.get("library", []) if c.get("tuned")]
    by = []
    if s.get("chosen_label", "greedy") != "greedy":
        by.append("partition")
    if taken or s.get("hoisted"):
        by.append("rewrite")
    if tuned_kernels or tuned_library:
        by.append("tuned config")
    chosen, greedy = s.get("chosen_ms"), s.get("greedy_ms")
    # the chosen program with its library calls back at the launcher's tiles (greedy_ms prices them so)
    saved = sum(c.get("default_ms", 0.0) - c.get("predicted_ms", 0.0) for c in s.get("library", []) if c.get("tuned"))
    without_library = chosen + saved if chosen is not None else None
    base = s.get("greedy_untuned_ms") or greedy

    def moved(a: float | None, b: float | None) -> bool:
        return bool(a and b is not None and abs(a - b) / a > LEFT_GREEDY)

    return {"target": s.get("target"), "figures": "predicted, not measured",
            "greedy_ms": greedy, "greedy_untuned_ms": s.get("greedy_untuned_ms"), "chosen_ms": chosen,
            "untuned_ms": s.get("untuned_ms"), "chosen": s.get("chosen_label"), "rewrites_taken": taken,
            "greedy_rewrites_ms": (s.get("sequence") or {}).get("greedy_rewrites_ms"),
            "sequence_forced": (s.get("sequence") or {}).get("winner_forced", {}),
            "tuned_kernels": tuned_kernels, "tuned_library": tuned_library,
            "library_tuned": bool(tuned_library), "left_greedy_by": by,
            "left_greedy": bool(by) and moved(base, chosen),
            "left_greedy_structural": bool({"partition", "rewrite"} & set(by)) and moved(greedy, without_library)}


def search_line(rows: list[dict]) -> str:
    """The count of solved problems on which the search left greedy fusion (see :func:`search_summary`)."""
    solved = [r for r in rows if r["outcome"] == "solved"]
    sums = [r.get("search") or {} for r in solved]
    left = sum(bool(s.get("left_greedy")) for s in sums)
    structural = sum(bool(s.get("left_greedy_structural")) for s in sums)
    lib = sum(bool(s.get("library_tuned")) for s in sums)
    return (f"search left greedy on {left} of {len(solved)} solved problems (a different partition, a rewrite or "
            f"a tuned config changing the predicted time by more than {LEFT_GREEDY:.0%}; by partition or rewrite "
            f"alone: {structural}; a library kernel at a tuned config: {lib}; predicted, not measured)")


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
        verifying = sum(r["outcome"] == "timeout" and (r.get("stopped") or {}).get("stage") in ("prove", "check")
                        for r in rs)
        out.append(f"### level {lv}: {len(rs)} problems")
        out.append(f"solved strictly {c['solved']}, refused for fallbacks {c['fallbacks']}, rejected {c['rejected']}, "
                   f"not captured {c['capture']}, timeout {c['timeout']}, gpu_only {c['gpu_only']}; non-convolution: {solved_nc} of "
                   f"{len(non_conv)} solved strictly; median solve time {med} s")
        out.append(search_line(rs))
        if verifying:
            out.append(f"of the timeouts, {verifying} stopped while the program was proved or checked: lowered "
                       "whole, with no ATen fallback (--strict passed), its verdict not known")
        out.append("")
        out.append("| category | problems | solved | fallbacks | rejected | not captured | timeout | gpu_only |")
        out.append("|---|---|---|---|---|---|---|---|")
        for cat in sorted({r["category"] for r in rs}):
            cs = collections.Counter(r["outcome"] for r in rs if r["category"] == cat)
            out.append(f"| {cat} | {sum(cs.values())} | {cs['solved']} | {cs['fallbacks']} | {cs['rejected']} | "
                       f"{cs['capture']} | {cs['timeout']} | {cs['gpu_only']} |")
        missing = collections.Counter(op for r in rs for op in r.get("fallbacks", []))
        if missing:
            out.append("")
            out.append("most frequent missing ops: " + ", ".join(f"{op} ({n})" for op, n in missing.most_common(12)))
        out.append("")
    return "\n".join(out)


OUTCOME = {"solved": "solved strictly", "fallbacks": "fallback", "rejected": "rejected", "timeout": "timeout",
           "gpu_only": "gpu_only", "capture": "not captured"}


def problem_table(rows: list[dict]) -> str:
    """One line per problem: its outcome, the time, and the reason (missing ops, the check's verdict,
    where a timeout stopped, why it is GPU-only) and what was capped inside the model."""
    out = ["| level | problem | outcome | s | reason | sizes capped inside the model | search (predicted us) |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        why = r.get("reason") or ", ".join(r.get("fallbacks", []))
        why = why.replace("|", "/").replace("\n", " ")[:160]
        to = r.get("inner_to", {})
        inner = ", ".join(f"{v} to {to[str(v)]}" if str(v) in to else str(v) for v in r.get("inner", [])[:8])
        out.append(f"| {r['level']} | {r['problem']} | {OUTCOME.get(r['outcome'], r['outcome'])} | {r['seconds']} | "
                   f"{why} | {inner} | {_search_cell(r.get('search'))} |")
    return "\n".join(out)


def _search_cell(s: dict | None) -> str:
    if not s or s.get("chosen_ms") is None:
        return ""
    base = s.get("greedy_untuned_ms") or s.get("greedy_ms")
    by = "+".join(s["left_greedy_by"]) or "greedy"
    return (f"{base * 1e3:.3g} -> {s['chosen_ms'] * 1e3:.3g} ({by}"
            f"{', left greedy' if s.get('left_greedy') else ''})" if base else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--repo", type=Path, help="a clone of KernelBench")
    src.add_argument("--fetch", action="store_true", help=f"clone {URL} into a temporary folder")
    src.add_argument("--rows", type=Path, help="print the tables of an earlier --json file; runs nothing")
    p.add_argument("--levels", default="1,2")
    p.add_argument("--cap", type=int, default=32, help="largest value kept for a top-level int constant")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per problem: solve gets --timeout SECONDS-15 (it stops itself, saying where), and "
                        "its process group is killed at SECONDS+15")
    p.add_argument("--work-budget", type=float, default=WORK_BUDGET,
                   help="largest work (FLOPs + parameter and input elements, counted on the meta device) of a capped "
                        "forward: above it the sizes inside the model are capped too, and a problem still above it "
                        "is reported gpu_only")
    p.add_argument("--table", action="store_true", help="also print one line per problem (outcome and reason)")
    p.add_argument("--limit", type=int, default=0, help="at most this many problems per level (0: all)")
    p.add_argument("--only", default="", help="a regular expression problems' file names must match")
    p.add_argument("--skip-category", default="", help="comma-separated categories to leave out (e.g. convolution)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None)
    a = p.parse_args(argv)
    levels = [int(x) for x in a.levels.split(",") if x]
    signal.signal(signal.SIGTERM, _stopped)
    if a.rows:
        rows = json.loads(a.rows.read_text())["rows"]
        levels = sorted({r["level"] for r in rows})
        print(table(rows, levels))
        if a.table:
            print(problem_table(rows))
        return 0
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
            row = run_one(f, a.cap, a.timeout, Path(tmp.name), a.work_budget)
            row["level"] = lv
            rows.append(row)
            extra = row.get("reason") or ", ".join(row.get("fallbacks", []))
            print(f"level {lv} {f.name}: {row['outcome']} ({row['seconds']} s) {extra}"[:300], flush=True)
            if a.json:
                a.json.write_text(json.dumps({"cap": a.cap, "work_budget": a.work_budget, "timeout": a.timeout,
                                              "rows": rows}, indent=1))
    text = table(rows, levels)
    if a.table:
        text += "\n" + problem_table(rows) + "\n"
    print(text)
    if a.markdown:
        a.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
