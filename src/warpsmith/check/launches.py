"""The ``memory_safe`` check: the candidate's Triton launches, recorded where they run, proved here.

A race can be exact under Triton's CPU interpreter, which runs a launch's programs one after another:
split-K programs that each load, add and store the same output tile get the right sum there, and a
wrong one on a GPU. An over-read whose values are discarded is invisible too. So every launch the
candidate makes is recorded and proved in bounds and race-free with the symbolic prover, on exactly
what was launched.

**In the candidate's process** (:func:`install`, called by the child before the patch snapshot, so a
candidate that replaces the wrapper is a ``monkey_patch``): Triton's launch path (``JITFunction.run``
and, under the interpreter, ``InterpretedFunction.run``; ``@triton.autotune`` and
``@triton.heuristics`` end there too, with the config they chose) is wrapped to record, per launch,
the kernel's file, function and first line, the grid, and every parameter's value: tensors as shape,
strides, dtype, numel and the storage extent from their first element, numbers as values, dtypes by
name. Records are deduplicated by (kernel, signature; float values left out) and go back with each
call's reply (:func:`take`). Recording is paused while the candidate is timed.

The child is the candidate's: a record is evidence for a rejection only. A candidate that launches
around the wrapper, or forges records, gets no proof (``skipped``: not observed) or a proof of what it
forged; never an acceptance it would not otherwise get.

**In the harness** (:func:`prove`): nothing of the candidate is imported or run in this process. The
kernel's function is read out of the candidate's own files (the KernelBench file, or the sources of a
``solution.json``) by its AST and admitted only if it is plain Triton DSL (the whitelist of
:mod:`warpsmith.verify.symbolic.observed`; anything else is ``not provable: <construct>``, a skip,
not a rejection). The admitted functions and the launches go to a separate process with a time limit
(``observed.main``), which builds a fully concrete launch contract per launch and proves ``in_bounds``
and ``race_free`` (two programs storing one element with plain stores; atomics are fine).

The verdict: ``failed`` when an access is shown out of bounds (an address that does not depend on
loaded values) or two programs are shown to store one element, naming the kernel, the line and the
witness (program ids, lane, offset past the extent, or the two writers and the address); ``passed``
when every observed launch is proved (or settled exhaustively on its one concrete shape); else
``skipped`` with the reason (nothing observed, not provable, the prover's time ran out).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

MAX_RECORDS = 64  # distinct launches recorded per candidate process
MAX_PER_KERNEL = 8  # distinct signatures per kernel
PROOF_BUDGET_S = 120.0  # wall clock for all of a check's proofs (one process)
TIMEOUT_MS = 3_000  # the prover's budget per obligation (z3 resource units, see budget.py)

# ---- the candidate's process -----------------------------------------------------------------------
_STATE: dict[str, Any] = {"on": False, "keys": set(), "new": [], "per_kernel": {}}


def install() -> None:
    """Wrap Triton's launch functions to record each launch (in the child, before the patch snapshot)."""
    classes = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
    except ImportError:  # pragma: no cover - no triton
        return
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover
        pass
    for cls in classes:
        original = cls.__dict__.get("run")
        if original is None or getattr(original, "_warpsmith_recorder", False):
            continue

        def run(self, *args, _original=original, **kwargs):
            if _STATE["on"] and not kwargs.get("warmup"):
                try:
                    _record(self, args, kwargs)
                except Exception:  # noqa: BLE001 - recording never changes what the launch does
                    pass
            return _original(self, *args, **kwargs)

        run._warpsmith_recorder = True  # type: ignore[attr-defined]
        run.__wrapped__ = original  # type: ignore[attr-defined]
        cls.run = run
    _STATE["on"] = True


def recording(on: bool) -> None:
    """Pause (timing: the wrapper's work is not the candidate's) or resume recording."""
    _STATE["on"] = bool(on)


def take() -> list[dict[str, Any]]:
    """The launches recorded since the last call (each distinct launch once per process)."""
    out, _STATE["new"] = _STATE["new"], []
    return out


