#!/usr/bin/env python3
"""Memory-bound ops against torch eager, torch.compile and Liger-Kernel, forward and backward, in one run.

Ops: rms_norm, layer_norm, softmax, log_softmax, swiglu, geglu (tanh), rope, cross_entropy and
fused_linear_cross_entropy, each called as a user calls it (``warpsmith.ops.<op>``: dispatch to
the best verified config in the run's own tuning DB, else the heuristic default), against

- ``eager``: plain PyTorch (``F.rms_norm``, ``F.layer_norm``, ``torch.softmax``, ``silu(g) * u``,
  Hugging Face's ``rotate_half`` RoPE, ``F.cross_entropy``, ``hidden @ weight.T`` + ``F.cross_entropy``);
- ``compile``: ``torch.compile`` (default mode, static shapes) of the same eager function; its
  compile time (``first_call_s``) is excluded from the timings and reported separately;
- ``liger``: Liger-Kernel's functional API when ``liger_kernel`` is importable (none for log_softmax).

An op that ``warpsmith.ops`` lacks is skipped with the reason. Each case measures the forward, the
backward alone (forward untimed, L2 flushed, then the gradients timed) and forward+backward: CUDA
events, warm-up, L2 flush, median (warpsmith.measure.timing). Inputs require grad (a training
forward). Liger computes cross-entropy gradients inside its forward (and so does warpsmith's fused
linear CE), so those two ops are compared on forward+backward. Every impl's outputs and gradients
are checked against an fp32 eager reference (relative L2 error); a wrong warpsmith result is
reported as INCORRECT and fails its op's verdicts.

Bytes: the spec ``min_bytes`` of the problems warpsmith dispatched (``<op>_backward``'s for the
backward); GB/s is reported as a fraction of a device-to-device copy of 1 GiB timed in the same run
(at the start and the end; the higher is used). Row lengths N go from 1k to 256k (hidden sizes,
MLP widths, vocabularies of 32000 / 128256 / 256000, Llama-3 RoPE), with enough rows that the main
input holds ``--elements`` (64 Mi) elements, i.e. each case moves >= 256 MB.

Targets (shared/TARGETS.md, issue 4), reported MET / NOT MET, never asserted: >= 90% of the measured
copy bandwidth at rows >= 4k; faster than Liger and torch.compile on each op; fused linear CE peak
memory <= 1/4 of the unfused path at a 128k vocabulary (M=8192 tokens, H=4096).

Cases run in tiers (tier 1: one realistic shape per op; 2: the rest at rows >= 4k; 3: 1k, 64k/256k
and the small RoPE), so when ``--total-time`` runs out (or SIGINT arrives) it is tier 3 that is
skipped; skipped cases are listed in the JSON and the table. With time left, the problems warpsmith
dispatched are tuned (``tune()``, ``--tune-budget``) and warpsmith is measured again ("tuned").

``--dry-run`` runs the tiny cases for correctness only (CPU, interpreter), then (unless
``--no-static``) compiles, statically, every problem the real run's warpsmith impl would launch for
the selected ``--ops``, ``--dtype``, ``--tiers`` and ``--elements``, forward and backward (found by
calling the benchmark's own warpsmith call and its backward on the real cases with a stand-in for
the kernel launch: :func:`trace_problems`), for the device's GPU (``--static-target``, default
h200: sm_90) with Triton's real compiler behind a stub driver (``warpsmith.gpucheck``): each
variant at its default config and ``--static-sample`` configs of its space (what the tuned pass
draws from), launched twice through the real launchers; nothing runs. Any failure (compile
error, launch-time error, resources over the target's limits, a spill in a default config) makes
the dry run exit 1 after writing its JSON (``static_compile`` section) and table; the full report
is ``gpucheck_memory_bound.json`` in the output folder.

Usage::

    python benchmarks/memory_bound.py --dry-run --out /tmp/mb_dry   # CPU: tiny cases, correctness, static compile
    python benchmarks/memory_bound.py --out out                     # GPU: about 6 minutes
    python benchmarks/memory_bound.py --tiers 1 --out out           # GPU: tier 1, then tuning with the time left
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gc
import json
import math
import os
import signal
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script
from bench_common import REPO, STATIC_TARGET, cuda_broken, say, static_compile, write_json  # noqa: E402  (makes src/ importable)

import torch  # noqa: E402
from memory_bound_cases import (COMPUTE_BOUND, ELEMENTS, FLCE_TARGET_VOCAB, OPDEFS, OPS, Case,  # noqa: E402
                                OpDef, import_liger, import_warpsmith_ops, suite)

BENCHMARK = "memory_bound"
FORMAT = 1
IMPLS = ("warpsmith", "eager", "compile", "liger")
BASELINES = ("eager", "compile", "liger")
TARGET_COPY_FRACTION, TARGET_FLCE_MEMORY = 0.90, 0.25
COPY_BYTES = 1 << 30
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}  # rel. L2 error vs an fp32 reference
# Liger computes cross-entropy gradients inside its forward: those ops are compared on fwd+bwd.
FUSED_BACKWARD = ("cross_entropy", "fused_linear_cross_entropy")
# --dry-run's static step: configs drawn from each variant's space per problem, besides its default
# (benchmarks/README.md: what it costs on a 2-core CPU)
STATIC_SAMPLE = 1


# ----------------------------------------------------------------------------------- running one impl
def _tuple(x: Any) -> tuple[torch.Tensor, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def rel_err(a: torch.Tensor, r: torch.Tensor) -> float:
    a, r = a.detach().float(), r.detach().float()
    if a.shape != r.shape:
        return math.inf
    return float((a - r).norm() / r.norm().clamp_min(1e-30))


def _fresh(inputs: dict[str, torch.Tensor], diff: tuple[str, ...], dtype: torch.dtype | None = None) -> dict:
    """Copies of the inputs (keeping their strides), the differentiable ones as new leaves."""
    out = {}
    for k, v in inputs.items():
        c = v.detach()
        if dtype is not None and c.is_floating_point():
            c = c.to(dtype)
        elif dtype is None:
            c = torch.empty_strided(c.shape, c.stride(), dtype=c.dtype, device=c.device).copy_(c)
        out[k] = c.requires_grad_(k in diff)
    return out


@dataclass
class Bench:
    """One case's inputs, upstream gradients and reference outputs/gradients (fp32)."""

    opdef: OpDef
    inputs: dict[str, torch.Tensor]
    grads_out: tuple[torch.Tensor, ...]
    ref: tuple[torch.Tensor, ...]

    def call(self, fn: Callable[[dict], Any], inputs: dict | None = None) -> tuple[torch.Tensor, ...]:
        return _tuple(fn(self.inputs if inputs is None else inputs))

    def grads(self, outs: tuple[torch.Tensor, ...], inputs: dict | None = None,
              grads_out: tuple[torch.Tensor, ...] | None = None) -> tuple[torch.Tensor, ...]:
        i = self.inputs if inputs is None else inputs
        g = self.grads_out if grads_out is None else grads_out
        return torch.autograd.grad(outs, [i[k] for k in self.opdef.diff], g[: len(outs)])


