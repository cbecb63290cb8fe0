"""Timing a candidate against its reference on a GPU (CUDA events; nothing is timed on a CPU).

The candidate is timed in its own process (:func:`time_in_child`) with the event class, its
methods and ``torch.cuda.synchronize`` bound when this module is imported, before the candidate
is: a candidate that patches ``torch.cuda.Event.elapsed_time`` changes nothing measured here (and
is rejected for the patch). The reference is timed in the parent (:func:`time_reference`). Both
use warm-up, an L2 flush before each timed call and the median of many calls, cycling through
three input sets drawn from the first workload. After timing, the child returns the last timed
call's output and that of a synchronized re-run, which the parent judges.
"""
from __future__ import annotations

import statistics
from typing import Any

import torch

INPUT_SETS = 3
WARMUP, RUNS = 5, 50
_L2_BYTES = 256 << 20

_Event = torch.cuda.Event
_record, _elapsed, _synchronize = torch.cuda.Event.record, torch.cuda.Event.elapsed_time, torch.cuda.synchronize
_empty, _median = torch.empty, statistics.median


def _time(fn, args: list[Any], device: torch.device) -> tuple[float, int, Any]:
    flush = _empty(_L2_BYTES, dtype=torch.uint8, device=device)
    out = None
    with torch.no_grad():
        for i in range(WARMUP):
            out = fn(args[i % len(args)])
        _synchronize()
        times = []
        for i in range(RUNS):
            flush.zero_()
            start, end = _Event(enable_timing=True), _Event(enable_timing=True)
            _record(start)
            out = fn(args[i % len(args)])
            _record(end)
            _synchronize()
            times.append(_elapsed(start, end))
    return float(_median(times)), RUNS, out


def time_in_child(cand: Any, sets: list[list[Any]], destinations: Any, device: torch.device
                  ) -> tuple[dict[str, Any], Any, Any]:
    """The candidate's median time, the output of the last timed call, and that of a synchronized re-run on
    the same inputs (``judged_set`` in the returned document says which input set)."""
    outs = None
    if cand.destination_passing and destinations:
        outs = [[torch.full(tuple(s), float("nan"), dtype=getattr(torch, d), device=device) for s, d in destinations]
                for _ in sets]
    pairs = list(zip(sets, outs or [None] * len(sets)))
    ms, runs, out = _time(lambda a: cand.call(a[0], a[1]), pairs, device)
    k = (RUNS - 1) % len(pairs)
    timed = tuple(t.clone() for t in outs[k]) if outs else out
    if outs:
        for t in outs[k]:
            t.fill_(float("nan"))
    _synchronize()
    with torch.no_grad():
        result = cand.call(*pairs[k])
    _synchronize()
    rerun = tuple(outs[k]) if outs else result
    return ({"kind": "measured", "device": torch.cuda.get_device_name(device), "candidate_ms": ms, "runs": runs,
             "judged_set": k}, timed, rerun)


def time_reference(problem: Any, sets: list[list[Any]]) -> dict[str, Any]:
    ms, runs, _ = _time(lambda a: problem.run_reference(a), sets, sets[0][0].device
                        if isinstance(sets[0][0], torch.Tensor) else torch.device("cuda"))
    return {"reference_ms": ms, "workload": problem.workloads[0].label}
