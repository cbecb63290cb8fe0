"""Where a solve is: its stage, the candidate program being verified (i of n), and the check's calls.

:func:`~.solve.solve` reports through a :class:`Progress`; ``warpsmith solve`` prints each event as a
line on stderr (``--quiet``: nothing), and on ``--timeout`` (:func:`time_limit`) writes where it
stopped (:meth:`Progress.where`) into the partial report. On a terminal, the check's calls update one
line in place; elsewhere (a log, a pipe) every event is its own line.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

STAGES = ("capture", "search", "emit", "prove", "check")


class SolveTimeout(BaseException):
    """``--timeout`` expired (a BaseException: no ``except Exception`` of the pipeline takes it for a
    failure of the problem or the candidate). ``where`` is :meth:`Progress.where` at expiry;
    ``attempts`` the candidates rejected before (set by :func:`~.solve.solve`)."""

    def __init__(self, seconds: float, where: dict[str, Any]) -> None:
        super().__init__(f"time limit of {seconds:g} s reached during {where.get('stage')}")
        self.seconds, self.where, self.attempts = seconds, where, []


class Progress:
    """Events of one solve: :meth:`stage`, :meth:`candidate`, :meth:`check_call`, and free lines
    (calling the object, as the check's ``progress`` callback: one line per workload).

    Args:
        echo: where each line goes (None: nowhere; the state is still kept for :meth:`where`).
        stream: a stream to write to instead of ``echo``; on a terminal, check calls rewrite one line.
    """

    def __init__(self, echo: Callable[[str], None] | None = None, stream: TextIO | None = None) -> None:
        self.echo, self.stream = echo, stream
        self.live = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.stage_name, self.detail = "start", ""
        self.index, self.total = 0, 0
        self.calls = 0  # the check's requests to the candidate's process, this candidate
        self.calls_all = 0
        self._open = False  # a live line was written without its newline
        self.deadline: float | None = None  # time.monotonic() at which time_limit stops the solve (None: no limit)

    # ---- events -----------------------------------------------------------------------------------
    def stage(self, name: str, detail: str = "") -> None:
        self.stage_name, self.detail = name, detail
        if name == "check":
            self.calls = 0
        self._line(self.text())

    def candidate(self, index: int, total: int) -> None:
        """The ``index``-th (from 1) of at most ``total`` programs is being compiled and verified."""
        self.index, self.total = index, total

    def check_call(self, what: str) -> None:
        self.calls += 1
        self.calls_all += 1
        self.detail = what
        self._line(self.text(), live=True)

    def __call__(self, message: str) -> None:
        self._line(f"{self._head()}: {message}")

    # ---- state ------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def where(self) -> dict[str, Any]:
        """The state, for a report: stage, candidate (i, of n), check calls, seconds since the start."""
        return {"stage": self.stage_name, "detail": self.detail, "candidate": self.index or None,
                "candidates": self.total or None, "check_calls": self.calls, "check_calls_all": self.calls_all,
                "elapsed_s": round(self.elapsed(), 1)}

    def _head(self) -> str:
        cand = f" candidate {self.index}/{self.total}" if self.total else ""
        return f"[{self.elapsed():6.1f}s] {self.stage_name}{cand}"

    def text(self) -> str:
        calls = f", check call {self.calls}" if self.stage_name == "check" and self.calls else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self._head()}{calls}{detail}"

    def _line(self, text: str, live: bool = False) -> None:
        if self.stream is not None:
            if self.live and live:
                self.stream.write("\r\x1b[2K" + text)
                self._open = True
            else:
                self.stream.write(("\n" if self._open else "") + text + "\n")
                self._open = False
            self.stream.flush()
        elif self.echo is not None:
            self.echo(text)

    def stop_after(self, share: float) -> Callable[[], bool] | None:
        """A test that turns true once ``share`` of the time left now (to :attr:`deadline`) has passed:
        a stage's time share, after which an anytime stage (the search) returns its best so far and
        leaves the rest to the stages after it. None when there is no deadline."""
        if self.deadline is None:
            return None
        end = time.monotonic() + share * max(0.0, self.deadline - time.monotonic())
        return lambda: time.monotonic() >= end

    def close(self) -> None:
        if self._open and self.stream is not None:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


def as_progress(progress: Any) -> Progress:
    """A :class:`Progress` for ``progress``: itself, or one echoing plain lines to a callable (or nowhere)."""
    return progress if isinstance(progress, Progress) else Progress(echo=progress)


@contextlib.contextmanager
def time_limit(seconds: float | None, progress: Progress, grace_s: float = 20.0,
               on_hard_stop: Callable[[dict[str, Any]], None] | None = None) -> Iterator[None]:
    """Raise :class:`SolveTimeout` in the main thread after ``seconds`` (None: no limit).

    The exception unwinds the pipeline, so the check's ``finally`` ends the candidate's processes. A
    stage that does not return to Python (a long C call) gets ``grace_s`` more; then ``on_hard_stop``
    (with :meth:`Progress.where`) runs from a watchdog thread, which is expected to write the partial
    report, end the check's children and leave the process.
    """
    if seconds is None:
        yield
        return
    if seconds <= 0:
        raise ValueError("the time limit must be positive")

    def fire(_signum: int, _frame: Any) -> None:
        raise SolveTimeout(seconds, progress.where())

    done = threading.Event()

    def watchdog() -> None:
        if not done.wait(seconds + grace_s) and on_hard_stop is not None:
            on_hard_stop(progress.where())

    old = signal.signal(signal.SIGALRM, fire)
    before, progress.deadline = progress.deadline, time.monotonic() + seconds
    signal.setitimer(signal.ITIMER_REAL, seconds)
    dog = threading.Thread(target=watchdog, daemon=True)
    dog.start()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        progress.deadline = before
        done.set()