def make_bench(opdef: OpDef, case: Case, dtype: torch.dtype, device: str, seed: int) -> Bench:
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(shape, dt):
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dt)
    randn.gen = gen
    inputs = {k: v.detach().requires_grad_(k in opdef.diff) for k, v in opdef.make(case.d, dtype, randn).items()}
    x32 = _fresh(inputs, opdef.diff, torch.float32)
    outs = _tuple(opdef.eager(x32))
    gouts = tuple(randn(o.shape, dtype) if o.numel() > 1 else torch.ones((), device=device, dtype=dtype) for o in outs)
    gref = torch.autograd.grad(outs, [x32[k] for k in opdef.diff], tuple(g.float() for g in gouts))
    ref = tuple(o.detach() for o in outs) + tuple(gref)
    del x32, outs, gref
    return Bench(opdef, inputs, gouts, ref)


@contextlib.contextmanager
def dispatch_spy():
    """Records (problem, choice source) of every warpsmith dispatch inside the block."""
    seen: list[tuple[Any, str]] = []
    try:
        from warpsmith import dispatch
    except Exception:
        yield seen
        return
    original = dispatch.select

    def spy(problem, variants):
        choice = original(problem, variants)
        seen.append((problem, choice.source))
        return choice
    dispatch.select = spy
    try:
        yield seen
    finally:
        dispatch.select = original


class _TraceLaunch:
    """Stands in for every kernel variant while :func:`trace_problems` runs: records the problem,
    returns uninitialized outputs of the shapes its spec states (``OpSpec.outputs``); launches nothing."""

    name = "trace"

    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    def launch(self, inputs: dict[str, torch.Tensor], problem: Any, config: Any, out: Any = None) -> Any:
        from warpsmith.ops import get_op

        self.seen.append(problem)
        if out is not None:
            return out
        device = next(iter(inputs.values())).device
        outs = tuple(torch.empty(shape, dtype=dt, device=device) for shape, dt in get_op(problem.op).outputs(problem))
        return outs[0] if len(outs) == 1 else outs


@contextlib.contextmanager
def dispatch_trace():
    """Inside the block, every warpsmith dispatch is recorded and launches nothing (see :class:`_TraceLaunch`)."""
    from warpsmith import dispatch

    seen: list[Any] = []
    original = dispatch.select
    dispatch.select = lambda problem, variants: dispatch.Choice(_TraceLaunch(seen), {}, "trace")
    try:
        yield seen
    finally:
        dispatch.select = original


def trace_problems(case: Case, wops: Any, dtype: torch.dtype, device: str, seed: int = 0) -> list[Any]:
    """The problems (``warpsmith.core.opspec.Problem``) the warpsmith impl dispatches on ``case``, forward then
    backward, as :func:`run_impl` calls it (the op's ``OPDEFS`` inputs, call and differentiable
    inputs), with no kernel launched: inputs and outputs are uninitialized tensors of the real sizes
    (memory is allocated, little of it touched)."""
    opdef = OPDEFS[case.op]
    gen = torch.Generator(device=device).manual_seed(seed)

    def blank(shape, dt):
        return torch.empty(shape, dtype=dt, device=device)
    blank.gen = gen
    inputs = {k: v.detach().requires_grad_(k in opdef.diff) for k, v in opdef.make(case.d, dtype, blank).items()}
    with dispatch_trace() as seen:
        outs = _tuple(opdef.warpsmith(wops, inputs))
        gouts = tuple(blank(o.shape, o.dtype) if o.numel() > 1 else torch.ones((), device=device, dtype=o.dtype)
                      for o in outs)
        torch.autograd.grad(outs, [inputs[k] for k in opdef.diff], gouts)
    return list(seen)


