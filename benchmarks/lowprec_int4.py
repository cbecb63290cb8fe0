#!/usr/bin/env python3
"""Weight-only int4 GEMM: ``warpsmith.ops.int4_matmul`` (AWQ and GPTQ formats, group 128) against the
fp16 ``torch.matmul`` of the same (dequantized) weight, on Llama-2-7B / Llama-3-8B projection shapes
at M = 1, 16, 64, 4096 (decode to prefill).

:func:`cases` returns the cases (for the integrator's merged ``benchmarks/lowprec.py``), :func:`problems`
what warpsmith dispatches for one, :func:`run_case` times one (CUDA events, warm-up, L2 flush, median:
``warpsmith.measure.timing``) and checks warpsmith's output against torch's on the dequantized weight
(relative L2 error above 1e-2: INCORRECT). Reported: ms, TFLOP/s (2 M N K), effective weight bandwidth
(GB/s of packed weight + scales + zeros for int4, fp16 weight for torch) and the speed-up over fp16.
Target (shared/TARGETS.md's weight-only line, as the integrator states it): int4 faster than fp16 at
M <= 16 (memory-bound); reported, never asserted.

``--dry-run`` (CPU, Triton's interpreter): tiny cases for correctness only, then (unless
``--no-static``) a compile-only pass for ``--static-target`` (h200: sm_90) of the real cases' problems
(``warpsmith.gpucheck.check_problems``); a compile failure makes the dry run exit 1.

Usage::

    python benchmarks/lowprec_int4.py --dry-run --out /tmp/int4_dry   # CPU
    python benchmarks/lowprec_int4.py --out out                       # GPU
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import STATIC_TARGET, cuda_broken, say, static_compile, write_json  # noqa: E402

import torch  # noqa: E402

BENCHMARK = "lowprec_int4"
INCORRECT = 1e-2
GROUP = 128
MS = (1, 16, 64, 4096)
# (model, projection, N = out_features, K = in_features)
SHAPES = (("llama2-7b", "qkv", 12288, 4096), ("llama2-7b", "o", 4096, 4096), ("llama2-7b", "gate_up", 22016, 4096),
          ("llama2-7b", "down", 4096, 11008), ("llama3-8b", "qkv", 6144, 4096), ("llama3-8b", "o", 4096, 4096),
          ("llama3-8b", "gate_up", 28672, 4096), ("llama3-8b", "down", 4096, 14336))


def cases(ms=MS, formats=("awq", "gptq")) -> list[dict[str, Any]]:
    """The benchmark's cases: every projection shape at every M, each format."""
    return [{"model": model, "proj": proj, "M": m, "N": n, "K": k, "format": fmt, "group_size": GROUP}
            for model, proj, n, k in SHAPES for m in ms for fmt in formats]


def problems(case: dict[str, Any], dtype: str = "float16") -> list[dict[str, Any]]:
    """What warpsmith dispatches for ``case``."""
    return [{"op": "int4_matmul", "shape": {"M": case["M"], "N": case["N"], "K": case["K"]}, "dtype": dtype,
             "attrs": {"format": case["format"], "group_size": case["group_size"]}}]


