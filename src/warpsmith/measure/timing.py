"""Timing on a GPU with device events: warm-up, L2 flush, rotating inputs, median of many runs."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

L2_FLUSH_BYTES = 512 * 1024 * 1024  # larger than any current GPU's L2 (and MI300X's Infinity Cache)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    p20_ms: float
    p80_ms: float
    runs: int


_flush_buf: torch.Tensor | None = None


def _flush() -> None:
    global _flush_buf
    if _flush_buf is None:
        _flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    _flush_buf.zero_()


def time_gpu(fn: Callable[[object], object], arg_sets: Sequence[object], *, warmup: int = 3,
             runs: int = 25, max_ms: float = 400.0, flush_l2: bool = True) -> Timing:
    """Median time of ``fn(args)`` over ``runs`` calls, cycling through ``arg_sets`` (cold inputs).

    Each call is bracketed by its own CUDA events; the L2 flush runs before the start event,
    so it is not counted. ``runs`` is reduced when one call is slow, keeping the total near ``max_ms``.
    """
    for i in range(warmup):
        fn(arg_sets[i % len(arg_sets)])
    torch.cuda.synchronize()
    probe_s, probe_e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe_s.record()
    fn(arg_sets[0])
    probe_e.record()
    torch.cuda.synchronize()
    est = max(probe_s.elapsed_time(probe_e), 1e-3)
    n = max(5, min(runs, int(max_ms / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        if flush_l2:
            _flush()
        starts[i].record()
        fn(arg_sets[i % len(arg_sets)])
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    q = statistics.quantiles(times, n=5) if len(times) >= 5 else [times[0]] * 4
    return Timing(statistics.median(times), times[0], q[0], q[3], n)
