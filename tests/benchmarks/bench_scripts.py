"""Loading and dry-running the benchmark scripts (shared by their tests)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported as module ``<name>_bench``."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def dry_run(name: str, out: Path, timeout: int, args: tuple[str, ...] = ()) -> tuple[Path, dict, str]:
    """``python benchmarks/<name>.py --dry-run --out OUT [ARGS]`` as a user types it (interpreter, a DB
    that must stay unused); asserts it succeeded and wrote one JSON; returns (out, the JSON, stdout)."""
    env = {**os.environ, "WARPSMITH_INTERPRET": "1", "WARPSMITH_DB": str(out / "must-not-be-used.db")}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), "--dry-run", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=str(out))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    files = sorted(out.glob(f"{name}_*.json"))
    assert len(files) == 1, files
    return out, json.loads(files[0].read_text()), proc.stdout


def fake_check(rc: int, calls: list, failing: str | None = None, report: bool = True):
    """A stand-in for ``warpsmith.gpucheck.check_problems``: records its arguments, writes a report (one
    row per problem, a compile error in the rows whose problem op is ``failing``) unless ``report`` is
    False, and returns ``rc``."""
    def check(problems, target, sample, json_out, timeout=None):
        calls.append({"problems": list(problems), "target": target, "sample": sample, "json_out": Path(json_out)})
        rows = [{"op": p["op"], "problem": f"{p['op']}{p['shape']}", "variant": "v", "kind": "default", "config": {"X": 1},
                 "kernels": [], "warnings": [], "seconds": 0.1,
                 "errors": ["CompilationError on the first launch: simulated"] if p["op"] == failing else []}
                for p in problems]
        if report:
            from warpsmith.targets import get_target

            Path(json_out).write_text(json.dumps({"ok": not any(r["errors"] for r in rows), "triton": "3.x",
                                                  "arch": get_target(target).arch, "kernels": [{"kernel": "k"}],
                                                  "rows": rows}))
        return rc
    return check
