"""``warpsmith profile SOLUTION.py``: the kernel sequence of an emitted KernelBench program (a
``ModelNew`` file written by ``warpsmith solve``, which carries the problem's ``get_inputs`` and
``get_init_inputs``), each kernel priced by the static machine-code model.

The program runs once in a compile-only process for the target (``python -m warpsmith.profile.program``,
Triton's real back end, no GPU; every launch is compiled and recorded, none executes, so its outputs
are garbage and never read). Per launch it reports the compiler's facts, the counted machine code and
the bytes of the launch's tensor arguments. A generated kernel has no op definition: its bytes are
those arguments (each read or written once), its FLOPs the instructions' own; every time is predicted.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from ..core.errors import InvalidInputError
from ..targets import KernelFacts, Target
from ..targets.compiler import SassCounts, compile_only_env
from .collect import Profile, kernel_row

ENTRY = ("-m", "warpsmith.profile.program")


def _load(path: Path) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("warpsmith_profiled_program", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    for name in ("ModelNew", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise InvalidInputError(str(path), "an emitted KernelBench solution (ModelNew, get_inputs, "
                                    "get_init_inputs)", f"a file without {name}")
    return module


def record(path: Path, seed: int = 0) -> list[dict[str, Any]]:
    """In the compile-only process: run ``path``'s ``ModelNew`` once and return each launch's facts,
    counted machine code and argument bytes, in launch order."""
    import torch

    from ..targets.compiler import kernel_facts, kernel_sass, recording

    module = _load(path)
    torch.manual_seed(seed)
    model = module.ModelNew(*module.get_init_inputs())
    inputs = module.get_inputs()
    with torch.no_grad(), recording() as launches:
        model(*inputs)
    out = []
    for launch in launches:
        sass = kernel_sass(launch.kernel)
        out.append({"facts": kernel_facts(launch).to_json(), "sass": sass.to_json() if sass else None,
                    "arg_bytes": launch.arg_bytes})
    return out


def profile_program(path: Path, target: Target, timeout: float = 600) -> Profile:
    """Compile and record ``path``'s program for ``target`` in a compile-only process, and price it."""
    path = Path(path)
    if not path.is_file() or path.suffix != ".py":
        raise InvalidInputError("program", "an emitted KernelBench solution file (.py)", str(path))
    proc = subprocess.run([sys.executable, *ENTRY, str(path.resolve())], env=compile_only_env(target),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode == 2:
        raise InvalidInputError("program", "an emitted KernelBench solution (ModelNew, get_inputs, get_init_inputs)",
                                proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else str(path))
    if proc.returncode != 0:
        raise RuntimeError(f"profiling {path} in a compile-only process failed: {proc.stderr.strip()[-1500:]}")
    launches = json.loads(proc.stdout.strip().splitlines()[-1])
    return program_profile(path.name, launches, target)


def program_profile(name: str, launches: Sequence[dict[str, Any]], target: Target) -> Profile:
    """The profile of recorded launches (:func:`record`'s answer)."""
    rows = [kernel_row(KernelFacts.from_json(x["facts"]), SassCounts.from_json(x["sass"]) if x["sass"] else None,
                       target, None, float(x["arg_bytes"]) if x.get("arg_bytes") else None,
                       counted_from="launch arguments") for x in launches]
    kinds = [m.rsplit(".", 1)[-1] for x in launches if x["sass"] for m in x["sass"]["mma"]]
    kind = {"BF16": "bf16", "F16": "fp16", "TF32": "tf32", "E4M3": "fp8", "E5M2": "fp8"}.get(kinds[0], "fp16") \
        if kinds else "fp32"
    flops, nbytes = sum(r.flops for r in rows), sum(r.bytes for r in rows)
    floor = sum(max(r.flops / (target.peak(kind) * 1e12), r.bytes / (target.hbm_tbps * 1e12)) for r in rows) * 1e3
    return Profile(name, f"{name} ({len(rows)} launches)", target, "emitted program", {}, flops, nbytes, kind, floor,
                   None, rows, None if rows else "the program launched no Triton kernel",
                   source="launch arguments and machine code")


def main(argv: Sequence[str] | None = None) -> int:
    """The compile-only process: ``python -m warpsmith.profile.program FILE`` prints one JSON line."""
    import warnings

    from ..core._triton import COMPILE_ONLY_ARCH

    args = list(sys.argv[1:] if argv is None else argv)
    if not COMPILE_ONLY_ARCH or len(args) != 1:
        print("usage: WARPSMITH_COMPILE_ONLY=<arch> python -m warpsmith.profile.program FILE", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    out, sys.stdout = sys.stdout, sys.stderr  # what the program prints must not corrupt the answer
    try:
        launches = record(Path(args[0]))
    except InvalidInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.write(json.dumps(launches) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
