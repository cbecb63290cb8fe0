"""Perfetto traces: Chrome trace-event JSON (``{"traceEvents": [...]}``), which ui.perfetto.dev and
chrome://tracing open.

:class:`TraceRecorder` collects complete events (``"ph": "X"``) on named tracks (one thread id per
track, named by a metadata event). It is passed to whatever it records (``tune(..., trace=...)``)
and holds no global state; it is thread-safe, so a pool's workers record on their own tracks.
"""
from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from pathlib import Path
from typing import Any, Iterator


class TraceRecorder:
    """Spans on tracks, in microseconds since the recorder was made."""

    def __init__(self, process: str = "warpsmith", **metadata: Any) -> None:
        self.process = process
        self.metadata = dict(metadata)
        self.events: list[dict[str, Any]] = []
        self._tracks: dict[str, int] = {}
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def now_us(self) -> float:
        return (time.perf_counter() - self._t0) * 1e6

    def _tid(self, track: str) -> int:
        with self._lock:
            if track not in self._tracks:
                self._tracks[track] = len(self._tracks) + 1
            return self._tracks[track]

    def add(self, name: str, start_us: float, dur_us: float, track: str | None = None, **args: Any) -> None:
        """One complete span (``track`` None: the calling thread's name, ``main`` for the main thread)."""
        thread = threading.current_thread()
        tid = self._tid(track or ("main" if thread is threading.main_thread() else thread.name))
        event = {"name": name, "ph": "X", "ts": round(start_us, 3), "dur": round(max(0.0, dur_us), 3), "pid": 1,
                 "tid": tid, "args": {k: _jsonable(v) for k, v in args.items()}}
        with self._lock:
            self.events.append(event)

    @contextlib.contextmanager
    def span(self, name: str, track: str | None = None, **args: Any) -> Iterator[dict[str, Any]]:
        """Record the block as a span; the yielded dict's entries are added to its args at the end."""
        extra: dict[str, Any] = {}
        start = self.now_us()
        try:
            yield extra
        finally:
            self.add(name, start, self.now_us() - start, track, **args, **extra)

    def to_json(self) -> dict[str, Any]:
        meta = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": self.process}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": track}}
                 for track, tid in self._tracks.items()]
        meta += [{"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}}
                 for tid in self._tracks.values()]
        return {"traceEvents": meta + sorted(self.events, key=lambda e: (e["tid"], e["ts"])),
                "displayTimeUnit": "ms", "otherData": {k: _jsonable(v) for k, v in self.metadata.items()}}

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        return path


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return str(v)


def kernel_sequence(rows: Any, recorder: TraceRecorder | None = None, track: str = "GPU (predicted)",
                    gap_us: float = 0.0) -> TraceRecorder:
    """Kernels laid end to end on one track, each as long as its predicted time (``rows``: objects with
    ``name`` and ``predicted_ms``, and optionally ``bound``, ``flops``, ``bytes``, ``grid``); a kernel
    with no (or no finite) time is skipped. Every span is predicted, and says so in its args."""
    rec = recorder or TraceRecorder("warpsmith profile", timing="predicted")
    t = 0.0
    for r in rows:
        if not r.predicted_ms or not math.isfinite(r.predicted_ms):
            continue
        dur = r.predicted_ms * 1e3
        rec.add(r.name, t, dur, track, timing="predicted", predicted_ms=r.predicted_ms,
                bound=getattr(r, "bound", None), flops=getattr(r, "flops", None), bytes=getattr(r, "bytes", None),
                grid=getattr(r, "grid", None))
        t += dur + gap_us
    return rec
