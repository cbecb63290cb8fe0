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


def _timed(fn: Callable[[object], object], args: object, flush_l2: bool) -> tuple[object, object]:
    """One call bracketed by its own events (the L2 flush, if any, before the start event)."""
    if flush_l2:
        _flush()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(args)
    end.record()
    return start, end


def time_gpu(fn: Callable[[object], object], arg_sets: Sequence[object], *, warmup: int = 3,
             runs: int = 25, max_ms: float = 400.0, flush_l2: bool = True) -> Timing:
    """Median time of ``fn(args)`` over up to ``runs`` calls, cycling through ``arg_sets`` (cold inputs).

    Each call is bracketed by its own CUDA events; the L2 flush runs before the start event,
    so it is not counted. The first call (compilation, caches) is untimed; the second, a probe,
    estimates one call. The rest of the warm-up (at most ``warmup`` calls in all) and the timed runs
    are cut to fit ``max_ms`` (warm-up at most a quarter of it): a call slower than ``max_ms / 2`` is
    timed by its probe alone, so it costs two calls whatever its length.
    """
    fn(arg_sets[0])
    torch.cuda.synchronize()
    probe = _timed(fn, arg_sets[0], flush_l2)
    torch.cuda.synchronize()
    est = max(probe[0].elapsed_time(probe[1]), 1e-3)
    n = min(runs, int(max_ms / est))
    if n < 2:
        return Timing(est, est, est, est, 1)
    for i in range(1, min(warmup - 1, int(max_ms / 4 / est)) + 1):
        fn(arg_sets[i % len(arg_sets)])
    events = [_timed(fn, arg_sets[i % len(arg_sets)], flush_l2) for i in range(n)]
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in events)
    q = statistics.quantiles(times, n=5) if len(times) >= 5 else [times[0]] * 4
    return Timing(statistics.median(times), times[0], q[0], q[3], n)