def static_problems(cases: list[Case], wops: Any, dtype: torch.dtype, device: str,
                    seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Every distinct problem the real run's warpsmith impl (and so its tuned pass) launches on
    ``cases``, forward and backward, as ``{"op", "shape", "dtype", "attrs"}`` for the static compile
    (``warpsmith.gpucheck.check_problems``), and the cases whose call failed (``{"case", "error"}``).
    A fused linear cross-entropy's GEMMs are launched, and so compiled, by its own launcher."""
    out: dict[str, dict[str, Any]] = {}
    errors: list[dict[str, str]] = []
    for case in cases:
        try:
            seen = trace_problems(case, wops, dtype, device, seed)
        except Exception as exc:  # the real run would fail there too: a failure of the static step
            errors.append({"case": case.describe(), "error": f"{type(exc).__name__}: {exc}"[:500]})
            continue
        for p in seen:
            out.setdefault(p.describe(), {"op": p.op, "shape": dict(p.shape), "dtype": p.dtype_name,
                                          "attrs": dict(p.attrs)})
    return list(out.values()), errors


def min_bytes(problems: list[Any]) -> float | None:
    from warpsmith.ops import get_op
    try:
        return float(sum(get_op(p.op).min_bytes(p) for p in problems)) if problems else None
    except Exception:
        return None


_ALIASES = {"H": ("N",), "N": ("V", "H"), "V": ("N",)}  # spec axis -> the case's name for it (gated: H is N)


def spec_bytes(op: str, case: Case, dtype: torch.dtype, attrs: dict) -> tuple[float | None, float | None]:
    """min_bytes of the forward and backward specs, with the spec's axes filled from the case's sizes."""
    from warpsmith.ops import get_op
    out: list[float | None] = []
    for name in (op, f"{op}_backward"):
        try:
            spec = get_op(name)
            shape = {}
            for a in spec.axes:
                have = [n for n in (a.name, *_ALIASES.get(a.name, ())) if n in case.d]
                if have:
                    shape[a.name] = case.d[have[0]]
            out.append(float(spec.min_bytes(spec.problem(shape, dtype, {k: v for k, v in attrs.items()
                                                                          if k in spec.attr_choices}))))
        except Exception:
            out.append(None)
    return out[0], out[1]


def run_impl(bench: Bench, fn: Callable[[dict], Any], timer: Any, impl: str, own_inputs: bool) -> dict[str, Any]:
    """First call (compile / JIT, timed on the host clock), correctness, then the timings.

    ``own_inputs``: the impl gets copies of the inputs and upstream gradients (Liger writes into them).
    The problems warpsmith dispatched are returned under ``problems`` (Problem objects).
    """
    res: dict[str, Any] = {"status": "ok"}
    inputs = _fresh(bench.inputs, bench.opdef.diff) if own_inputs else bench.inputs
    gouts = tuple(g.clone() for g in bench.grads_out) if own_inputs else bench.grads_out
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)

    def fwd():
        return bench.call(fn, inputs)

    def bwd(outs):
        return bench.grads(outs, inputs, gouts)

    t = time.perf_counter()
    with dispatch_spy() as fw:
        outs = fwd()
    sync()
    res["first_fwd_s"] = round(time.perf_counter() - t, 3)
    with dispatch_spy() as bw:
        grads = bwd(outs)
    sync()
    res["first_call_s"] = round(time.perf_counter() - t, 3)
    errs = [rel_err(a, r) for a, r in zip(outs + grads, bench.ref)]
    tol = TOL.get(bench.inputs[bench.opdef.diff[0]].dtype, 2e-2)
    res["rel_err"], res["tolerance"] = (max(errs) if errs else math.inf), tol
    res["correct"] = len(errs) == len(bench.ref) and all(e <= tol for e in errs)  # NaN fails
    res["problems"] = {"fwd": fw, "bwd": bw}
    del outs, grads
    if timer is not None:
        res["fwd_ms"] = timer.fwd(impl, fwd)
        res["bwd_ms"] = timer.bwd(impl, fwd, bwd)
        res["fwdbwd_ms"] = timer.fwd(impl, lambda: bwd(fwd()))
        extra, peak = timer.peak(impl, lambda: bwd(fwd()))
        res["peak_extra_mib"], res["peak_mib"] = round(extra / 2**20, 1), round(peak / 2**20, 1)
    return res


# ----------------------------------------------------------------------------------- timers
class GpuTimer:
    """CUDA events around each call, L2 flushed before each, warm-up, median (warpsmith.measure.timing)."""

    def __init__(self) -> None:
        from warpsmith.measure.timing import L2_FLUSH_BYTES, time_gpu
        self._time_gpu = time_gpu
        self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def fwd(self, impl: str, fn: Callable[[], Any]) -> float:
        return self._time_gpu(lambda _: fn(), [None], warmup=3, runs=25, max_ms=300).median_ms

    def bwd(self, impl: str, forward: Callable[[], Any], backward: Callable[[Any], Any], runs: int = 15,
            max_ms: float = 300.0) -> float:
        """The backward alone: forward untimed, L2 flushed, then the gradients between two events
        (fewer runs, at least 5, when one forward+backward is slow)."""
        backward(forward())
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        backward(forward())
        e.record()
        torch.cuda.synchronize()
        runs = max(5, min(runs, int(max_ms / max(s.elapsed_time(e), 1e-3))))
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
        for s, e in ev:
            outs = forward()
            self._flush.zero_()
            s.record()
            backward(outs)
            e.record()
            del outs
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in ev)

    def peak(self, impl: str, fn: Callable[[], Any]) -> tuple[float, float]:
        """(peak bytes allocated during ``fn`` above what was allocated before, absolute peak)."""
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        return float(peak - base), float(peak)

    def copy_gbps(self, nbytes: int = COPY_BYTES) -> dict[str, float]:
        src = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
        dst = torch.empty_like(src)
        ms = self.fwd("copy", lambda: dst.copy_(src))
        del src, dst
        return {"bytes": 2.0 * nbytes, "ms": ms, "gbps": 2.0 * nbytes / ms / 1e6}


# ----------------------------------------------------------------------------------- one case
def _row(case: Case, dtype: str) -> dict[str, Any]:
    return {"op": case.op, "name": case.name, "dims": case.d, "N": case.N, "rows": case.rows, "dtype": dtype,
            "tier": case.tier, "bw_judged": case.bw_judged, "status": "pending", "seconds": None, "bytes": None,
            "bytes_source": None, "flops": None, "impls": {}, "tuned": None, "error": None}


def _describe(seen: list[tuple[Any, str]]) -> list[dict[str, Any]]:
    return [{"problem": p.describe(), "op": p.op, "shape": dict(p.shape), "source": src} for p, src in seen]


def run_case(case: Case, ctx: "Ctx") -> dict[str, Any]:
    """Every impl on one case; every failure becomes part of the row, nothing is raised (but KeyboardInterrupt)."""
    row = _row(case, ctx.dtype_name)
    row["captured"] = captured = {"fwd": [], "bwd": []}  # problems warpsmith dispatched (for the tuned pass)
    t0 = time.perf_counter()
    opdef = OPDEFS[case.op]
    bench = None
    try:
        bench = make_bench(opdef, case, ctx.dtype, ctx.device, ctx.seed)
        for impl in ctx.impls:
            if impl == "liger" and (ctx.liger is None or opdef.liger is None):
                why = ctx.liger_info["reason"] if ctx.liger is None else "Liger-Kernel has no such op"
                row["impls"][impl] = {"status": "unavailable", "reason": why}
                continue
            fn = {"warpsmith": lambda i: opdef.warpsmith(ctx.wops, i), "eager": opdef.eager,
                  "liger": lambda i: opdef.liger(ctx.liger, i)}.get(impl)
            try:
                if impl == "compile":
                    torch._dynamo.reset()  # fresh graphs: no recompile limit, no automatic dynamic shapes
                    fn = torch.compile(opdef.eager, dynamic=False)
                r = run_impl(bench, fn, ctx.timer, impl, own_inputs=(impl == "liger"))  # Liger writes into inputs
                problems = r.pop("problems")
                if impl == "warpsmith":
                    row["captured"] = captured = problems
                    r["problems"] = {k: _describe(v) for k, v in problems.items()}
            except Exception as exc:
                r = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000],
                     "traceback": traceback.format_exc(limit=8)[-3000:]}
                if cuda_broken():
                    raise
            row["impls"][impl] = r
        fill_bytes(row, case, ctx, captured)
        ws = row["impls"].get("warpsmith", {})
        row["status"] = "ok" if ws.get("status") == "ok" and ws.get("correct") else (
            "error" if ws.get("status") != "ok" else "incorrect")
        if ws.get("status") != "ok":
            row["error"] = ws.get("reason")
    except Exception as exc:
        row["status"], row["error"] = "error", f"{type(exc).__name__}: {exc}"[:1000]
        row["traceback"] = traceback.format_exc(limit=8)[-3000:]
    finally:
        row["seconds"] = round(time.perf_counter() - t0, 2)
        del bench
        if ctx.device == "cuda":  # free what a failure's traceback may hold (a slow no-op on the CPU)
            gc.collect()
            torch.cuda.empty_cache()
    return row


