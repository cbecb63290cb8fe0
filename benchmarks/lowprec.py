#!/usr/bin/env python3
"""Low precision: warpsmith's scaled GEMM and quantization kernels against PyTorch, in one run.

Cases (Llama-3-8B projections, M = tokens):

- ``fp8_tensor`` / ``fp8_row``: e4m3 per-tensor and row-wise scaled GEMM vs ``torch._scaled_mm``;
- ``fp8_hybrid``: mixed operands, an e5m2 (gradient-like) A x an e4m3 weight, row-wise, vs
  ``torch._scaled_mm`` on the same mixed operands (the backward GEMMs of ``Fp8Linear``);
- ``fp8_block``: e4m3 with DeepSeek-V3 block scales (1x128, 128x128) vs our bf16 ``matmul`` (torch has
  no block-scaled GEMM here);
- ``w8a8``: int8 x int8 with per-token/per-channel scales vs ``torch._int_mm`` (plus its scaling);
- ``quant_row`` / ``quant_block`` / ``quant_tensor`` / ``rmsnorm_quant`` / ``stochastic_round``: dynamic quantization
  (bf16 -> e4m3) and stochastic rounding (fp32 -> bf16), each through the public function (a tuned
  record if the DB has one) and at the variant's default config, vs a device copy of the same bytes
  (``copy_bandwidth``: the fraction of the copy's bandwidth, against the 85% target).

Every GEMM case also checks correctness on the device: the error contract of ``scaled_matmul`` (whose
fp8 form allows Hopper's ~22-bit tensor-core accumulation) on the case's own inputs, and DeepGEMM's
``calc_diff`` against the reference impl. Timing: CUDA events, warm-up, L2 flush, median
(``warpsmith.measure.timing``). The JSON carries a machine/version header.

Hook for more cases: :data:`CASE_BUILDERS` is the list of functions ``(args) -> list[Case]`` this run
builds its cases from; another part of the family (int4 weight-only GEMM vs fp16 at M = 1, 16, 64,
4096) appends its builder there.

Usage::

    python benchmarks/lowprec.py --print-plan          # the cases; runs nothing
    python benchmarks/lowprec.py --dry-run --out /tmp/lp   # CPU: tiny cases for correctness, static compile
    python benchmarks/lowprec.py --out out             # GPU
"""
from __future__ import annotations

import argparse
import datetime as _dt
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import STATIC_TARGET, cuda_broken, say, static_compile, write_json  # noqa: E402

import torch  # noqa: E402

BENCHMARK = "lowprec"
SHAPES = ((4096, 4096), (14336, 4096), (4096, 14336))  # (N, K) of Llama-3-8B's projections
TOKENS = (16, 4096)


