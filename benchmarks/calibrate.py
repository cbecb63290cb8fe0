"""Calibrate a target's table on its GPU: copy bandwidth by access width, shared-memory bandwidth and
bank-conflict cost, tensor-core throughput per type and tile, launch latency (issue 30).

The microbenchmarks are ``warpsmith.profile.microbench`` (kernels in ``microbench_kernels.py``), timed
with CUDA events (median of repeats after warm-up). The JSON written (``calibration_<target>_<date>.json``
in ``--out``, default ``$OUT`` or ``./out``) holds every measured figure, the GPU's name, the driver,
torch and Triton versions and the date, and ``peaks``: the named figures a target's table takes from it.
To make the cost models use them, copy it to ``src/warpsmith/targets/calibration/<target>.json`` (or
point ``WARPSMITH_CALIBRATION`` at it); ``warpsmith profile`` then reports the target's rates as
"calibrated on <gpu> <date>" instead of "nominal (datasheet)".

Time: no case starts after ``--time-limit`` seconds (default 60; those left are listed as skipped), and
each case's timing is capped at 300 ms of kernel time; the 15 compiles dominate.

    python benchmarks/calibrate.py --target h200                 # on the GPU (needs: gpu)
    python benchmarks/calibrate.py --target h200 --dry-run       # on a CPU: compile for sm_90, interpret tiny sizes

``--dry-run`` (no GPU needed) compiles every kernel for the target's architecture in a compile-only
process and checks its machine code (load widths, shared loads in a loop, tensor-core instructions of
each type), runs tiny versions under Triton's interpreter against torch, writes a JSON marked
``dry_run`` (no figure in it: nothing was measured), and exits 0 only if every check passed.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import write_json  # noqa: E402  (makes src/ importable)

KINDS = ("copy", "shared", "mma", "launch")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="h200", help="the target whose table is calibrated (default h200)")
    p.add_argument("--dry-run", action="store_true", help="no GPU: compile for the target, interpret tiny sizes")
    p.add_argument("--only", default=",".join(KINDS), help=f"comma-separated kinds (default: all of {','.join(KINDS)})")
    p.add_argument("--time-limit", type=float, default=60.0, help="start no case after this many seconds (default 60)")
    p.add_argument("--out", default=None, help="output folder (default $OUT, else ./out)")
    p.add_argument("--compile-check", action="store_true", help=argparse.SUPPRESS)  # the compile-only child
    args = p.parse_args(argv)
    only = [k for k in args.only.split(",") if k]
    bad = sorted(set(only) - set(KINDS))
    if bad or not only:
        p.error(f"--only: expected kinds from {', '.join(KINDS)}, got {args.only!r}")
    args.only = only
    return args


def _compile_in_child(args: argparse.Namespace, arch: str) -> list[dict]:
    """Compile-only needs a process that imports Triton with ``WARPSMITH_COMPILE_ONLY`` set."""
    import warpsmith

    src = str(Path(warpsmith.__file__).resolve().parents[1])  # the child imports the same warpsmith
    env = {**os.environ, "WARPSMITH_COMPILE_ONLY": arch,
           "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, __file__, "--compile-check", "--target", args.target, "--only",
                          ",".join(args.only)], env=env, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"calibrate: the compile-only process failed ({res.returncode}):\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from warpsmith.targets import get_target

    target = get_target(args.target)
    if args.compile_check:  # the child: print the rows as one JSON line
        from warpsmith.profile import microbench

        print(json.dumps(microbench.compile_check(target.arch, only=args.only)))
        return 0
    if target.vendor != "nvidia":
        raise SystemExit(f"calibrate: --target {target.name}: expected an NVIDIA target (the shared-memory kernel is PTX)")
    out = Path(args.out or os.environ.get("OUT") or "out")
    out.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc)
    import torch
    import triton

    from warpsmith.targets import versions

    doc: dict = {"kind": "warpsmith-calibration", "benchmark": "calibration", "target": target.name,
                 "date": stamp.isoformat(timespec="seconds"), "torch": torch.__version__, "triton": triton.__version__,
                 "versions": versions(), "dry_run": args.dry_run}
    t0 = time.monotonic()
    if args.dry_run:
        from warpsmith.profile import microbench

        doc["timing_kind"] = "none (dry run: nothing measured)"
        doc["compile_check"] = _compile_in_child(args, target.arch)
        doc["interpret_check"] = microbench.interpret_check(only=args.only)
        failed = [r for r in doc["compile_check"] + doc["interpret_check"] if r["ok"] is False]
        for r in doc["compile_check"]:
            print(f"compile {r['arch']} {r['case']:<24} {'ok' if r['ok'] else 'FAILED: ' + str(r['why'])}")
        for r in doc["interpret_check"]:
            print(f"interpret {r['case']:<24} {'ok' if r['ok'] else r['why'] if r['ok'] is None else 'FAILED: ' + r['why']}")
    else:
        if not torch.cuda.is_available():
            raise SystemExit("calibrate: no GPU here (torch.cuda.is_available() is False): run it on the device, "
                             "or pass --dry-run to check the kernels on a CPU")
        from warpsmith.profile import microbench
        from warpsmith.targets.detect import driver_version

        doc.update(gpu=torch.cuda.get_device_name(0), driver=driver_version(),
                   timing_kind="measured", timing="CUDA events, median of repeats after warm-up")
        doc.update(microbench.run(args.time_limit, only=args.only))
        failed = [r for r in doc["results"] if "error" in r]
        for r in doc["results"]:
            figure = " ".join(f"{k}={r[k]:.4g}" for k in ("ms", "tbps", "tflops", "us", "graph_us") if k in r)
            print(f"{r['case']:<24} " + (f"FAILED: {r['error']}" if "error" in r else f"{figure} (measured)"))
        print(f"peaks (measured on {doc['gpu']}): {json.dumps(doc['peaks'])}")
    doc["wall_s"] = round(time.monotonic() - t0, 1)
    path = out / f"calibration_{target.name}_{stamp:%Y-%m-%d}{'_dry' if args.dry_run else ''}.json"
    write_json(path, doc)
    print(f"wrote {path} ({doc['wall_s']} s){'; dry run: no figure measured' if args.dry_run else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
