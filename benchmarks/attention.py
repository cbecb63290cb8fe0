#!/usr/bin/env python3
"""Prefill / training attention: warpsmith against torch SDPA's flash and cuDNN backends and
FlexAttention, forward and backward, in one run.

Cases: bf16, head dims 64 and 128, sequence lengths 512 .. 16k, causal and not, with
``--tokens`` (16k) tokens per case (batch = tokens / S) and ``--hidden`` (2048) = heads x head dim,
as FlashAttention's own benchmark. Impls, each on the same (B, H, S, D) tensors:

- ``warpsmith``: ``warpsmith.ops.attention`` as a user calls it (dispatch: the best verified record
  in the run's DB, else the heuristic default);
- ``sdpa_flash`` / ``sdpa_cudnn``: ``F.scaled_dot_product_attention`` under
  ``torch.nn.attention.sdpa_kernel`` pinned to ``FLASH_ATTENTION`` / ``CUDNN_ATTENTION`` (a backend
  that refuses the case reads "unavailable: <reason>");
- ``flex``: ``torch.compile(flex_attention)`` with a causal block mask (compile time excluded and
  reported as ``first_call_s``).

Each case times the forward, and the backward alone (forward untimed, then ``autograd.grad`` of the
output timed, the graph retained): CUDA events, warm-up, L2 flush, median
(``warpsmith.measure.timing``). TFLOP/s use the spec's FLOPs (``attention`` / ``attention_backward``:
the visible pairs only, so causal counts about half), the same figure for every impl. Outputs and
gradients of every impl are compared with the flash backend's (relative L2 error; above 1e-2 a
result is INCORRECT). Targets (shared/TARGETS.md): >= 1.0x SDPA flash forward and backward; forward
>= 60% of bf16 peak. Reported MET / NOT MET, never asserted.

``--dry-run`` (CPU, Triton's interpreter): tiny cases, warpsmith against SDPA's math backend in fp32
for correctness only; then (unless ``--no-static``) compiles, statically, for ``--static-target``
(default h200: sm_90) the problems the real run's warpsmith calls would launch, forward and
backward (``warpsmith.gpucheck.check_problems``; one problem per head dim, causality and direction
at S = 1024: the real lengths are multiples of 16, so Triton specializes them the same way and the
heuristic default is the same). A compile failure makes the dry run exit 1. ``--total-time`` stops
starting new cases; SIGINT skips the rest; the JSON and table are written either way.

Usage::

    python benchmarks/attention.py --dry-run --out /tmp/attn_dry     # CPU
    python benchmarks/attention.py --out out                         # GPU
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import STATIC_TARGET, cuda_broken, say, static_compile, write_json  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BENCHMARK = "attention"
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
DIMS = (64, 128)
IMPLS = ("warpsmith", "sdpa_flash", "sdpa_cudnn", "flex")
INCORRECT = 1e-2
_STOP = [False]


def cases(seqs, dims, tokens: int, hidden: int) -> list[dict[str, Any]]:
    out = []
    for d in dims:
        for s in seqs:
            for causal in (False, True):
                out.append({"S": s, "D": d, "H": max(1, hidden // d), "B": max(1, tokens // s), "causal": causal})
    return out


def problems(case: dict[str, Any], dtype: str) -> list[dict[str, Any]]:
    """What warpsmith dispatches for ``case``: the forward and the backward problem."""
    shape = {"Sq": case["S"], "Sk": case["S"], "B": case["B"], "H": case["H"], "G": 1, "D": case["D"]}
    attrs = {"causal": case["causal"]}
    return [{"op": op, "shape": shape, "dtype": dtype, "attrs": attrs} for op in ("attention", "attention_backward")]


def flops(case: dict[str, Any], dtype: str) -> tuple[float, float]:
    from warpsmith.ops import get_op

    fwd, bwd = (p for p in problems(case, dtype))
    return (get_op("attention").flops(get_op("attention").problem(fwd["shape"], dtype, fwd["attrs"])),
            get_op("attention_backward").flops(get_op("attention_backward").problem(bwd["shape"], dtype, bwd["attrs"])))


def impl_fn(name: str, causal: bool, device: str) -> tuple[Callable | None, str | None]:
    """(fn(q, k, v) -> out, None) or (None, why it is unavailable)."""
    if name == "warpsmith":
        import warpsmith.ops as wops

        return (lambda q, k, v: wops.attention(q, k, v, causal=causal)), None
    if device != "cuda":
        return None, "needs a GPU"
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if name in ("sdpa_flash", "sdpa_cudnn"):
        backend = SDPBackend.FLASH_ATTENTION if name == "sdpa_flash" else SDPBackend.CUDNN_ATTENTION

        def fn(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return fn, None
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as exc:
        return None, f"flex_attention unavailable: {exc}"
    flex = torch.compile(flex_attention)
    masks: dict[tuple, Any] = {}

    def fn(q, k, v):
        if not causal:
            return flex(q, k, v)
        key = (q.shape[2], k.shape[2])
        if key not in masks:
            masks[key] = create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, key[0], key[1], device=q.device)
        return flex(q, k, v, block_mask=masks[key])
    return fn, None


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def run_case(case: dict[str, Any], dtype: torch.dtype, device: str, impls: list[str], timer) -> dict[str, Any]:
    g = torch.Generator(device=device).manual_seed(0)
    shape = (case["B"], case["H"], case["S"], case["D"])
    q, k, v = (torch.randn(shape, generator=g, device=device, dtype=dtype).requires_grad_() for _ in range(3))
    do = torch.randn(shape, generator=g, device=device, dtype=dtype)
    f_fwd, f_bwd = flops(case, str(dtype).replace("torch.", ""))
    row: dict[str, Any] = {**case, "flops_fwd": f_fwd, "flops_bwd": f_bwd, "impls": {}}
    baseline = None
    if device != "cuda":  # the dry run: SDPA's math backend in fp32 is the reference
        q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
        o = F.scaled_dot_product_attention(q32, k32, v32, is_causal=case["causal"])
        baseline = (o.detach(), *torch.autograd.grad(o, (q32, k32, v32), do.float()))
    for name in impls:
        fn, why = impl_fn(name, case["causal"], device)
        if fn is None:
            row["impls"][name] = {"status": f"unavailable: {why}"}
            continue
        try:
            t0 = time.perf_counter()
            out = fn(q, k, v)
            grads = torch.autograd.grad(out, (q, k, v), do)
            first = time.perf_counter() - t0
            res = (out.detach(), *grads)
            if baseline is None and name == "sdpa_flash":
                baseline = res
            rec: dict[str, Any] = {"status": "ok", "first_call_s": round(first, 2)}
            if timer is not None:
                fwd_ms = timer(lambda: fn(q, k, v))
                out = fn(q, k, v)
                bwd_ms = timer(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True))
                rec.update(fwd_ms=fwd_ms, bwd_ms=bwd_ms, fwd_tflops=f_fwd / fwd_ms / 1e9, bwd_tflops=f_bwd / bwd_ms / 1e9)
            rec["_res"] = res
            row["impls"][name] = rec
        except Exception as exc:  # a backend refusing a case is a result, not the end of the run
            row["impls"][name] = {"status": f"unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            if cuda_broken():
                raise
    for name, rec in row["impls"].items():
        res = rec.pop("_res", None)
        if res is not None and baseline is not None:
            errs = [_rel(a, b) for a, b in zip(res, baseline)]
            rec["rel_err"] = {"out": errs[0], "dq": errs[1], "dk": errs[2], "dv": errs[3]}
            if max(errs) > INCORRECT:
                rec["status"] = "INCORRECT"
    return row


def verdicts(rows: list[dict[str, Any]], peak: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ratios = {"fwd": [], "bwd": []}
    for r in rows:
        w, f = r["impls"].get("warpsmith", {}), r["impls"].get("sdpa_flash", {})
        for d in ("fwd", "bwd"):
            if w.get(f"{d}_ms") and f.get(f"{d}_ms"):
                ratios[d].append(f[f"{d}_ms"] / w[f"{d}_ms"])
    for d, xs in ratios.items():
        if xs:
            gm = math.exp(sum(map(math.log, xs)) / len(xs))
            out[f"{d}_vs_sdpa_flash_geomean"] = gm
            out[f"{d}_vs_sdpa_flash"] = "MET" if gm >= 1.0 else "NOT MET"
    best = max((r["impls"].get("warpsmith", {}).get("fwd_tflops", 0.0) for r in rows), default=0.0)
    if peak and best:
        out["fwd_best_fraction_of_peak"] = best / peak
        out["fwd_60pct_of_peak"] = "MET" if best >= 0.6 * peak else "NOT MET"
    if any(rec.get("status") == "INCORRECT" for r in rows for n, rec in r["impls"].items() if n == "warpsmith"):
        out["warpsmith_correct"] = "NOT MET"
    return out


def table(rows: list[dict[str, Any]], impls: list[str]) -> str:
    head = f"{'D':>4} {'S':>6} {'B':>4} {'causal':>6} | " + " | ".join(f"{n:>21}" for n in impls)
    lines = [head, "fwd / bwd TFLOP/s (or status)"]
    for r in rows:
        cells = []
        for n in impls:
            rec = r["impls"].get(n, {})
            if "fwd_tflops" in rec:
                cells.append(f"{rec['fwd_tflops']:9.1f} / {rec['bwd_tflops']:9.1f}")
            else:
                cells.append(f"{rec.get('status', '-')[:21]:>21}")
        lines.append(f"{r['D']:>4} {r['S']:>6} {r['B']:>4} {str(r['causal']):>6} | " + " | ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--no-static", action="store_true")
    ap.add_argument("--static-target", default=STATIC_TARGET)
    ap.add_argument("--static-sample", type=int, default=2)
    ap.add_argument("--seqs", default=",".join(map(str, SEQS)))
    ap.add_argument("--dims", default=",".join(map(str, DIMS)))
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--total-time", type=float, default=1e9, help="start no new case after this many seconds")
    a = ap.parse_args(argv)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    previous = signal.signal(signal.SIGINT, lambda *_: _STOP.__setitem__(0, True))
    try:
        return _run(a)
    finally:
        signal.signal(signal.SIGINT, previous)
        _STOP[0] = False


def _run(a: argparse.Namespace) -> int:
    out_dir = Path(a.out)
    t_start = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() and not a.dry_run else "cpu"
    seqs = [int(s) for s in a.seqs.split(",") if s]
    dims = [int(d) for d in a.dims.split(",") if d]
    impls = [i for i in a.impls.split(",") if i]
    real = cases(seqs, dims, a.tokens, a.hidden)
    if a.dry_run:
        run_cases = [{"S": s, "D": d, "H": 2, "B": 1, "causal": c} for d in dims for s in (64, 100) for c in (False, True)]
        dtype = torch.float32  # the interpreter's bf16 dots are emulated; fp32 keeps the dry run quick and exact
    else:
        run_cases, dtype = real, torch.bfloat16
    timer = None
    peak = None
    if device == "cuda":
        from warpsmith.measure.timing import time_gpu
        from warpsmith.targets import current_device

        timer = lambda fn: time_gpu(lambda _: fn(), [None], warmup=3, runs=20, max_ms=400).median_ms  # noqa: E731
        peak = current_device().target.peak("bf16")
    rows, skipped, failed = [], [], []
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d")
    path = out_dir / (f"{BENCHMARK}_dry.json" if a.dry_run else f"{BENCHMARK}_{stamp}.json")
    doc: dict[str, Any] = {"benchmark": BENCHMARK, "dry_run": a.dry_run, "device": device,
                           "timing_kind": "measured" if device == "cuda" else "none (correctness only)",
                           "dtype": str(dtype).replace("torch.", ""), "torch": torch.__version__}
    for case in run_cases:
        if _STOP[0] or time.perf_counter() - t_start > a.total_time:
            skipped.append(case)
            continue
        try:
            row = run_case(case, dtype, device, impls, timer)
            rows.append(row)
            say(json.dumps({k: v for k, v in row.items() if k != "impls"}),
                {n: r.get("status") for n, r in row["impls"].items()})
        except Exception as exc:
            failed.append({**case, "error": f"{type(exc).__name__}: {exc}"[:500]})
            say(traceback.format_exc())
            if cuda_broken():
                break
        if device == "cuda":
            torch.cuda.empty_cache()
    doc.update(cases=rows, skipped=skipped, failed=failed, verdicts=verdicts(rows, peak))
    rc = 0 if not failed else 1
    if any(r["impls"].get("warpsmith", {}).get("status") == "INCORRECT" for r in rows):
        rc = 1
    if a.dry_run and not a.no_static:
        probs, seen = [], set()
        for c in real:
            small = {**c, "S": 1024, "B": 1, "H": 2}
            for p in problems(small, "bfloat16"):
                key = json.dumps(p, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    probs.append(p)
        doc["static_compile"] = static_compile(probs, a.static_target, a.static_sample,
                                               out_dir / "gpucheck_attention.json")
        if not doc["static_compile"]["ok"]:
            rc = 1
    doc["seconds"] = round(time.perf_counter() - t_start, 1)
    write_json(path, doc)
    say(table(rows, impls))
    say(json.dumps(doc["verdicts"]))
    say(f"wrote {path}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
