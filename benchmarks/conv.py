#!/usr/bin/env python3
"""Convolutions: warpsmith's convs (implicit GEMM; the direct depthwise kernel) against torch's (cuDNN) in
one run, forward and backward; conv + bn + relu fused (batch norm folded, relu in the epilogue) against
eager; depthwise against copy bandwidth.

Cases (``--suite``): ResNet-50 layer shapes (batch 32), Stable Diffusion UNet layer shapes (batch 2,
64x64 latents), ConvNeXt-T layer shapes (batch 32, 7x7 depthwise); bf16, channels-last. Impls on the
same tensors: ``warpsmith`` (``warpsmith.ops.conv`` as a user calls it: dispatch to the best verified
record, else the heuristic default) and ``torch`` (``F.conv2d``: cuDNN). Each case times the forward,
and the backward alone (``autograd.grad`` of the output, the graph retained): CUDA events, warm-up,
median (``warpsmith.measure.timing``). ``fused`` cases time ``conv_bn_relu`` both ways: warpsmith with
the folded weight and relu epilogue vs eager conv -> batch_norm(eval) -> relu. ``depthwise`` cases add
the GB/s of a same-size copy (x + w + y bytes over the depthwise forward's time against 2 x bytes over
a copy of x's, both measured in the run; ``depthwise_of_copy`` per case) and every case names the
variant dispatch ran (``depthwise``: the direct kernel, ops/conv/depthwise.py). Targets (issue 12):
>= 0.8x cuDNN geomean forward, >= 1.0x fused vs eager, depthwise >= 80% of copy bandwidth; reported
MET / NOT MET, never asserted.

``--print-plan`` prints the cases and exits; ``--dry-run`` (CPU, Triton's interpreter) runs tiny
versions of the cases in fp32 for correctness only (relative error against torch above 1e-4 fails).

Usage::

    python benchmarks/conv.py --print-plan
    python benchmarks/conv.py --dry-run --out /tmp/conv_dry     # CPU
    python benchmarks/conv.py --out out                         # GPU
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import cuda_broken, say, write_json  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BENCHMARK = "conv"
# (name, N, C, K, H, W, k, stride, groups)
RESNET50 = [("r50.conv1", 32, 3, 64, 224, 224, 7, 2, 1), ("r50.l1.3x3", 32, 64, 64, 56, 56, 3, 1, 1),
            ("r50.l1.1x1up", 32, 64, 256, 56, 56, 1, 1, 1), ("r50.l2.3x3s2", 32, 128, 128, 56, 56, 3, 2, 1),
            ("r50.l3.3x3", 32, 256, 256, 14, 14, 3, 1, 1), ("r50.l3.1x1down", 32, 1024, 256, 14, 14, 1, 1, 1),
            ("r50.l4.3x3", 32, 512, 512, 7, 7, 3, 1, 1)]
SD_UNET = [("sd.in", 2, 4, 320, 64, 64, 3, 1, 1), ("sd.res320", 2, 320, 320, 64, 64, 3, 1, 1),
           ("sd.down320", 2, 320, 320, 64, 64, 3, 2, 1), ("sd.res640", 2, 640, 640, 32, 32, 3, 1, 1),
           ("sd.res1280", 2, 1280, 1280, 16, 16, 3, 1, 1), ("sd.skip1x1", 2, 960, 640, 32, 32, 1, 1, 1)]
CONVNEXT = [("cnx.stem4x4", 32, 3, 96, 224, 224, 4, 4, 1), ("cnx.dw7.96", 32, 96, 96, 56, 56, 7, 1, 96),
            ("cnx.dw7.192", 32, 192, 192, 28, 28, 7, 1, 192), ("cnx.dw7.384", 32, 384, 384, 14, 14, 7, 1, 384),
            ("cnx.down2x2", 32, 96, 192, 56, 56, 2, 2, 1)]
SUITES = {"resnet50": RESNET50, "sd_unet": SD_UNET, "convnext": CONVNEXT}
INCORRECT = 1e-2


def cases(suites: list[str]) -> list[dict[str, Any]]:
    out = []
    for s in suites:
        for name, n, c, k, h, w, ks, st, g in SUITES[s]:
            kind = "depthwise" if g == c and g > 1 else "conv"
            out.append(dict(suite=s, name=name, N=n, C=c, K=k, H=h, W=w, k=ks, stride=st, groups=g,
                            padding=ks // 2 if st == 1 or ks % 2 else 0, kind=kind))
    out += [dict(c, kind="fused", name=c["name"] + "+bn+relu") for c in out if c["suite"] == "resnet50"
            and c["kind"] == "conv"]
    return out


def tiny(case: dict[str, Any]) -> dict[str, Any]:
    """The dry run's version: same geometry, a few channels, a small image."""
    g = min(case["groups"], 4)
    c = 4 if g > 1 else min(case["C"], 5)
    return {**case, "N": 1, "C": c, "K": c if g > 1 else min(case["K"], 6), "groups": g,
            "H": max(case["k"] + 2, 9), "W": max(case["k"] + 1, 8)}