def fill_bytes(row: dict, case: Case, ctx: "Ctx", captured: dict[str, list]) -> None:
    """Bytes of each direction: the spec min_bytes of the problems warpsmith dispatched, else the
    spec's with its axes filled from the case's sizes, else this script's estimate (source recorded)."""
    opdef = OPDEFS[case.op]
    spec = spec_bytes(case.op, case, ctx.dtype, opdef.attrs)
    est = opdef.est_bytes(case.d, ctx.dtype.itemsize)
    row["bytes"], row["bytes_source"] = {}, {}
    for i, d in enumerate(("fwd", "bwd")):
        for value, source in ((min_bytes([p for p, _ in captured[d]]), "dispatched problems' spec min_bytes"),
                              (spec[i], "spec min_bytes, sizes from the case"), (est[i], "benchmark estimate")):
            if value:
                row["bytes"][d], row["bytes_source"][d] = value, source
                break
    row["bytes"]["fwd+bwd"] = row["bytes"]["fwd"] + row["bytes"]["bwd"]
    fl = opdef.flops(case.d)
    if fl:
        row["flops"] = {"fwd": fl[0], "bwd": fl[1], "fwd+bwd": fl[0] + fl[1]}



# ----------------------------------------------------------------------------------- derived numbers
DIRECTIONS = {"fwd": "fwd_ms", "bwd": "bwd_ms", "fwd+bwd": "fwdbwd_ms"}


def table_directions(op: str) -> tuple[str, ...]:
    if op in COMPUTE_BOUND:
        return ("fwd+bwd",)
    return ("fwd", "bwd", "fwd+bwd") if op in FUSED_BACKWARD else ("fwd", "bwd")


def judged_directions(op: str) -> tuple[str, ...]:
    """Directions the 'faster than' verdicts use (Liger fuses the CE backward into its forward)."""
    return ("fwd+bwd",) if op in FUSED_BACKWARD else ("fwd", "bwd")


def ws_result(row: dict) -> tuple[dict | None, str]:
    """warpsmith's numbers for the row: tuned if a tuned config was dispatched and is correct, else default."""
    t = (row.get("tuned") or {}).get("result")
    if t and t.get("status") == "ok" and t.get("correct") and t.get("dispatched") in ("db", "mixed") and "fwd_ms" in t:
        return t, "tuned"  # what a user gets after `warpsmith tune` (the default's numbers stay in impls)
    d = row["impls"].get("warpsmith")
    return (d if d and d.get("status") == "ok" else None), "default"


def derive(row: dict, copy_gbps: float | None) -> None:
    """Per direction: warpsmith ms, GB/s, fraction of copy bandwidth, speedups over the baselines."""
    ws, which = ws_result(row)
    row["directions"] = {}
    if ws is None or "fwd_ms" not in ws:
        return
    for dname, key in DIRECTIONS.items():
        ms = ws.get(key)
        nbytes = (row["bytes"] or {}).get(dname)
        gbps = nbytes / ms / 1e6 if ms and nbytes else None
        entry: dict[str, Any] = {"warpsmith_ms": ms, "warpsmith_config": which, "gbps": gbps,
                                 "copy_fraction": gbps / copy_gbps if gbps and copy_gbps else None, "speedup": {}}
        if row.get("flops"):
            entry["tflops"] = row["flops"][dname] / ms / 1e9 if ms else None
        for b in BASELINES:
            bm = row["impls"].get(b, {}).get(key) if row["impls"].get(b, {}).get("status") == "ok" else None
            entry["speedup"][b] = bm / ms if bm and ms else None
            entry[f"{b}_ms"] = bm
        row["directions"][dname] = entry