@dataclass
class Case:
    """One benchmark case: ``setup(device)`` returns {impl: zero-argument callable}; the first impl is
    warpsmith's; ``check(outputs)`` (optional) returns a dict of correctness figures."""

    name: str
    group: str
    shape: dict[str, int]
    flops: float
    bytes: float
    problems: list[dict[str, Any]]  # what warpsmith dispatches (for the static compile)
    setup: Callable[[str], dict[str, Callable[[], Any]]]
    check: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _scaled_case(kind: str, M: int, N: int, K: int) -> Case:
    from warpsmith.ops.lowprec.quant.reference import calc_diff, quantize_blocks, quantize_rows, quantize_tensor

    fmt = "int8" if kind == "w8a8" else "e4m3"
    fmt_a = "e5m2" if kind == "fp8_hybrid" else fmt
    scaling = {"fp8_tensor": "tensor", "fp8_row": "row", "fp8_hybrid": "row", "fp8_block": "block", "w8a8": "row"}[kind]
    problem = {"op": "scaled_matmul", "shape": {"M": M, "N": N, "K": K}, "dtype": "bfloat16",
               "attrs": {"format": fmt_a, "format_b": fmt, "scaling": scaling}}
    state: dict[str, Any] = {}

    def setup(device: str) -> dict[str, Callable[[], Any]]:
        import warpsmith.ops as wops

        g = torch.Generator().manual_seed(0)
        x, w = torch.randn(M, K, generator=g), torch.randn(N, K, generator=g)
        quant = {"tensor": quantize_tensor, "row": quantize_rows}.get(scaling)
        if scaling == "block":
            (qa, sa), (qw, sw) = quantize_blocks(x, fmt, 1, 128), quantize_blocks(w, fmt, 128, 128)
            sb = sw.t()
        else:
            (qa, sa), (qw, sw) = quant(x, fmt_a), quant(w, fmt)
            sb = sw.t() if scaling == "row" else sw
        qa, qw, sa, sb = (t.to(device) for t in (qa, qw, sa, sb))
        b = qw.t()  # K-major
        state.update(a=qa, b=b, sa=sa, sb=sb)
        impls = {"warpsmith": lambda: wops.scaled_matmul(qa, b, sa, sb, torch.bfloat16, scaling=scaling)}
        if kind in ("fp8_tensor", "fp8_row", "fp8_hybrid"):
            impls["torch_scaled_mm"] = lambda: torch._scaled_mm(qa, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        elif kind == "w8a8":
            impls["torch_int_mm"] = lambda: (torch._int_mm(qa, b).float() * sa * sb).to(torch.bfloat16)
        else:
            xa = (qa.float() * sa.repeat_interleave(128, 1)[:, :K]).bfloat16()
            wb = (qw.float().t().to(device) * sb.repeat_interleave(128, 0)[:K].repeat_interleave(128, 1)[:, :N]).bfloat16()
            impls["warpsmith_bf16_matmul"] = lambda: wops.matmul(xa, wb)
        return impls

    def check(outs: dict[str, Any]) -> dict[str, Any]:
        from warpsmith.ops.lowprec.scaled.spec import SCALED_MATMUL as S

        p = S.problem(problem["shape"], "bfloat16", problem["attrs"])
        inputs = {"a": state["a"], "b": state["b"], "scale_a": state["sa"], "scale_b": state["sb"]}
        ref64, scale = S.oracle(inputs, p.attrs)
        ok, msg = S.contract(p).check(outs["warpsmith"], ref64, scale)
        res = {"contract_ok": ok, "contract": msg}
        for name, o in outs.items():
            if name != "warpsmith":
                res[f"calc_diff_vs_{name}"] = calc_diff(outs["warpsmith"].float(), o.float())
        return res

    return Case(f"{kind}_M{M}_N{N}_K{K}", "scaled_gemm", {"M": M, "N": N, "K": K}, 2.0 * M * N * K,
                float(M * K + N * K + 2 * M * N), [problem], setup, check)


QUANT_KINDS = ("quant_row", "quant_block", "quant_tensor", "rmsnorm_quant", "stochastic_round")
_GRANULARITY = {"quant_row": "row", "quant_tensor": "tensor"}  # the others: block
COPY_TARGET = 0.85  # the target: quantization kernels at >= 85% of a same-bytes copy's bandwidth


def _quant_problem(kind: str, M: int, N: int) -> dict[str, Any]:
    if kind == "stochastic_round":
        return {"op": "stochastic_round", "shape": {"N": M * N}, "dtype": "float32", "attrs": {"target": "bf16"}}
    return {"op": "quantize", "shape": {"M": M, "N": N}, "dtype": "bfloat16",
            "attrs": {"format": "e4m3", "granularity": _GRANULARITY.get(kind, "block"),
                      "norm": kind == "rmsnorm_quant"}}


def _quant_case(kind: str, M: int, N: int) -> Case:
    """``warpsmith``: the public function (a tuned record where the DB has one, else the default);
    ``warpsmith_default``: the variant at its heuristic default (today's launch); ``copy``: a device copy
    of the same bytes (read x, write q and the scales; for stochastic rounding read fp32, write bf16)."""
    problem = _quant_problem(kind, M, N)
    sr = kind == "stochastic_round"
    # the bytes the op must move (per tensor reads x twice, so its fraction of this copy is at most about 3/5)
    scales = {"quant_row": M, "quant_tensor": 1}.get(kind, M * -(-N // 128))
    moved = M * N * (4 + 2) if sr else M * N * (2 + 1) + 4 * scales

    def setup(device: str) -> dict[str, Callable[[], Any]]:
        import warpsmith.ops as wops
        from warpsmith.ops import get_op, variants
        from warpsmith.targets import current_device

        spec = get_op(problem["op"])
        p = spec.problem(problem["shape"], problem["dtype"], problem["attrs"])
        variant = next(iter(variants(p.op).values()))
        default = variant.default_config(p, current_device().target)
        dst = torch.empty(moved // 2, dtype=torch.uint8, device=device)
        if sr:
            x = torch.randn(M * N, device=device)
            src = x.view(torch.uint8)[: dst.numel()]
            return {"warpsmith": lambda: wops.stochastic_round(x, torch.bfloat16, 0),
                    "warpsmith_default": lambda: variant.launch({"x": x}, p, default),
                    "copy": lambda: dst.copy_(src)}
        x = torch.randn(M, N, device=device, dtype=torch.bfloat16)
        w = torch.ones(N, device=device, dtype=torch.bfloat16)
        gran, norm = problem["attrs"]["granularity"], w if problem["attrs"]["norm"] else None
        inputs = {"x": x} if norm is None else {"x": x, "weight": w}
        src = x.view(torch.uint8).reshape(-1)[: dst.numel()]
        return {"warpsmith": lambda: wops.quantize(x, "e4m3", gran, norm_weight=norm),
                "warpsmith_default": lambda: variant.launch(inputs, p, default),
                "copy": lambda: dst.copy_(src)}

    return Case(f"{kind}_M{M}_N{N}", "quantization", {"M": M, "N": N}, 0.0, float(moved), [problem], setup,
                extra={"copy_target": COPY_TARGET})


def copy_fraction(row: dict[str, Any], target: float) -> dict[str, Any]:
    """Each warpsmith impl's bandwidth as a fraction of the same-bytes copy's (copy ms / impl ms), and
    whether it meets ``target``; empty without timings (the dry run)."""
    impls = row["impls"]
    if "ms" not in impls.get("copy", {}):
        return {}
    out = {}
    for name in ("warpsmith", "warpsmith_default"):
        if "ms" in impls.get(name, {}):
            frac = impls["copy"]["ms"] / impls[name]["ms"]
            out[name] = {"fraction_of_copy": frac, "meets_target": frac >= target}
    return out


def scaled_cases(args: argparse.Namespace) -> list[Case]:
    out = []
    for M in args.tokens:
        for N, K in SHAPES:
            for kind in ("fp8_tensor", "fp8_row", "fp8_hybrid", "fp8_block", "w8a8"):
                out.append(_scaled_case(kind, M, N, K))
    return out


def quant_cases(args: argparse.Namespace) -> list[Case]:
    return [_quant_case(k, M, 4096) for M in args.tokens for k in QUANT_KINDS]


def _int4_case(c: dict[str, Any]) -> Case:
    import lowprec_int4 as i4

    def setup(device: str) -> dict[str, Callable[[], Any]]:
        from warpsmith.ops import int4_matmul
        from warpsmith.ops.lowprec.int4.formats import dequantize, quantize_int4

        gen = torch.Generator().manual_seed(0)
        w = torch.randn(c["K"], c["N"], generator=gen) * 0.02
        pk = quantize_int4(w, c["group_size"], c["format"], scale_dtype=torch.float16)
        wd = dequantize(pk, torch.float16).to(device)
        qw, qz, s = pk.qweight.to(device), pk.qzeros.to(device), pk.scales.to(device)
        x = torch.randn(c["M"], c["K"], generator=gen).to(device, torch.float16)
        return {"warpsmith": lambda: int4_matmul(x, qw, s, qz, c["group_size"], format=c["format"]),
                "torch_fp16_matmul": lambda: torch.matmul(x, wd)}

    def check(outs: dict[str, Any]) -> dict[str, Any]:
        y, r = outs["warpsmith"].double(), outs["torch_fp16_matmul"].double()
        rel = float((y - r).norm() / r.norm().clamp(min=1e-30))
        return {"rel_err_vs_fp16_dequantized": rel, "ok": rel <= i4.INCORRECT}

    wb4, _ = i4._weight_bytes(c)
    return Case(f"int4_{c['format']}_{c['model']}_{c['proj']}_M{c['M']}", "int4_weight_only",
                {"M": c["M"], "N": c["N"], "K": c["K"]}, 2.0 * c["M"] * c["N"] * c["K"],
                wb4 + 2.0 * (c["M"] * c["K"] + c["M"] * c["N"]), i4.problems(c), setup, check)


def int4_cases(args: argparse.Namespace) -> list[Case]:
    """int4 weight-only (AWQ and GPTQ, group 128) vs torch's fp16 GEMM on the dequantized weight, Llama-3-8B
    projections at M = 1, 16, 64, 4096 (benchmarks/lowprec_int4.py holds the cases; it also runs alone)."""
    import lowprec_int4 as i4

    if getattr(args, "tiny", False):  # the dry run: one small shape per format
        return [_int4_case({"model": "tiny", "proj": "x", "M": 3, "N": 136, "K": 256, "format": f, "group_size": 128})
                for f in ("awq", "gptq")]
    return [_int4_case(c) for c in i4.cases() if c["model"] == "llama3-8b"]


# the hook: each builder returns cases
CASE_BUILDERS: list[Callable[[argparse.Namespace], list[Case]]] = [scaled_cases, quant_cases, int4_cases]


def build(args: argparse.Namespace) -> list[Case]:
    return [c for b in CASE_BUILDERS for c in b(args)]


def header() -> dict[str, Any]:
    from warpsmith.targets import versions

    return {"benchmark": BENCHMARK, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (Triton interpreter)",
            "versions": versions()}


def run_case(case: Case, device: str, dry: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"name": case.name, "group": case.group, "shape": case.shape, "impls": {}}
    impls = case.setup(device)
    outs = {}
    for name, fn in impls.items():
        try:
            outs[name] = fn()
            if dry:
                row["impls"][name] = {"status": "ok"}
                continue
            from warpsmith.measure.timing import time_gpu

            t = time_gpu(lambda _: fn(), [None])
            r = {"status": "ok", "ms": t.median_ms}
            if case.flops:
                r["tflops"] = case.flops / t.median_ms / 1e9
            r["gbps"] = case.bytes / t.median_ms / 1e6
            row["impls"][name] = r
        except Exception as exc:  # an impl that refuses the case is reported, not fatal
            row["impls"][name] = {"status": f"unavailable: {type(exc).__name__}: {str(exc)[:200]}"}
    if case.check and "warpsmith" in outs:
        row["check"] = case.check(outs)
    if "copy_target" in case.extra:
        row["copy_bandwidth"] = {"target": case.extra["copy_target"], **copy_fraction(row, case.extra["copy_target"])}
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="output folder (default benchmarks/results/<gpu>/)")
    p.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="comma-separated M values")
    p.add_argument("--groups", default="scaled_gemm,quantization,int4_weight_only", help="comma-separated case groups")
    p.add_argument("--total-time", type=float, default=420.0, help="start no new case after this many seconds")
    p.add_argument("--print-plan", action="store_true", help="list the cases and exit")
    p.add_argument("--dry-run", action="store_true", help="CPU: tiny cases for correctness, then the static compile")
    p.add_argument("--no-static", action="store_true")
    p.add_argument("--static-target", default=STATIC_TARGET)
    p.add_argument("--static-sample", type=int, default=1)
    args = p.parse_args(argv)
    args.tokens = [int(t) for t in args.tokens.split(",") if t]
    groups = set(args.groups.split(","))
    cases = [c for c in build(args) if c.group in groups]
    if args.print_plan:
        for c in cases:
            say(f"{c.group:14s} {c.name}")
        say(f"{len(cases)} cases")
        return 0
    out = Path(args.out or Path(__file__).parent / "results" / "local")
    out.mkdir(parents=True, exist_ok=True)
    doc = {**header(), "dry_run": args.dry_run, "timing_kind": "none" if args.dry_run else "measured",
           "cases": [], "failed": []}
    path = out / (f"{BENCHMARK}_dry.json" if args.dry_run else f"{BENCHMARK}_{doc['date'][:10]}.json")
    device = "cpu" if args.dry_run else "cuda"
    small = argparse.Namespace(tokens=[3], tiny=True)
    run_cases = cases
    if args.dry_run:  # tiny shapes, correctness only
        global SHAPES
        SHAPES, real = ((136, 160),), SHAPES
        run_cases = [c for c in build(small) if c.group in groups]
        SHAPES = real
    t0 = time.perf_counter()
    for c in run_cases:
        if time.perf_counter() - t0 > args.total_time:
            doc["skipped_for_time"] = doc.get("skipped_for_time", []) + [c.name]
            continue
        try:
            row = run_case(c, device, args.dry_run)
            if row.get("check") and not row["check"].get("contract_ok", True):
                doc["failed"].append(c.name)
        except Exception:
            row = {"name": c.name, "error": traceback.format_exc()[-1000:]}
            doc["failed"].append(c.name)
        doc["cases"].append(row)
        say(c.name, {k: v.get("ms", v["status"]) for k, v in row.get("impls", {}).items()}, row.get("check", ""))
        write_json(path, doc)
        broken = cuda_broken()
        if broken:
            doc["cuda_error"] = broken
            break
    rc = 1 if doc["failed"] else 0
    if args.dry_run and not args.no_static:
        probs = [pr for c in cases for pr in c.problems]
        doc["static_compile"] = static_compile(probs, args.static_target, args.static_sample,
                                               out / f"{BENCHMARK}_gpucheck.json")
        rc = rc or (0 if doc["static_compile"]["ok"] else 1)
    write_json(path, doc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
