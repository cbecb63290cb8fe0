"""Executors: run one function over many independent jobs, on this machine or on a Ray cluster.

The unit of work is whatever ``fn(job)`` does (``warpsmith tune-model`` runs the whole tuner for one
(op, shape, dtype, target) problem in it); a job is a JSON-able dict, a result whatever ``fn``
returns (picklable). Both executors give the same results for the same jobs; they differ in where
``fn`` runs and in what a lost worker looks like:

- :class:`LocalExecutor` (the default): a process pool on this machine, no server. A worker process
  that dies breaks the pool; the jobs it held are resubmitted to a fresh pool.
- :class:`RayExecutor`: one Ray task per job on a running cluster (``address``) or a local one it
  starts. A job that needs a GPU (``job["gpus"]``) requests one GPU, so Ray runs one measurement per
  GPU at a time; the others request one CPU each and fill the remaining cores. A task whose worker
  or node is lost is resubmitted (Ray places it wherever there is room).

Either way a job is tried at most ``attempts`` times when its worker is lost, then reported failed
with the reason; an exception raised by ``fn`` itself is a failure at once (it would fail again).
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from ..core import forkserver
from ..core.errors import InvalidInputError, WarpsmithError

EXECUTORS = ("local", "ray")


@dataclass
class Outcome:
    """One job's end: ``result`` (what ``fn`` returned) or ``error`` (why it failed), after ``attempts``
    tries; ``lost`` lists why each earlier try was lost (a worker or node died)."""

    index: int
    job: dict[str, Any]
    result: Any = None
    error: str | None = None
    attempts: int = 1
    lost: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


def node_name() -> str:
    """The host a job ran on (for a result's provenance)."""
    return socket.gethostname()


def _check_attempts(attempts: int) -> int:
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise InvalidInputError("attempts", "a positive number of tries per job", attempts)
    return attempts


class LocalExecutor:
    """A process pool of ``workers`` processes (default: the CPU count) on this machine."""

    name = "local"

    def __init__(self, workers: int | None = None, attempts: int = 3) -> None:
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise InvalidInputError("workers", "a positive number of processes", workers)
        self.workers = workers or os.cpu_count() or 1
        self.attempts = _check_attempts(attempts)

    def run(self, fn: Callable[[dict[str, Any]], Any], jobs: Sequence[dict[str, Any]]) -> Iterator[Outcome]:
        """Yield an :class:`Outcome` per job as each finishes (not in job order)."""
        pending = {i: Outcome(i, dict(j), attempts=0) for i, j in enumerate(jobs)}
        ctx = forkserver.context()  # no state forked from the caller; torch imported once by the fork server
        environ = dict(os.environ)
        while pending:
            with cf.ProcessPoolExecutor(min(self.workers, len(pending)), mp_context=ctx) as pool:
                futures = {}
                for i, out in pending.items():
                    out.attempts += 1
                    futures[pool.submit(forkserver.call_in_environ, environ, fn, out.job)] = i
                for fut in cf.as_completed(futures):
                    out = pending[futures[fut]]
                    try:
                        out.result = fut.result()
                    except cf.process.BrokenProcessPool as e:
                        if out.attempts < self.attempts:
                            out.lost.append(f"worker process lost: {e}")
                            continue  # resubmitted to the next pool
                        out.error = f"worker process lost {out.attempts} times: {e}"
                    except Exception as e:  # noqa: BLE001 - fn's own failure is the job's outcome
                        out.error = f"{type(e).__name__}: {e}"
                    del pending[out.index]
                    yield out


class RayExecutor:
    """Ray tasks on the cluster at ``address`` (``"auto"``: the one this machine belongs to), or on a
    local cluster started here when ``address`` is None (``num_cpus`` cores, no dashboard)."""

    name = "ray"

    def __init__(self, address: str | None = None, attempts: int = 3, num_cpus: int | None = None) -> None:
        try:
            import ray
        except ImportError as e:
            raise WarpsmithError("--executor ray needs Ray: pip install 'warpsmith[dist]' (or pip install ray)") from e
        self.ray = ray
        self.address = address
        self.num_cpus = num_cpus
        self.attempts = _check_attempts(attempts)

    def _init(self) -> None:
        if self.ray.is_initialized():
            return
        if self.address is None:
            self.ray.init(num_cpus=self.num_cpus, include_dashboard=False, log_to_driver=False)
        else:
            self.ray.init(address=self.address, log_to_driver=False)

    def run(self, fn: Callable[[dict[str, Any]], Any], jobs: Sequence[dict[str, Any]]) -> Iterator[Outcome]:
        """Yield an :class:`Outcome` per job as each finishes (not in job order)."""
        ray = self.ray
        self._init()
        # Ray's own retries are off: this loop counts the tries so the outcome can say what was lost
        task = ray.remote(max_retries=0)(_call)
        lost_errors = tuple(getattr(ray.exceptions, n) for n in
                            ("WorkerCrashedError", "NodeDiedError", "OwnerDiedError", "ObjectLostError",
                             "LocalRayletDiedError", "TaskUnschedulableError") if hasattr(ray.exceptions, n))
        outs = [Outcome(i, dict(j), attempts=0) for i, j in enumerate(jobs)]
        refs: dict[Any, Outcome] = {}

        def submit(out: Outcome) -> None:
            out.attempts += 1
            gpus = 1 if out.job.get("gpus") else 0
            refs[task.options(num_cpus=0 if gpus else 1, num_gpus=gpus).remote(fn, out.job)] = out

        for out in outs:
            submit(out)
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            out = refs.pop(done[0])
            try:
                out.result = ray.get(done[0])
            except lost_errors as e:
                reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                if out.attempts < self.attempts:
                    out.lost.append(reason)
                    submit(out)
                    continue
                out.error = f"worker lost {out.attempts} times; last: {reason}"
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None) or e  # the exception fn raised in the task
                out.error = f"{type(cause).__name__}: {cause}"
            yield out


def _call(fn: Callable[[dict[str, Any]], Any], job: dict[str, Any]) -> Any:
    return fn(job)


def make_executor(name: str, *, address: str | None = None, workers: int | None = None,
                  attempts: int = 3) -> LocalExecutor | RayExecutor:
    """The executor named ``name`` (one of :data:`EXECUTORS`)."""
    if name == "local":
        if address is not None:
            raise InvalidInputError("address", "no address with --executor local (it needs no server)", address)
        return LocalExecutor(workers, attempts)
    if name == "ray":
        return RayExecutor(address, attempts, workers)
    raise InvalidInputError("executor", " or ".join(EXECUTORS), name)
