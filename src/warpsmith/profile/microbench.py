"""Calibration microbenchmarks: the rates a target's table assumes, measured on the device.

Four kinds (kernels in ``microbench_kernels.py``): copy bandwidth by access width (32/64/128-bit per
thread), shared-memory bandwidth and the cost of bank conflicts (stride 1..32 words), tensor-core
throughput per instruction shape and type (fp16, bf16, fp8 e4m3, int8; two tile shapes each), and
launch latency (back to back, and replayed from a CUDA graph). On a GPU, :func:`run` times them with
CUDA events (``measure.timing.time_gpu``: median of repeats after warm-up) within a time limit and
returns the document ``benchmarks/calibrate.py`` writes; :func:`peaks` turns it into the named peaks
``targets/calibration.py`` overrides a target's table with.

Without a GPU: :func:`compile_check` (in a process started with ``WARPSMITH_COMPILE_ONLY=sm_90``)
compiles every kernel for the target and checks its machine code does what the benchmark says
(load widths, shared loads in a loop, tensor-core instructions of the right type in a loop);
:func:`interpret_check` runs tiny versions under Triton's interpreter against torch (inline PTX
cannot run there: the shared-memory kernel is only compiled).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

COPY_BITS = (32, 64, 128)
COPY_WARPS = 4
SHARED_STRIDES = (1, 2, 4, 8, 16, 32)
SHARED_WARPS = 8
# (math kind, torch dtype name, is integer) x (BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
MMA_TYPES = (("fp16", "float16", False), ("bf16", "bfloat16", False), ("fp8", "float8_e4m3fn", False),
             ("int8", "int8", True))
MMA_TILES = ((128, 128, 64, 4), (128, 256, 64, 8))
# the SASS tensor-core instruction's type suffix Triton emits for sm_90, per kind ("" : fp16, no suffix)
_MMA_SUFFIX = {"fp16": ("F32", "F16"), "bf16": ("BF16",), "fp8": ("E4M3",), "int8": ("S8",)}


@dataclass(frozen=True)
class Case:
    """One microbenchmark: its kind, name, and the launch it makes."""

    kind: str  # copy | shared | mma | launch
    name: str
    params: dict[str, Any]


def cases(only: Sequence[str] | None = None) -> list[Case]:
    """Every case, or those of the kinds in ``only`` (``copy``, ``shared``, ``mma``, ``launch``)."""
    out = [Case("copy", f"copy {b}-bit", {"bits": b}) for b in COPY_BITS]
    out += [Case("shared", f"shared stride {s}", {"stride": s}) for s in SHARED_STRIDES]
    out += [Case("mma", f"mma {kind} {m}x{n}x{k}", {"math": kind, "dtype": dt, "int": i, "tile": (m, n, k), "warps": w})
            for kind, dt, i in MMA_TYPES for m, n, k, w in MMA_TILES]
    out.append(Case("launch", "launch", {}))
    return [c for c in out if only is None or c.kind in only]


def _launch(case: Case, device: str, size: str) -> tuple[Callable[[], Any], dict[str, Any]]:
    """(a function making the case's launch, its work: bytes, FLOPs, programs, and what checks it).
    ``size``: ``gpu`` (the timed size), ``tiny`` (the interpreter) or ``compile`` (compile-only)."""
    from . import microbench_kernels as k
    from ..ops.shared.launch import emulated

    p = case.params
    sms = torch.cuda.get_device_properties(0).multi_processor_count if size == "gpu" else 1
    if case.kind == "copy":
        block = 32 * COPY_WARPS * p["bits"] // 32
        n = {"gpu": 1 << 28, "tiny": 3 * block + 5, "compile": 1 << 20}[size]
        x = torch.arange(n, dtype=torch.float32, device=device) if size == "tiny" else torch.empty(n, device=device)
        y = torch.empty_like(x)
        grid = (math.ceil(n / block),)
        return (lambda: k.copy_kernel[grid](x, y, n, BLOCK=block, num_warps=COPY_WARPS),
                {"bytes": 2 * 4 * n, "check": lambda: torch.equal(x, y)})
    if case.kind == "shared":
        block = 32 * SHARED_WARPS
        programs, iters = (sms * 8, 4096) if size == "gpu" else (4, 16)
        out = torch.empty(programs * block, dtype=torch.int32, device=device)
        return (lambda: k.shared_kernel[(programs,)](out, iters, p["stride"], BLOCK=block, num_warps=SHARED_WARPS),
                {"bytes": programs * block * iters * 16})
    if case.kind == "mma":
        m, n, kk = p["tile"] if size != "tiny" else (16, 16, 32)
        dtype = getattr(torch, p["dtype"])
        programs, iters = (sms * 4, 2048) if size == "gpu" else (2, 3)
        g = torch.Generator().manual_seed(0)
        # small integers: every product and sum is exact in every type, so the check is equality
        a = torch.randint(-2, 3, (m, kk), generator=g).to(dtype).to(device)
        b = torch.randint(-2, 3, (kk, n), generator=g).to(dtype).to(device)
        c = torch.empty(programs, m, n, dtype=torch.int32 if p["int"] else torch.float32, device=device)
        emulate = emulated(dtype) or (size == "tiny" and p["math"] == "fp8")

        def check() -> bool:
            want = iters * (a.double().cpu() @ b.double().cpu())
            return all(torch.equal(c[i].double().cpu(), want) for i in range(programs))

        return (lambda: k.mma_kernel[(programs,)](a, b, c, iters, BLOCK_M=m, BLOCK_N=n, BLOCK_K=kk, IS_INT=p["int"],
                                                   EMULATE=emulate, num_warps=p["warps"]),
                {"flops": programs * iters * 2 * m * n * kk, "check": check})
    x = torch.empty(1, device=device)
    return (lambda: k.empty_kernel[(1,)](x, num_warps=1)), {}


def compile_check(arch: str = "sm_90", only: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Compile every case for ``arch`` (this process must run with ``WARPSMITH_COMPILE_ONLY``) and check
    its machine code: one row per case, ``ok`` False with ``why`` where it is not what the case measures."""
    from ..core import _compile_only
    from ..targets.compiler.sass import kernel_sass

    rows = []
    for case in cases(only):
        fn, _ = _launch(case, "cpu", "compile")
        with _compile_only.recording() as launches:
            fn()
        s = kernel_sass(launches[-1].kernel)
        why = _sass_problem(case, s)
        rows.append({"case": case.name, "arch": arch, "ok": why is None, "why": why,
                     "loads": s.global_loads if s else None, "mma": s.loop_mma if s else None})
    return rows


def _sass_problem(case: Case, s: Any) -> str | None:
    """Why the machine code does not measure what ``case`` says (None: it does)."""
    if s is None:
        return "no machine code"
    p = case.params
    if case.kind == "copy" and s.global_loads != {str(p["bits"]): 1}:
        return f"expected one {p['bits']}-bit global load per thread, found {s.global_loads}"
    if case.kind == "shared" and not (s.loops and s.loop_shared_bytes):
        return "expected shared-memory loads inside a loop"
    if case.kind == "mma":
        ok = [mn for mn in s.loop_mma if "GMMA" in mn and mn.rsplit(".", 1)[-1] in _MMA_SUFFIX[p["math"]]]
        if not ok:
            return f"expected {p['math']} tensor-core instructions (GMMA) in a loop, found {s.loop_mma or s.mma}"
    return None


def interpret_check(only: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run tiny versions under Triton's interpreter: one row per case, ``ok`` whether it computed what
    it should (the shared-memory cases are inline PTX, which the interpreter cannot run: ``skipped``)."""
    rows = []
    for case in cases(only):
        if case.kind == "shared":
            rows.append({"case": case.name, "ok": None, "why": "skipped: inline PTX does not run under the interpreter"})
            continue
        fn, work = _launch(case, "cpu", "tiny")
        fn()
        ok = work["check"]() if "check" in work else True
        rows.append({"case": case.name, "ok": ok, "why": None if ok else "wrong result"})
    return rows


def _time_launches(fn: Callable[[], Any], n: int, graph: bool) -> float:
    """Microseconds per launch of ``n`` back-to-back launches (replayed from a CUDA graph if ``graph``)."""
    if graph:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            fn()  # warm-up on the capture stream
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=s):
                for _ in range(n):
                    fn()
        run = g.replay
    else:
        def run() -> None:
            for _ in range(n):
                fn()
    times = []
    for _ in range(5):
        run()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / n)
    return sorted(times)[len(times) // 2]


def run(time_limit_s: float = 60.0, only: Sequence[str] | None = None) -> dict[str, Any]:
    """Time every case on this machine's GPU, starting no case after ``time_limit_s`` (those are listed
    as skipped). Every figure is measured: CUDA events, median of repeats after a warm-up."""
    from ..measure.timing import time_gpu

    t0 = time.monotonic()
    results, skipped = [], []
    for case in cases(only):
        if time.monotonic() - t0 > time_limit_s:
            skipped.append(case.name)
            continue
        row: dict[str, Any] = {"kind": case.kind, "case": case.name,
                               **{k: v for k, v in case.params.items() if k not in ("int",)}}
        try:
            fn, work = _launch(case, "cuda", "gpu")
            if case.kind == "launch":
                row["us"] = _time_launches(fn, 1000, graph=False)
                row["graph_us"] = _time_launches(fn, 1000, graph=True)
            else:
                t = time_gpu(lambda _: fn(), [None], warmup=3, runs=10, max_ms=300.0, flush_l2=False)
                row["ms"] = t.median_ms
                if "bytes" in work:
                    row["tbps"] = work["bytes"] / (t.median_ms * 1e-3) / 1e12
                if "flops" in work:
                    row["tflops"] = work["flops"] / (t.median_ms * 1e-3) / 1e12
        except Exception as exc:  # one case failing (a compile error, say) costs that case, not the run
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        row["elapsed_s"] = round(time.monotonic() - t0, 2)
        results.append(row)
    return {"results": results, "skipped": skipped, "peaks": peaks(results)}


def peaks(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The named peaks a target's table takes from measured ``results``: ``hbm_tbps`` (the fastest copy),
    ``smem_tbps`` (conflict-free shared loads), ``peak_tflops`` per math kind (the fastest tile),
    ``launch_us`` (back-to-back launches); what was not measured (or failed) is left out."""
    results = [r for r in results if "error" not in r]
    out: dict[str, Any] = {}
    copies = [r["tbps"] for r in results if r["kind"] == "copy"]
    if copies:
        out["hbm_tbps"] = max(copies)
    shared = {r["stride"]: r for r in results if r["kind"] == "shared"}
    if 1 in shared:
        out["smem_tbps"] = shared[1]["tbps"]
        out["bank_conflict_slowdown"] = {str(s): r["ms"] / shared[1]["ms"] for s, r in sorted(shared.items())}
    tflops: dict[str, float] = {}
    for r in results:
        if r["kind"] == "mma":
            tflops[r["math"]] = max(tflops.get(r["math"], 0.0), r["tflops"])
    if tflops:
        out["peak_tflops"] = tflops
    launch = [r for r in results if r["kind"] == "launch"]
    if launch:
        out["launch_us"] = launch[0]["us"]
    return out