def _describe(v: Any) -> dict[str, Any]:
    import torch

    if isinstance(v, torch.Tensor):
        size = v.element_size()
        try:
            extent = v.untyped_storage().nbytes() // size - v.storage_offset()
        except Exception:  # noqa: BLE001 - a tensor with no storage (meta, fake)
            extent = -1
        return {"tensor": {"shape": list(v.shape), "strides": list(v.stride()), "dtype": str(v.dtype),
                           "numel": v.numel(), "extent": extent}}
    value = getattr(v, "value", v) if type(v).__name__ == "constexpr" else v
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value}
    if value is None:
        return {"none": True}
    if isinstance(value, str):
        return {"str": value[:200]}
    if type(value).__module__.startswith("triton") and hasattr(value, "name") and "dtype" in type(value).__name__:
        return {"dtype": str(value.name)}
    return {"other": type(value).__name__}


def _record(jit: Any, args: tuple, kwargs: dict) -> None:
    import inspect

    fn = getattr(jit, "fn", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    grid = kwargs.get("grid")
    sig = inspect.signature(fn)
    bound = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
    bound.apply_defaults()
    named = dict(bound.arguments)
    g = grid(named) if callable(grid) else grid
    g = [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
    rec = {"file": inspect.getsourcefile(fn) or code.co_filename, "function": fn.__name__,
           "line": code.co_firstlineno, "grid": g, "args": {k: _describe(v) for k, v in named.items()}}
    kernel = (rec["file"], rec["function"], rec["line"])
    key = json.dumps([kernel, g, {k: ("float" if "float" in d else d) for k, d in rec["args"].items()}],
                     sort_keys=True, default=str)
    if key in _STATE["keys"] or len(_STATE["keys"]) >= MAX_RECORDS:
        return
    if _STATE["per_kernel"].get(kernel, 0) >= MAX_PER_KERNEL:
        return
    _STATE["keys"].add(key)
    _STATE["per_kernel"][kernel] = _STATE["per_kernel"].get(kernel, 0) + 1
    _STATE["new"].append(rec)


# ---- the harness -----------------------------------------------------------------------------------
def merge(into: dict[str, dict], launches: Any) -> None:
    """Add the well-formed records of a reply's ``launches`` to ``into`` (keyed by content: deduplicated
    here, whatever the child did). A malformed record is dropped: it can only have been forged."""
    if not isinstance(launches, list):
        return
    for rec in launches[:MAX_RECORDS]:
        if len(into) >= MAX_RECORDS:
            return
        if not (isinstance(rec, dict) and isinstance(rec.get("file"), str) and isinstance(rec.get("function"), str)
                and type(rec.get("line")) is int and isinstance(rec.get("args"), dict)
                and isinstance(rec.get("grid"), list) and 1 <= len(rec["grid"]) <= 3
                and all(type(x) is int and 0 <= x < 2**31 for x in rec["grid"])):
            continue
        rec = {k: rec[k] for k in ("file", "function", "line", "grid", "args")}
        into.setdefault(json.dumps(rec, sort_keys=True, default=str), rec)


def _sources(candidate: Path) -> dict[str, str]:
    """The candidate's own files: path (as the candidate's process names it, or relative for a
    solution.json's sources) -> text."""
    if candidate.suffix == ".py" and candidate.is_file():
        return {str(candidate): candidate.read_text(errors="replace")}
    from .formats import candidate_form

    try:
        doc = json.loads(candidate_form(candidate, "flashinfer").read_text())
    except Exception:  # noqa: BLE001 - the child loaded it; here it is only read
        return {}
    out = {}
    for src in doc.get("sources") or []:
        if isinstance(src, dict) and isinstance(src.get("path"), str) and isinstance(src.get("content"), str):
            out[src["path"]] = src["content"]
    return out


def _source_for(file: str, sources: Mapping[str, str]) -> tuple[str, str] | None:
    """(display name, text) of the candidate file the child's path ``file`` is."""
    if file in sources:
        return Path(file).name, sources[file]
    parts = PurePosixPath(file).parts
    for rel, text in sources.items():
        rp = PurePosixPath(rel).parts
        if rp and len(rp) <= len(parts) and tuple(parts[-len(rp):]) == tuple(rp) and not Path(rel).is_absolute():
            return rel, text
    return None


def _jobs(records: list[dict], candidate: Path, overrides: Mapping[str, Any], kernelbench: bool
          ) -> tuple[list[dict], list[str]]:
    """A proof job per record whose kernel is admitted; and why each other record is not provable."""
    from ..verify.symbolic.observed import Module, find_kernel, kernel_source, refusals

    sources = _sources(candidate)
    jobs, refused = [], []
    modules: dict[str, Any] = {}
    for n, rec in enumerate(records):
        label = f"{rec['function']} ({Path(rec['file']).name}:{rec['line']})"
        found = _source_for(rec["file"], sources)
        if found is None:
            refused.append(f"{label}: its source is not one of the candidate's files")
            continue
        name, text = found
        if name not in modules:
            try:
                modules[name] = Module(text)
            except SyntaxError as e:
                modules[name] = e
        module = modules[name]
        if isinstance(module, SyntaxError):
            refused.append(f"{label}: its file does not parse ({module.msg})")
            continue
        kernel = find_kernel(module, rec["function"], rec["line"])
        if kernel is None:
            refused.append(f"{label}: no top-level function of that name at that line in {name}")
            continue
        why = refusals(module, kernel)
        if why:
            refused.append(f"{label}: not plain Triton DSL: {'; '.join(why[:2])}")
            continue
        f = module.functions[kernel]
        params = [a.arg for a in (*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs)]
        missing = [p for p in params if p not in rec["args"]]
        if missing:
            refused.append(f"{label}: the launch record lacks {', '.join(missing)}")
            continue
        constexprs = [a.arg for a in (*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs)
                      if a.annotation is not None and "constexpr" in ast_text(a.annotation)]
        source, functions = kernel_source(module, kernel)
        constants = dict(module.constants)
        if kernelbench:  # --set rewrote the candidate's own top-level constants too
            constants.update({k: v for k, v in overrides.items() if k in constants})
        jobs.append({"id": n, "kernel": kernel, "filename": name, "source": source, "functions": functions,
                     "constants": constants, "params": params, "constexprs": constexprs,
                     "args": {p: rec["args"][p] for p in params}, "grid": rec["grid"]})
    return jobs, refused


def ast_text(node: Any) -> str:
    import ast

    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ast.unparse(node)


def _run(jobs: list[dict], budget_s: float) -> tuple[dict[int, dict], bool]:
    """The jobs' results from a separate process (observed.main), and whether its time ran out."""
    from ..verify.symbolic.observed import BOOT

    folder = tempfile.mkdtemp(prefix="warpsmith_proofs_")
    jobs_path, out_path = os.path.join(folder, "jobs.json"), os.path.join(folder, "results.jsonl")
    with open(jobs_path, "w") as f:
        json.dump({"jobs": jobs, "timeout_ms": TIMEOUT_MS}, f)
    open(out_path, "w").close()
    cmd = [sys.executable, "-c", BOOT, jobs_path, out_path, str(8 << 30), str(int(budget_s) + 30)]
    timed_out = False
    with open(os.path.join(folder, "log.txt"), "w") as log:
        p = subprocess.Popen(cmd, cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
        try:
            p.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    results = {}
    try:
        for line in Path(out_path).read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict) and isinstance(r.get("id"), int):
                results[r["id"]] = r
        if p.returncode not in (0, None) and not timed_out and len(results) < len(jobs):
            tail = Path(folder, "log.txt").read_text(errors="replace").strip().splitlines()[-1:]
            for j in jobs:
                results.setdefault(j["id"], {"status": "not_provable",
                                             "why": f"the prover's process ended ({p.returncode}): {' '.join(tail)}"})
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return results, timed_out


def _witness(o: dict) -> str:
    cex = o.get("counterexample") or {}
    if o["name"] == "in_bounds":
        prog = ", ".join(str(cex[k]) for k in sorted(cex) if k.startswith("pid"))
        lanes = ", ".join(str(cex[k]) for k in sorted(cex) if k.startswith("lane"))
        its = "; ".join(f"{k} {v}" for k, v in cex.items() if k.startswith("iteration"))
        return (f"program ({prog}), lane ({lanes}){'; ' + its if its else ''}: element offset {cex.get('offset')}"
                f"{_index(cex)} where the last is {cex.get('span')}")
    first = ", ".join(str(cex[k]) for k in sorted(cex) if k.startswith("first.pid"))
    second = ", ".join(str(cex[k]) for k in sorted(cex) if k.startswith("second.pid"))
    return f"programs ({first}) and ({second}) both store element offset {cex.get('address')}{_index(cex)}"


def _index(cex: Mapping[str, Any]) -> str:
    e = cex.get("element")
    return f" (index {e})" if isinstance(e, list) and len(e) > 1 else ""


def _line(o: dict) -> str:
    src = (o.get("counterexample") or {}).get("source")
    if isinstance(src, list):
        src = " and ".join(dict.fromkeys(str(s).rsplit(":", 1)[-1] for s in src))
        return f"line {src}"
    if isinstance(src, str):
        return f"line {src.rsplit(':', 1)[-1]}"
    return o.get("subject", "")


def judge(jobs: list[dict], results: Mapping[int, dict], refused: list[str], timed_out: bool
          ) -> tuple[list[str], list[str], int]:
    """(violations, reasons a launch is not proved, launches proved) from the prover's results."""
    violations, unproved, proved = [], list(refused), 0
    for job in jobs:
        r = results.get(job["id"])
        label = f"{job['kernel']} ({job['filename']}) on grid {tuple(job['grid'])}"
        if r is None:
            unproved.append(f"{label}: the prover's time ({PROOF_BUDGET_S:g} s for all launches) ran out"
                            if timed_out else f"{label}: no result from the prover")
            continue
        if r.get("status") != "done":
            unproved.append(f"{label}: not provable: {r.get('why')}")
            continue
        bad, open_ = [], []
        for o in r.get("obligations") or []:
            status, cex = str(o.get("status")), o.get("counterexample") or {}
            if status == "failed" and o.get("name") in ("in_bounds", "race_free"):
                if any(str(k).startswith("loaded ") for k in cex):
                    open_.append(f"{o.get('subject')}: its address depends on loaded values")
                else:
                    what = "out of bounds" if o["name"] == "in_bounds" else "a race"
                    bad.append(f"{label}, {_line(o)}: {what}: {o.get('subject')}: {_witness(o)}")
            elif status == "proved" or status.startswith("bounded") or "vacuous" in str(o.get("detail")):
                continue
            else:
                open_.append(f"{o.get('name')} of {o.get('subject')}: {status}: {str(o.get('detail'))[:200]}")
        if bad:
            violations += bad
        elif open_:
            unproved.append(f"{label}: not proved: {open_[0]}")
        else:
            proved += 1
    return violations, unproved, proved


def prove(records: list[dict], candidate: str | Path, *, overrides: Mapping[str, Any] | None = None,
          kernelbench: bool = True, budget_s: float = PROOF_BUDGET_S) -> tuple[str, str, int]:
    """The ``memory_safe`` verdict for the observed launches: (passed | failed | skipped, message, launches
    proved). See the module docstring."""
    if not records:
        return "skipped", "no Triton kernel launch was observed", 0
    t0 = time.perf_counter()
    jobs, refused = _jobs(records, Path(candidate), overrides or {}, kernelbench)
    results, timed_out = _run(jobs, budget_s) if jobs else ({}, False)
    violations, unproved, proved = judge(jobs, results, refused, timed_out)
    took = f" ({len(records)} launch(es), {time.perf_counter() - t0:.1f} s)"
    if violations:
        more = f" (+{len(violations) - 2} more)" if len(violations) > 2 else ""
        return "failed", "; ".join(violations[:2]) + more, proved
    if unproved:
        more = f" (+{len(unproved) - 2} more)" if len(unproved) > 2 else ""
        return "skipped", "; ".join(unproved[:2]) + more + took, proved
    return "passed", f"{proved} launch(es) proved in {time.perf_counter() - t0:.1f} s", proved
