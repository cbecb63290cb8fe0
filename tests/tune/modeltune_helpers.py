"""Shared by the tune-model tests: a tiny model (rms_norm problems only, quick to tune under the
interpreter) and a job function that kills its own worker process on its first try."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from warpsmith.nn import RMSNorm


class TwoNorms(torch.nn.Module):
    """Three rms_norm calls of two distinct shapes: (M, 32) twice and (M, 16) once."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = RMSNorm(32), RMSNorm(32), RMSNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.b(self.a(x))
        return self.c(y[..., :16].contiguous())


def inputs() -> torch.Tensor:
    return torch.randn(1, 4, 32, generator=torch.Generator().manual_seed(0))


def records(db) -> list[tuple]:
    """The verified records of ``db`` as comparable tuples (provenance and dates left out)."""
    return sorted((r.op, tuple(sorted(r.shape.items())), r.dtype, r.variant, tuple(sorted(r.config.items())),
                   r.timing_kind, r.time_ms) for r in db.list() if r.verified)


class KillFirstTry:
    """A job function: the first job to run kills its worker process (``os._exit``, as a crashed worker
    or a lost node looks), once, marked by a file; every other call runs ``tune_job``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __call__(self, job: dict) -> dict:
        from warpsmith.modeltune import tune_job

        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return tune_job(job)
        os.close(fd)
        os._exit(17)


def model_and_inputs() -> tuple[torch.nn.Module, torch.Tensor]:
    """For ``warpsmith tune-model --model modeltune_helpers:model_and_inputs``."""
    return TwoNorms(), inputs()


class InProcess:
    """An executor running each job here, one after another, in ranked order (no pool to spawn, so
    a test's timing does not depend on how fast a worker process starts)."""

    name = "inprocess"

    def run(self, fn, jobs):
        from warpsmith.measure.executor import Outcome

        for i, job in enumerate(jobs):
            out = Outcome(i, dict(job))
            try:
                out.result = fn(out.job)
            except Exception as e:  # noqa: BLE001 - the job's outcome, as the real executors report it
                out.error = f"{type(e).__name__}: {e}"
            yield out


class SpendBudget:
    """A job function: runs ``tune_job``, then (the first job only) waits until the run's deadline
    has passed, so every later job starts after it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, job: dict) -> dict:
        import time

        from warpsmith.modeltune import tune_job

        self.calls += 1
        out = tune_job(job)
        while self.calls == 1 and time.time() < job["deadline"] + 0.05:
            time.sleep(0.05)
        return out


class NormThenGelu(torch.nn.Module):
    """An rms_norm (a warpsmith op: a captured problem), a graph break, then a pointwise tail (gelu,
    scale, shift) that warpsmith's torch.compile backend fuses into one generated kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = RMSNorm(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x)
        torch._dynamo.graph_break()  # the tail is a graph of its own, whatever becomes of the norm's
        return torch.nn.functional.gelu(y) * 2 + 1


def gelu_model_and_inputs() -> tuple[torch.nn.Module, torch.Tensor]:
    """For ``warpsmith tune-model --model modeltune_helpers:gelu_model_and_inputs``."""
    return NormThenGelu(), inputs()