def summarize(rows: list[dict], tiny: bool, measured: bool) -> dict[str, Any]:
    """The three targets' verdicts (None: not evaluated: nothing measured, or tiny cases that judge nothing)."""
    evaluate = measured and not tiny
    ops = list(dict.fromkeys(r["op"] for r in rows))
    bw, faster = {}, {}
    for op in ops:
        mine = [r for r in rows if r["op"] == op]
        bad = [r["name"] + ("" if r["status"] == "incorrect" else " (error)") for r in mine
               if r["status"] in ("incorrect", "error")]  # a wrong or failed warpsmith case fails its op
        fr = [(r["name"], d, r["directions"][d]["copy_fraction"]) for r in mine if r["bw_judged"]
              for d in ("fwd", "bwd") if r.get("directions", {}).get(d, {}).get("copy_fraction")]
        if op not in COMPUTE_BOUND:
            worst = min(fr, key=lambda t: t[2]) if fr else None
            bw[op] = {"counted": len(fr), "min_fraction": worst[2] if worst else None,
                      "worst": f"{worst[0]} {worst[1]}" if worst else None,
                      "mean_fraction": statistics.fmean(f for *_, f in fr) if fr else None, "incorrect": bad,
                      "met": (not bad and worst[2] >= TARGET_COPY_FRACTION) if evaluate and worst else None}
        faster[op] = {}
        for b in ("compile", "liger"):
            sp = [r["directions"][d]["speedup"][b] for r in mine for d in judged_directions(op)
                  if (r.get("directions", {}).get(d, {}).get("speedup") or {}).get(b)]
            gm = math.exp(statistics.fmean(math.log(s) for s in sp)) if sp else None
            faster[op][b] = {"counted": len(sp), "geomean": gm, "wins": sum(s > 1 for s in sp),
                             "min": min(sp) if sp else None, "incorrect": bad,
                             "met": (not bad and gm > 1.0) if evaluate and gm else None}
    flce = next((r for r in rows if r["op"] == "fused_linear_cross_entropy" and r["dims"].get("V") == FLCE_TARGET_VOCAB
                 and r["status"] in ("ok", "incorrect")), None)
    mem: dict[str, Any] = {"vocab": FLCE_TARGET_VOCAB, "target": TARGET_FLCE_MEMORY, "ratio": None, "met": None,
                           "measure": "peak bytes allocated during forward+backward above those allocated before "
                                      "(inputs resident), warpsmith / eager (logits materialized + F.cross_entropy)"}
    if flce:
        w, e = flce["impls"].get("warpsmith", {}), flce["impls"].get("eager", {})
        if w.get("peak_extra_mib") and e.get("peak_extra_mib"):
            mem.update(warpsmith_mib=w["peak_extra_mib"], unfused_mib=e["peak_extra_mib"],
                       warpsmith_abs_mib=w.get("peak_mib"), unfused_abs_mib=e.get("peak_mib"),
                       liger_mib=flce["impls"].get("liger", {}).get("peak_extra_mib"),
                       ratio=w["peak_extra_mib"] / e["peak_extra_mib"])
            mem["met"] = (mem["ratio"] <= TARGET_FLCE_MEMORY and flce["status"] == "ok") if evaluate else None
    return {"copy_bandwidth": bw, "faster": faster, "flce_memory": mem,
            "rules": {"copy_bandwidth": f"min over rows >= 4k (fwd and bwd) of GB/s / copy GB/s >= {TARGET_COPY_FRACTION}",
                      "faster": "geomean over the op's cases of baseline ms / warpsmith ms > 1 (fwd and bwd; "
                                "cross-entropy ops: fwd+bwd)",
                      "incorrect": "a case where warpsmith's result fails the fp32-reference check, or warpsmith "
                                   "fails, fails its op's verdicts"}}


# ----------------------------------------------------------------------------------- output

def _ms(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else (f"{x:.4f}" if x < 10 else f"{x:.2f}")


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _met(m: bool | None, why: str) -> str:
    return why if m is None else ("MET" if m else "NOT MET")


def render_table(rows: list[dict], summary: dict, title: str, not_eval: str) -> str:
    head = ("op", "dir", "N", "rows", "ws ms", "cfg", "GB/s", "%copy", "x eager", "x compile", "x liger", "note")
    body = []
    for r in rows:
        n = str(r["N"])
        if r["status"] in ("skipped", "error"):
            body.append((_short(r["op"]), "-", n, str(r["rows"]), "-", "-", "-", "-", "-", "-", "-",
                         f"{r['status']}: {(r.get('error') or '').splitlines()[0][:48] if r.get('error') else ''}"))
            continue
        for dname in table_directions(r["op"]):
            e = r.get("directions", {}).get(dname)
            if not e:  # a dry run: correctness only
                ws = r["impls"].get("warpsmith", {})
                body.append((_short(r["op"]), "check", n, str(r["rows"]), "-", "-", "-", "-", "-", "-", "-",
                             f"{'correct' if ws.get('correct') else 'INCORRECT'} (rel err {ws.get('rel_err', math.nan):.1e})"))
                break
            note = "INCORRECT" if r["status"] == "incorrect" else ""
            if r["op"] in COMPUTE_BOUND and e.get("tflops"):
                note = f"{e['tflops']:.0f} TFLOP/s"
            gb = "-" if r["op"] in COMPUTE_BOUND or not e["gbps"] else f"{e['gbps']:.0f}"
            frac = "-" if r["op"] in COMPUTE_BOUND or not e["copy_fraction"] else f"{100 * e['copy_fraction']:.1f}%"
            body.append((_short(r["op"]), dname, n, str(r["rows"]), _ms(e["warpsmith_ms"]), e["warpsmith_config"][0], gb, frac,
                         _x(e["speedup"]["eager"]), _x(e["speedup"]["compile"]), _x(e["speedup"]["liger"]), note))
    width = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.rjust(w) if 2 <= i <= 10 and i != 5 else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, width))).rstrip()
    rule = "-" * len(line(head))
    out = [rule, title, rule, line(head), rule, *(line(b) for b in body), rule,
           "cfg: d = warpsmith's default config, t = tuned; x <impl> = <impl> ms / warpsmith ms (above 1: warpsmith faster)",
           f"targets, per op: >= 90% of copy bw at rows >= 4k (min over fwd/bwd rows); faster than torch.compile "
           f"and Liger (geomean, wins/cases) [{not_eval or 'measured in this run'}]:"]
    ne = "n/a" if not_eval else "not evaluated"
    width_op = max((len(_short(op)) for op in summary["faster"]), default=0)
    for op, by in summary["faster"].items():
        parts = []
        e = summary["copy_bandwidth"].get(op)
        if e is not None:
            v = f"min {100 * e['min_fraction']:.1f}% ({e['worst']})" if e["min_fraction"] else "no rows >= 4k"
            parts.append(f"copy bw {v} {_met(e['met'], ne)}")
        for b, e in by.items():
            v = f"{e['geomean']:.2f}x ({e['wins']}/{e['counted']})" if e["geomean"] else "no data"
            parts.append(f"vs {b} {v} {_met(e['met'], ne)}")
        bad = by["compile"]["incorrect"]
        out.append(f"  {_short(op):<{width_op}}  " + "; ".join(parts) + (f"; INCORRECT: {', '.join(bad)}" if bad else ""))
    m = summary["flce_memory"]
    v = (f"{m['warpsmith_mib']:.0f} MiB vs unfused {m['unfused_mib']:.0f} MiB = {m['ratio']:.3f}"
         if m["ratio"] is not None else "not measured")
    out.append(f"  fused linear CE peak memory at V={m['vocab']}: {v} (target <= {m['target']}): {_met(m['met'], ne)}")
    return "\n".join(out)


def _short(op: str) -> str:
    return op.replace("cross_entropy", "ce")



def _clean(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "captured"}