def flops(case: dict[str, Any]) -> float:
    oh = (case["H"] + 2 * case["padding"] - case["k"]) // case["stride"] + 1
    ow = (case["W"] + 2 * case["padding"] - case["k"]) // case["stride"] + 1
    return 2.0 * case["N"] * oh * ow * case["K"] * case["C"] // case["groups"] * case["k"] ** 2


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / max(b.norm().item(), 1e-30))


def dispatched(case: dict[str, Any], x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
               activation: str) -> str:
    """The conv variant warpsmith's dispatch runs this case with (a tuned record's, else the heuristic
    default's: ``depthwise`` for the depthwise cases, ``implicit_gemm`` otherwise)."""
    from warpsmith.dispatch import select
    from warpsmith.ops.conv.op import problem_of
    from warpsmith.ops.conv.variant import VARIANTS

    st, pd = [case["stride"]] * 2, [case["padding"]] * 2
    p = problem_of(x, w, bias, None, st, pd, pd, [1, 1], [0, 0], case["groups"], False, activation, 1.0)
    return select(p, VARIANTS).variant.name


def wgrad_dispatched(case: dict[str, Any], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> dict | None:
    """The weight gradient's config (split-K included) dispatch runs in this case's backward."""
    from warpsmith.dispatch import select
    from warpsmith.ops.conv.wgrad import VARIANTS, weight_grad_problem

    st, pd = [case["stride"]] * 2, [case["padding"]] * 2
    p = weight_grad_problem(x, y, list(w.shape), st, pd, [1, 1], case["groups"])
    return None if p is None else dict(select(p, VARIANTS).config)


def run_case(case: dict[str, Any], dtype: torch.dtype, device: str, timer) -> dict[str, Any]:
    import warpsmith.ops as wops

    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(case["N"], case["C"], case["H"], case["W"], generator=g, device=device, dtype=dtype)
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    w = (torch.randn(case["K"], case["C"] // case["groups"], case["k"], case["k"], generator=g, device=device,
                     dtype=dtype) * 0.1).requires_grad_()
    kw = dict(stride=case["stride"], padding=case["padding"], groups=case["groups"])
    row: dict[str, Any] = {**case, "flops": flops(case), "impls": {}}
    if case["kind"] == "fused":
        mean, var = torch.randn(case["K"], device=device), torch.rand(case["K"], device=device) + 0.5
        bw, bb = torch.randn(case["K"], device=device), torch.randn(case["K"], device=device)
        with torch.no_grad():
            wf, bf = wops.fold_batch_norm(w.detach(), None, mean, var, bw, bb, 1e-5)
        fns = {"warpsmith": lambda: wops.conv(x, wf, bf, activation="relu", **kw),
               "eager": lambda: F.relu(F.batch_norm(F.conv2d(x, w, **kw), mean, var, bw, bb, False, 0.0, 1e-5))}
        with torch.no_grad():
            res = {n: f() for n, f in fns.items()}
        row["impls"] = {n: {"status": "ok"} for n in fns}
        row["impls"]["warpsmith"]["rel_err"] = _rel(res["warpsmith"], res["eager"])
        row["impls"]["warpsmith"]["variant"] = dispatched(case, x, wf, bf, "relu")
        if timer is not None:
            for n, f in fns.items():
                with torch.no_grad():
                    row["impls"][n]["fwd_ms"] = timer(f)
        return row
    fns = {"warpsmith": lambda: wops.conv(x, w, **kw), "torch": lambda: F.conv2d(x, w, **kw)}
    results = {}
    for n, f in fns.items():
        out = f()
        go = torch.ones_like(out)
        results[n] = (out.detach(), *torch.autograd.grad(out, (x, w), go))
        rec: dict[str, Any] = {"status": "ok"}
        if timer is not None:
            rec["fwd_ms"] = timer(f)
            out = f()
            rec["bwd_ms"] = timer(lambda: torch.autograd.grad(out, (x, w), go, retain_graph=True))
            rec["fwd_tflops"] = row["flops"] / rec["fwd_ms"] / 1e9
        row["impls"][n] = rec
    errs = [_rel(a, b) for a, b in zip(results["warpsmith"], results["torch"])]
    row["impls"]["warpsmith"]["rel_err"] = {"out": errs[0], "dx": errs[1], "dw": errs[2]}
    row["impls"]["warpsmith"]["variant"] = dispatched(case, x, w, None, "none")
    row["impls"]["warpsmith"]["wgrad_config"] = wgrad_dispatched(case, x, results["warpsmith"][0], w)
    if max(errs) > (1e-4 if device == "cpu" else INCORRECT):
        row["impls"]["warpsmith"]["status"] = "INCORRECT"
    if case["kind"] == "depthwise" and timer is not None:
        # the forward's minimum traffic: x read once, w, y written once (the window's re-reads of x are
        # cache hits); against a copy of x (read x, write as much) timed in the same run
        buf = torch.empty_like(x)
        copy_ms = timer(lambda: buf.copy_(x))
        e = x.element_size()
        moved = (x.numel() + w.numel() + results["warpsmith"][0].numel()) * e
        row["copy_gbps"] = 2 * x.numel() * e / copy_ms / 1e6
        row["depthwise_gbps"] = moved / row["impls"]["warpsmith"]["fwd_ms"] / 1e6
        row["depthwise_of_copy"] = row["depthwise_gbps"] / row["copy_gbps"]
    return row


def verdicts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def geo(vals):
        vals = [v for v in vals if v > 0]
        return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None

    timed = [r for r in rows if r["kind"] != "fused" and "fwd_ms" in r["impls"].get("warpsmith", {})]
    fwd = geo([r["impls"]["torch"]["fwd_ms"] / r["impls"]["warpsmith"]["fwd_ms"] for r in timed])
    bwd = geo([r["impls"]["torch"]["bwd_ms"] / r["impls"]["warpsmith"]["bwd_ms"] for r in timed])
    fused = geo([r["impls"]["eager"]["fwd_ms"] / r["impls"]["warpsmith"]["fwd_ms"] for r in rows
                 if r["kind"] == "fused" and "fwd_ms" in r["impls"]["warpsmith"]])
    dw = [r["depthwise_of_copy"] for r in rows if "depthwise_of_copy" in r]
    out: dict[str, Any] = {"fwd_vs_cudnn_geomean": fwd, "bwd_vs_cudnn_geomean": bwd, "fused_vs_eager_geomean": fused,
                           "depthwise_of_copy_min": min(dw) if dw else None}
    for key, target in (("fwd_vs_cudnn_geomean", 0.8), ("fused_vs_eager_geomean", 1.0), ("depthwise_of_copy_min", 0.8)):
        out[key + "_target"] = None if out[key] is None else ("MET" if out[key] >= target else "NOT MET")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--print-plan", action="store_true")
    ap.add_argument("--suite", default=",".join(SUITES), help="comma-separated: " + ", ".join(SUITES))
    ap.add_argument("--max-cases", type=int, default=None, help="run only the first N cases of the plan")
    ap.add_argument("--total-time", type=float, default=1e9, help="start no new case after this many seconds")
    a = ap.parse_args(argv)
    suites = [s for s in a.suite.split(",") if s]
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        ap.error(f"unknown suite(s) {unknown}: expected some of {list(SUITES)}")
    plan = cases(suites)[:a.max_cases]
    if a.print_plan:
        for c in plan:
            say(json.dumps(c))
        say(f"{len(plan)} cases")
        return 0
    t_start = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() and not a.dry_run else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    timer = None
    if device == "cuda":
        from warpsmith.measure.timing import time_gpu

        timer = lambda fn: time_gpu(lambda _: fn(), [None], warmup=3, runs=20, max_ms=400).median_ms  # noqa: E731
    run_cases = [tiny(c) for c in plan] if a.dry_run else plan
    doc: dict[str, Any] = {"benchmark": BENCHMARK, "dry_run": a.dry_run, "device": device,
                           "gpu": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
                           "timing_kind": "measured" if device == "cuda" else "none (correctness only)",
                           "dtype": str(dtype).replace("torch.", ""), "torch": torch.__version__,
                           "cudnn": torch.backends.cudnn.version() if device == "cuda" else None}
    rows, skipped, failed = [], [], []
    for case in run_cases:
        if time.perf_counter() - t_start > a.total_time:
            skipped.append(case)
            continue
        try:
            row = run_case(case, dtype, device, timer)
            rows.append(row)
            say(case["name"], {n: {k: v for k, v in r.items() if k != "status"} | {"status": r["status"]}
                               for n, r in row["impls"].items()})
        except Exception as exc:
            failed.append({**case, "error": f"{type(exc).__name__}: {exc}"[:500]})
            say(traceback.format_exc())
            if cuda_broken():
                break
    doc.update(cases=rows, skipped=skipped, failed=failed, verdicts=verdicts(rows),
               seconds=round(time.perf_counter() - t_start, 1))
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d")
    path = out_dir / (f"{BENCHMARK}_dry.json" if a.dry_run else f"{BENCHMARK}_{stamp}.json")
    write_json(path, doc)
    say(json.dumps(doc["verdicts"]))
    say(f"wrote {path}")
    bad = failed or any(r["impls"].get("warpsmith", {}).get("status") == "INCORRECT" for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
