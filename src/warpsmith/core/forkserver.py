"""Worker processes forked from multiprocessing's fork server, with torch imported once.

A ``spawn`` worker starts a new interpreter and imports torch again: about 2 CPU-s each, paid by
every rank of a CPU collective world and every worker of a local tuning pool. The fork server is a
process multiprocessing starts once per caller; it imports :data:`PRELOAD` (and nothing of the
caller's state: no tensors, no caches, no open files), and each worker is a fork of it, started in
milliseconds. What the fork server cannot know is the caller's environment of the moment (it keeps
the one it started with), so :func:`call_in_environ` sets it in the worker before the job runs.
"""
from __future__ import annotations

import multiprocessing
import os
from typing import Any, Callable

#: what the fork server imports before forking workers (torch is most of a worker's start)
PRELOAD = ["torch", "torch.distributed"]


def context() -> multiprocessing.context.BaseContext:
    """The ``forkserver`` context, with :data:`PRELOAD` for a server not started yet."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def adopt(environ: dict[str, str]) -> None:
    """In a worker: replace its environment with ``environ`` (the caller's, taken when the job was
    submitted: ``dict(os.environ)``)."""
    os.environ.clear()
    os.environ.update(environ)


def call_in_environ(environ: dict[str, str], fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a worker, in ``environ`` (:func:`adopt`)."""
    adopt(environ)
    return fn(*args)