def progress_line(row: dict) -> str:
    if row["status"] == "error" and not row["impls"]:
        return f"FAILED: {(row['error'] or '').splitlines()[0][:300]}"
    parts = []
    for impl, r in row["impls"].items():
        if r.get("status") != "ok":
            parts.append(f"{impl} {r.get('status')}" + (f" ({r.get('reason', '')[:120]})" if r.get("status") == "error" else ""))
            continue
        t = "/".join(_ms(r.get(k)) for k in ("fwd_ms", "bwd_ms")) if "fwd_ms" in r else "untimed"
        parts.append(f"{impl} {t} (first call {r['first_call_s']:.1f} s, err {r['rel_err']:.1e}"
                     + ("" if r["correct"] else " INCORRECT") + ")")
    fd = row.get("directions", {}).get("fwd", {})
    bw = f"; fwd {fd['gbps']:.0f} GB/s = {100 * fd['copy_fraction']:.0f}% copy" if fd.get("copy_fraction") else ""
    return f"{row['status']}: " + ", ".join(parts) + f" [fwd/bwd ms]{bw}, {row['seconds']:.1f} s"


# ----------------------------------------------------------------------------------- main
@dataclass
class Ctx:
    dtype: torch.dtype
    dtype_name: str
    device: str
    seed: int
    impls: tuple[str, ...]
    timer: Any
    wops: Any
    liger: Any
    liger_info: dict


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated (default: all)")
    p.add_argument("--impls", default=None, help="comma-separated from warpsmith,eager,compile,liger "
                   "(default: all; dry run: warpsmith,eager)")
    p.add_argument("--dtype", default="bfloat16", help="bfloat16 (default), float16 or float32")
    p.add_argument("--tiers", default="1,2,3", help="case tiers to run (1: one realistic shape per op)")
    p.add_argument("--elements", type=int, default=ELEMENTS, help="elements of each case's main input (default 64Mi)")
    p.add_argument("--total-time", type=float, default=340.0,
                   help="start no new case (nor tuning) after this many seconds, nor one unlikely to end by then (default 340)")
    p.add_argument("--tune-budget", type=int, default=6, help="evaluations per problem in the tuned pass (0: no tuning)")
    p.add_argument("--tune-time", type=float, default=8.0, help="seconds of search per problem in the tuned pass")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="output folder (default benchmarks/results/<gpu>/)")
    p.add_argument("--dry-run", action="store_true",
                   help="tiny cases, no timing: warpsmith vs eager correctness against an fp32 reference (CPU); then "
                        "the static compile of every problem the real run would launch (see --static-sample)")
    p.add_argument("--static-sample", type=int, default=STATIC_SAMPLE,
                   help="dry run's static compile: configs drawn from each variant's space per problem, besides its "
                        f"default config (default {STATIC_SAMPLE}; 0: default configs only)")
    p.add_argument("--static-target", default=STATIC_TARGET,
                   help=f"dry run's static compile: the GPU to compile for (default {STATIC_TARGET})")
    p.add_argument("--no-static", action="store_true", help="dry run without the static compile")
    p.add_argument("--tiny", action="store_true", help="the dry run's tiny cases, timed (a quick GPU smoke test)")
    args = p.parse_args(argv)
    args.tiny = args.tiny or args.dry_run
    args.ops = tuple(o.strip() for o in args.ops.split(",") if o.strip())
    bad = [o for o in args.ops if o not in OPS]
    if bad or not args.ops:
        p.error(f"--ops: expected some of {', '.join(OPS)}, got {bad or 'nothing'}")
    impls = args.impls or ("warpsmith,eager" if args.dry_run else ",".join(IMPLS))
    args.impls = tuple(i.strip() for i in impls.split(",") if i.strip())
    if "warpsmith" not in args.impls or any(i not in IMPLS for i in args.impls):
        p.error(f"--impls: expected warpsmith and some of {', '.join(IMPLS[1:])}, got {impls}")
    try:
        args.tiers = tuple(int(t) for t in args.tiers.split(","))
    except ValueError:
        p.error(f"--tiers: expected integers such as 1,2, got {args.tiers}")
    dtypes = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
              "float32": torch.float32, "fp32": torch.float32}
    if args.dtype not in dtypes:
        p.error(f"--dtype: expected one of {', '.join(dtypes)}, got {args.dtype}")
    args.torch_dtype = dtypes[args.dtype]
    args.dtype = str(args.torch_dtype).removeprefix("torch.")
    if args.total_time <= 0 or args.elements < 1 or args.tune_budget < 0 or args.tune_time <= 0:
        p.error("--total-time, --elements and --tune-time must be positive, --tune-budget >= 0")
    if args.static_sample < 0:
        p.error("--static-sample must be >= 0")
    from warpsmith.targets import get_target
    try:
        args.static_target = get_target(args.static_target).name
    except ValueError as exc:
        p.error(f"--static-target: {exc}")
    return args


def estimate_seconds(case: Case, done: list[tuple[Case, dict]]) -> float:
    """Seconds ``case`` will likely take: the mean of finished cases of its op, else of all (compiles dominate)."""
    same = [r["seconds"] for c, r in done if c.op == case.op and r.get("seconds")]
    every = [r["seconds"] for _, r in done if r.get("seconds")]
    return statistics.fmean(same) if same else (statistics.fmean(every) if every else 0.0)


def tune_row(row: dict, args: argparse.Namespace, ctx: Ctx, db_path: Path) -> dict[str, Any]:
    """Tune every problem warpsmith dispatched for the case, then measure warpsmith again."""
    from warpsmith.db import TuningDB
    from warpsmith.errors import VerificationError
    from warpsmith.dispatch import clear_cache
    from warpsmith.tune import tune

    t0 = time.perf_counter()
    out: dict[str, Any] = {"budget": args.tune_budget, "problems": [], "result": None}
    db = TuningDB(db_path)
    seen = set()
    for p, _ in row["captured"]["fwd"] + row["captured"]["bwd"]:
        if p.describe() in seen:
            continue
        seen.add(p.describe())
        e: dict[str, Any] = {"problem": p.describe()}
        try:
            res = tune(p, budget=args.tune_budget, time_budget_s=args.tune_time, finalists=1, db=db, seed=args.seed)
            j = res.to_json()
            e.update({k: j[k] for k in ("variant", "config", "time_ms", "baseline_ms", "verified", "evaluations")})
        except VerificationError as exc:
            e.update(verified=False, error=str(exc)[:500])
        except Exception as exc:
            e.update(verified=False, error=f"{type(exc).__name__}: {exc}"[:500])
        out["problems"].append(e)
    clear_cache()
    case = Case(row["op"], row["name"], tuple(row["dims"].items()), row["tier"])
    opdef = OPDEFS[case.op]
    try:
        bench = make_bench(opdef, case, ctx.dtype, ctx.device, ctx.seed)
        r = run_impl(bench, lambda i: opdef.warpsmith(ctx.wops, i), ctx.timer, "warpsmith", False)
        sources = {s for v in r["problems"].values() for _, s in v}
        r["dispatched"] = "db" if sources == {"db"} else ("mixed" if "db" in sources else "default")
        r["problems"] = {k: _describe(v) for k, v in r["problems"].items()}
        out["result"] = r
        del bench
    except Exception as exc:
        out["result"] = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    out["seconds"] = round(time.perf_counter() - t0, 2)
    if ctx.device == "cuda":
        gc.collect()
        torch.cuda.empty_cache()
    return out