def _weight_bytes(case: dict[str, Any]) -> tuple[float, float]:
    n, k, g = case["N"], case["K"], case["group_size"]
    return k * n / 2 + (k // g) * n * 2.5, k * n * 2.0


def run_case(case: dict[str, Any], dtype: torch.dtype, device: str, timer) -> dict[str, Any]:
    """One case: warpsmith's int4 GEMM and torch's fp16 GEMM on the dequantized weight."""
    from warpsmith.ops import int4_matmul
    from warpsmith.ops.lowprec.int4.formats import dequantize, quantize_int4

    gen = torch.Generator().manual_seed(0)
    w = torch.randn(case["K"], case["N"], generator=gen) * 0.02
    pk = quantize_int4(w, case["group_size"], case["format"], scale_dtype=dtype)
    wd = dequantize(pk, dtype).to(device)
    qw, qz, s = pk.qweight.to(device), pk.qzeros.to(device), pk.scales.to(device)
    g_idx = None  # without act-order a GPTQ checkpoint's g_idx is k // G: no gather (Int4Linear drops it too)
    x = torch.randn(case["M"], case["K"], generator=gen).to(device, dtype)
    ours = lambda: int4_matmul(x, qw, s, qz, case["group_size"], format=case["format"], g_idx=g_idx)  # noqa: E731
    ref = lambda: torch.matmul(x, wd)  # noqa: E731
    y, r = ours(), ref()
    rel = float((y.double() - r.double()).norm() / r.double().norm().clamp(min=1e-30))
    row: dict[str, Any] = {**case, "rel_err": rel, "status": "INCORRECT" if rel > INCORRECT else "ok"}
    if timer is not None:
        flops = 2.0 * case["M"] * case["N"] * case["K"]
        wb4, wb16 = _weight_bytes(case)
        t4, t16 = timer(ours), timer(ref)
        row.update(int4_ms=t4, fp16_ms=t16, speedup=t16 / t4, int4_tflops=flops / t4 / 1e9,
                   fp16_tflops=flops / t16 / 1e9, int4_weight_gbps=wb4 / t4 / 1e6, fp16_weight_gbps=wb16 / t16 / 1e6)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'model':<10} {'proj':<8} {'fmt':<5} {'M':>5} {'N':>6} {'K':>6} {'int4 ms':>9} {'fp16 ms':>9} {'x':>6} {'rel':>9}"
    lines = [head]
    for r in rows:
        t4, t16, sp = (f"{r['int4_ms']:.4f}", f"{r['fp16_ms']:.4f}", f"{r['speedup']:.2f}") if "int4_ms" in r else ("-",) * 3
        lines.append(f"{r['model']:<10} {r['proj']:<8} {r['format']:<5} {r['M']:>5} {r['N']:>6} {r['K']:>6} {t4:>9} "
                     f"{t16:>9} {sp:>6} {r['rel_err']:>9.2e} {r['status'] if r['status'] != 'ok' else ''}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--formats", default="awq,gptq")
    ap.add_argument("--total-time", type=float, default=1800.0)
    ap.add_argument("--no-static", action="store_true")
    ap.add_argument("--static-target", default=STATIC_TARGET)
    ap.add_argument("--static-sample", type=int, default=0)
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    out_dir = Path(a.out)
    device = "cuda" if torch.cuda.is_available() and not a.dry_run else "cpu"
    formats = tuple(f for f in a.formats.split(",") if f)
    real = cases(tuple(int(m) for m in a.ms.split(",") if m), formats)
    if a.dry_run:
        run_cases = [{"model": "tiny", "proj": "x", "M": m, "N": 40, "K": 128, "format": f, "group_size": GROUP}
                     for m in (1, 17) for f in formats]
    else:
        run_cases = real
    timer = None
    if device == "cuda":
        from warpsmith.measure.timing import time_gpu

        timer = lambda fn: time_gpu(lambda _: fn(), [None], warmup=3, runs=20, max_ms=400).median_ms  # noqa: E731
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d")
    path = out_dir / (f"{BENCHMARK}_dry.json" if a.dry_run else f"{BENCHMARK}_{stamp}.json")
    doc: dict[str, Any] = {"benchmark": BENCHMARK, "dry_run": a.dry_run, "device": device,
                           "timing_kind": "measured" if device == "cuda" else "none (correctness only)",
                           "dtype": "float16", "torch": torch.__version__}
    rows, skipped, failed = [], [], []
    for case in run_cases:
        if time.perf_counter() - t_start > a.total_time:
            skipped.append(case)
            continue
        try:
            rows.append(run_case(case, torch.float16, device, timer))
            say(json.dumps(rows[-1]))
        except Exception as exc:
            failed.append({**case, "error": f"{type(exc).__name__}: {exc}"[:500]})
            say(traceback.format_exc())
            if cuda_broken():
                break
    doc.update(cases=rows, skipped=skipped, failed=failed)
    rc = 1 if failed or any(r["status"] == "INCORRECT" for r in rows) else 0
    if a.dry_run and not a.no_static:
        probs, seen = [], set()
        for c in real:
            for p in problems(c):
                key = json.dumps(p, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    probs.append(p)
        doc["static_compile"] = static_compile(probs, a.static_target, a.static_sample,
                                               out_dir / "gpucheck_lowprec_int4.json")
        if not doc["static_compile"]["ok"]:
            rc = 1
    doc["seconds"] = round(time.perf_counter() - t_start, 1)
    write_json(path, doc)
    say(table(rows))
    say(f"wrote {path}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
