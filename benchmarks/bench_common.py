"""Helpers shared by the benchmark scripts (matmul.py, memory_bound.py).

Importing it makes the checkout's ``src/`` importable when warpsmith is not installed, so a
script runs from a bare checkout (as on the device machine).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

REPO = Path(__file__).resolve().parents[1]
try:  # run from a checkout without installing: use its src/
    import warpsmith  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "src"))


def say(*parts: object) -> None:
    print(*parts, flush=True)  # flushed on every line, whatever PYTHONUNBUFFERED says


def write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # atomic: a killed run leaves the previous complete document


def cuda_broken() -> str | None:
    """A sticky CUDA error (e.g. an illegal address) poisons the context: every later case would fail."""
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        torch.cuda.synchronize()
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


STATIC_TARGET = "h200"  # the device run's GPU (sm_90)


def static_compile(problems: Sequence[Mapping[str, Any]], target: str, sample: int, json_out: Path,
                   check: Callable[..., int] | None = None) -> dict[str, Any]:
    """The static step of a ``--dry-run``: compile ``problems`` (``{"op", "shape", "dtype", "attrs"}``,
    what the real run would launch) for ``target``'s GPU in warpsmith's compile-only process
    (:func:`warpsmith.gpucheck.check_problems`: every variant of each problem at its default config
    and ``sample`` configs drawn from its space, each launched twice through the real launchers;
    nothing runs). Returns the suite JSON's ``static_compile`` section; ``ok`` is False on any
    failure (compile error, launch-time error, shared memory, registers or grid over the target's
    limits, a spill in a default config) or when no report came back. ``check``: a stand-in for
    ``check_problems`` (tests)."""
    if check is None:
        from warpsmith.gpucheck import check_problems as check
    json_out = Path(json_out)
    json_out.unlink(missing_ok=True)  # a report left by an earlier run must not pass for this one's
    t0 = time.perf_counter()
    rc: int | None = None
    error: str | None = None
    if problems:
        say(f"static compile: {len(problems)} problems for {target}, each variant at its default config and "
            f"{sample} sampled, launched twice, compile-only (report {json_out})")
        try:
            rc = check(problems, target, sample, json_out)
        except Exception as exc:  # e.g. the compile-only process could not start: a failure, reported
            error = f"{type(exc).__name__}: {exc}"[:1000]
    report: dict[str, Any] = {}
    if problems and error is None:
        try:
            report = json.loads(json_out.read_text())
        except (OSError, ValueError) as exc:
            error = f"the compile-only process exited with status {rc} and left no readable report ({exc})"[:1000]
    rows = report.get("rows", [])
    failures = [{"op": r.get("op"), "problem": r.get("problem"), "variant": r.get("variant"), "kind": r.get("kind"),
                 "config": r.get("config"), "errors": r.get("errors")} for r in rows if r.get("errors")]
    ok = not problems or (rc == 0 and error is None and report.get("ok") is True and not failures)
    section = {"ok": ok, "exit_status": rc, "error": error, "target": target, "sample": sample,
               "problems": len(problems), "configs": len(rows), "kernels": len(report.get("kernels", [])),
               "failed": len(failures), "with_warnings": sum(1 for r in rows if r.get("warnings")),
               "seconds": round(time.perf_counter() - t0, 1), "triton": report.get("triton"), "arch": report.get("arch"),
               "report": str(json_out) if report else None, "failures": failures}
    say(f"static compile for {target}{' (' + str(section['arch']) + ')' if section['arch'] else ''}: "
        f"{'ok' if ok else 'FAILED'}: {section['configs']} configs compiled ({section['kernels']} kernels) for "
        f"{len(problems)} problems, {len(failures)} failed, {section['with_warnings']} with warnings, "
        f"{section['seconds']:.1f} s" + (f"; {error}" if error else ""))
    return section