def main(argv: list[str] | None = None, timer: Any = None) -> int:
    """``timer``: a stand-in for :class:`GpuTimer` (tests); without one, timing needs a GPU."""
    args = parse_args(argv)
    before = os.environ.get("WARPSMITH_DB")
    try:
        return _main(args, timer)
    finally:  # the run's own DB was set for dispatch; a caller's environment is left as it was
        if before is None:
            os.environ.pop("WARPSMITH_DB", None)
        else:
            os.environ["WARPSMITH_DB"] = before


def _main(args: argparse.Namespace, timer: Any) -> int:
    t0 = time.perf_counter()
    started = _dt.datetime.now(_dt.timezone.utc)
    stamp = started.astimezone()
    cuda = torch.cuda.is_available()
    if not args.dry_run and timer is None and not cuda:
        say(f"{BENCHMARK}: no GPU: nothing can be timed here; use --dry-run for the CPU correctness check")
        return 2
    from warpsmith.targets import current_device, versions
    from warpsmith.targets.detect import driver_version

    dev = current_device()
    measured = not args.dry_run and (timer is not None or dev.measured)
    slug = dev.target.name if dev.measured and not dev.target.approximate else dev.name.split()[0].lower()
    out = Path(args.out) if args.out else REPO / "benchmarks" / "results" / (slug if measured else f"{slug}-dry-run")
    out.mkdir(parents=True, exist_ok=True)
    date = stamp.strftime("%Y-%m-%d")
    json_path = out / f"{BENCHMARK}_{date}.json"
    db_path = out / f"{BENCHMARK}_{stamp.strftime('%Y-%m-%d_%H%M%S')}.db"
    os.environ["WARPSMITH_DB"] = str(db_path)  # a fresh DB: the first pass runs the default configs

    wops, op_missing = import_warpsmith_ops()
    liger, liger_info = (None, {"available": False, "version": None, "reason": "not requested (--impls)"})
    if "liger" in args.impls:
        liger, liger_info = import_liger()
    if timer is None and measured:
        timer = GpuTimer()
    ctx = Ctx(args.torch_dtype, args.dtype, "cuda" if dev.measured else "cpu",  # the interpreter runs on CPU tensors
              args.seed, args.impls, timer if measured else None, wops, liger, liger_info)
    cases = [c for c in suite(args.ops, args.tiny, args.elements) if args.tiny or c.tier in args.tiers]
    plan = sorted(cases, key=lambda c: c.tier)  # stable: suite order within a tier
    dev_info: dict[str, Any] = {"kind": dev.kind, "name": dev.name, "measured": measured, "target": dev.target.name}
    if cuda and dev.measured:
        props = torch.cuda.get_device_properties(0)
        dev_info.update(memory_gib=round(props.total_memory / 2**30, 1), multiprocessors=props.multi_processor_count)
    vers = {**versions(), "driver": driver_version(), "liger_kernel": liger_info["version"]}
    settings = {"tiny": args.tiny, "dtype": args.dtype, "ops": list(args.ops), "impls": list(args.impls), "tiers": list(args.tiers),
                "elements": args.elements, "total_time_s": args.total_time, "tune_budget": args.tune_budget,
                "tune_time_s": args.tune_time, "seed": args.seed, "db": str(db_path),
                "order": "tier 1 (one realistic shape per op) first, then tiers 2 and 3",
                "timing": "CUDA events, L2 flushed before each call, warm-up, median; backward alone after an "
                          "untimed forward; inputs require grad (training forward)"}
    say(f"{BENCHMARK}: {len(plan)} cases on {dev.name}{' (DRY RUN: correctness only)' if args.dry_run else ''}")
    say(f"versions: {json.dumps(vers)}")
    say(f"settings: {json.dumps(settings)}")
    say(f"liger: {json.dumps(liger_info)}")
    for op in args.ops:
        if op_missing[op]:
            say(f"skipping {op}: {op_missing[op]}")

    copy: dict[str, Any] = {}
    done: dict[Case, dict] = {}
    skipped: dict[Case, str] = {}
    stop: str | None = None
    copy_gbps = None
    static: dict[str, Any] | None = None  # the dry run's static compile (None: not a dry run)

    def rows_in_order(final_rows: bool = False) -> list[dict]:
        rows = []
        for c in cases:
            if c in done:
                rows.append(done[c])
            elif c in skipped or final_rows:
                rows.append({**_row(c, args.dtype), "status": "skipped", "error": skipped.get(c, "not run")})
        return rows

    def document(final: bool) -> dict[str, Any]:
        rows = [r for r in rows_in_order() if r["status"] != "skipped"]
        for r in rows:
            derive(r, copy_gbps)
        return {"benchmark": BENCHMARK, "format": FORMAT, "date": date, "started": started.isoformat(timespec="seconds"),
                "wall_s": round(time.perf_counter() - t0, 1), "complete": final and not skipped,
                "interrupted": stop == "interrupted", "dry_run": args.dry_run,
                "timing_kind": "measured" if measured else "none", "device": dev_info, "versions": vers,
                "settings": settings, "copy_bandwidth": copy,
                "ops": {op: {"available": op_missing[op] is None, "reason": op_missing[op]} for op in args.ops},
                "liger": liger_info, "cases": [_clean(r) for r in rows],
                "skipped": [{"op": c.op, "name": c.name, "dims": c.d, "reason": why} for c, why in skipped.items()],
                "summary": summarize(rows, args.tiny, measured), "static_compile": static}

    try:
        if measured:
            copy = {"start": timer.copy_gbps()}
            copy_gbps = copy["start"]["gbps"]
            say(f"copy bandwidth: {copy_gbps:.0f} GB/s (1 GiB device-to-device, read + write)")
    except KeyboardInterrupt:
        stop = "interrupted"
    for i, case in enumerate(plan, 1):
        tag = f"[{i:>2}/{len(plan)} {time.perf_counter() - t0:6.1f}s]"
        try:
            if op_missing[case.op]:
                skipped[case] = op_missing[case.op]
                continue
            elapsed = time.perf_counter() - t0
            est = estimate_seconds(case, list(done.items()))
            if stop is None and elapsed >= args.total_time and not args.dry_run:
                stop = f"--total-time {args.total_time:g} s reached"
            if stop is not None or (not args.dry_run and elapsed + est > args.total_time):
                skipped[case] = stop or f"would likely end after --total-time {args.total_time:g} s (estimate {est:.0f} s)"
                say(f"{tag} {case.describe()}: skipped ({skipped[case]})")
                continue
            say(f"{tag} {case.describe()} {args.dtype}: running {', '.join(args.impls)}")
            row = done[case] = run_case(case, ctx)
            derive(row, copy_gbps)
            say(f"{tag}   -> {progress_line(row)}")
            broken = cuda_broken()
            if broken:
                stop = f"CUDA context unusable after {case.describe()}: {broken}"
            write_json(json_path, document(False))
        except KeyboardInterrupt:  # Ctrl-C or `timeout -s INT`: keep what ran, report the rest as skipped
            stop = "interrupted"
            if case not in done:
                skipped[case] = stop
            say(f"{tag} interrupted: the remaining cases are skipped")

    # The tuned pass, with the time left: cases in plan order, each at most once.
    tune_est = 45.0
    if measured and args.tune_budget > 0 and stop is None:  # (tune() measures on a GPU, predicts elsewhere)
        for case in plan:
            row = done.get(case)
            if row is None or row["status"] != "ok" or not (row["captured"]["fwd"] + row["captured"]["bwd"]):
                continue
            elapsed = time.perf_counter() - t0
            if elapsed + tune_est > args.total_time:
                say(f"tuned pass: stopped at {elapsed:.0f} s (next tuning would likely end after --total-time)")
                break
            try:
                say(f"[tune {elapsed:6.1f}s] {case.describe()}: tuning {len(row['captured']['fwd']) + len(row['captured']['bwd'])} "
                    f"dispatched problems (budget {args.tune_budget})")
                row["tuned"] = tune_row(row, args, ctx, db_path)
                tune_est = max(tune_est, row["tuned"]["seconds"])
                derive(row, copy_gbps)
                t = row["tuned"]["result"] or {}
                say(f"[tune] -> {t.get('status')} dispatched {t.get('dispatched')} fwd/bwd "
                    f"{_ms(t.get('fwd_ms'))}/{_ms(t.get('bwd_ms'))} ms, {row['tuned']['seconds']:.1f} s")
                write_json(json_path, document(False))
            except KeyboardInterrupt:
                stop = "interrupted"
                say("tuned pass interrupted")
                break

    if args.dry_run:  # before SIGINT is ignored below (the compile-only process would inherit that)
        static = dry_run_static(args, ctx, op_missing, out)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # what remains is short: write the results whatever comes
    try:
        if measured and copy:
            try:
                copy["end"] = timer.copy_gbps()
                copy_gbps = max(copy["start"]["gbps"], copy["end"]["gbps"])  # the higher: fractions stay conservative
            except Exception as exc:
                copy["end"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            copy["used_gbps"] = copy_gbps
        for c in plan:  # cases never reached (an interrupt between cases)
            if c not in done and c not in skipped:
                skipped[c] = stop or "not run"
        doc = document(True)
        write_json(json_path, doc)
        say(f"wrote {json_path} ({len(doc['cases'])} cases run, {len(skipped)} skipped)")
        say(f"total {time.perf_counter() - t0:.1f} s")
        sys.stderr.flush()
        title = (f"{BENCHMARK} {date}  {dev.name}  {args.dtype}"
                 + ("  DRY RUN (tiny cases, correctness only)" if args.dry_run else "")
                 + (f"  copy {copy_gbps:.0f} GB/s" if copy_gbps else ""))
        why = ("not evaluated: dry run" if args.dry_run else "not evaluated: nothing measured" if not measured
               else "not evaluated: tiny cases" if args.tiny else "")
        say(render_table(rows_in_order(True), doc["summary"], title, why))  # the last thing printed
    finally:
        signal.signal(signal.SIGINT, previous)
    return 1 if static is not None and not static["ok"] else 0


def dry_run_static(args: argparse.Namespace, ctx: Ctx, op_missing: dict[str, str | None], out: Path) -> dict[str, Any]:
    """The dry run's static step: the problems of the real (non-dry) plan (``--ops``, ``--tiers``,
    ``--elements``, ``--dtype``; ops warpsmith lacks are skipped there, so here), traced
    (:func:`static_problems`), compiled for ``--static-target``; the JSON's ``static_compile`` section."""
    if args.no_static:
        return {"ok": True, "skipped": "--no-static"}
    try:
        cases = [c for c in suite(args.ops, False, args.elements) if c.tier in args.tiers and not op_missing[c.op]]
        t = time.perf_counter()
        problems, errors = static_problems(cases, ctx.wops, ctx.dtype, ctx.device, ctx.seed)
        trace_s = round(time.perf_counter() - t, 1)
        say(f"static compile: the real plan's {len(cases)} cases launch {len(problems)} distinct problems "
            f"(traced in {trace_s:.1f} s{f'; {len(errors)} cases FAILED' if errors else ''})")
        for e in errors:
            say(f"  FAILED {e['case']}: {e['error'][:300]}")
        section = static_compile(problems, args.static_target, args.static_sample, out / f"gpucheck_{BENCHMARK}.json")
        section.update(cases=len(cases), trace_seconds=trace_s, trace_errors=errors)
        section["ok"] = section["ok"] and not errors
        return section
    except KeyboardInterrupt:
        say("static compile interrupted")
        return {"ok": False, "error": "interrupted", "target": args.static_target, "sample": args.static_sample}


if __name__ == "__main__":
    sys.exit(main())
