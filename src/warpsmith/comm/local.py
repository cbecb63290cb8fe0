"""A CPU world for tests and the benchmark's dry run: ``world`` processes, a gloo process group, and
symmetric buffers in shared memory (:func:`.api.attach`). The ranks are forked by multiprocessing's
fork server (:mod:`warpsmith.core.forkserver`: torch imported once, a rank starts in milliseconds);
each takes the caller's environment of the moment and builds its own process group.

:func:`run_world` runs ``fn(rank, world, *args)`` on every rank and returns the ranks' return
values (rank order). A child that raises sends its error back; a world that does not finish in
``timeout_s`` is killed and reported, never waited on forever.

:func:`run_threads` is the same world as threads of one process, with no process group: each
thread maps the buffers as its own rank and runs the same runtime, protocol and kernels (Triton's
interpreter runs one kernel at a time: the runtime's ``KERNEL_LOCK``). The tuning pipeline verifies
collective configs with it (:mod:`.family`), where spawning processes per trial would cost seconds.
"""
from __future__ import annotations

import datetime
import os
import pickle
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch.multiprocessing as mp

from ..core import forkserver


def _child(rank: int, world: int, folder: str, fn: Callable[..., Any], args: tuple, capacity: int,
           comm_timeout_s: float, environ: dict[str, str]) -> None:
    forkserver.adopt(environ)  # the caller's environment now, not the fork server's when it started
    import torch.distributed as dist

    from .api import attach, detach

    result: Any
    try:
        dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        attach(capacity=capacity, timeout_s=comm_timeout_s, folder=folder)
        result = ("ok", fn(rank, world, *args))
        if not getattr(fn, "leaves_world_broken", False):
            detach()
            dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 -- sent back to the parent
        result = ("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
    with open(Path(folder) / f"result{rank}.pkl", "wb") as f:
        pickle.dump(result, f)
    os._exit(0)  # no teardown that could wait on a dead peer


def run_world(fn: Callable[..., Any], world: int, *args: Any, capacity: int = 1 << 16, timeout_s: float = 120.0,
              comm_timeout_s: float = 30.0) -> list[Any]:
    """Run ``fn(rank, world, *args)`` on ``world`` CPU processes (see the module); ``fn`` must be
    importable by name. Returns the results; raises RuntimeError with every failing rank's error
    (a rank that exits without a result counts as failed, unless ``fn.may_die`` lists it)."""
    folder = tempfile.mkdtemp(prefix="warpsmith-world-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    forkserver.context()  # its preload, for a fork server not started yet
    ctx = mp.start_processes(_child, args=(world, folder, fn, args, capacity, comm_timeout_s, dict(os.environ)),
                             nprocs=world, join=False, start_method="forkserver")
    deadline = time.monotonic() + timeout_s
    try:
        while not all(not p.is_alive() for p in ctx.processes):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                raise RuntimeError(f"the {world}-rank world did not finish within {timeout_s} s")
            time.sleep(0.05)
        results, errors = [], []
        for r in range(world):
            path = Path(folder) / f"result{r}.pkl"
            if not path.exists():
                results.append(None)
                if r not in getattr(fn, "may_die", ()):
                    errors.append(f"rank {r}: exited with code {ctx.processes[r].exitcode} and no result")
                continue
            status, value = pickle.loads(path.read_bytes())
            results.append(value if status == "ok" else None)
            if status != "ok":
                errors.append(f"rank {r}: {value}")
        if errors:
            raise RuntimeError("\n".join(errors))
        return results
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def run_threads(fn: Callable[..., Any], world: int, *args: Any, capacity: int = 1 << 16,
                timeout_s: float = 60.0) -> list[Any]:
    """Run ``fn(w, *args)`` on ``world`` threads, ``w`` the thread's rank view
    (:class:`.symmetric.SymmetricWorld`) of one set of buffers in a fresh shared-memory folder;
    returns the results in rank order. Raises RuntimeError naming each failing rank (a flag wait
    past ``timeout_s`` fails its rank with CommTimeoutError, so nothing hangs)."""
    import shutil
    import threading

    from . import runtime
    from .symmetric import SymmetricWorld, new_folder

    folder = new_folder()
    worlds = [SymmetricWorld(folder, r, world, capacity, timeout_s) for r in range(world)]
    results: list[Any] = [None] * world
    errors: dict[int, str] = {}

    def body(r: int) -> None:
        try:
            results[r] = fn(worlds[r], *args)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors[r] = f"{type(e).__name__}: {e}"
    old_lock = runtime.KERNEL_LOCK
    runtime.KERNEL_LOCK = threading.Lock()
    try:
        for w in worlds:
            w.create()
        for w in worlds:
            w.map()
        threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s + 30)
        if any(t.is_alive() for t in threads):
            raise RuntimeError(f"the {world}-thread world did not finish within {timeout_s + 30} s")
        if errors:
            raise RuntimeError("\n".join(f"rank {r}: {e}" for r, e in sorted(errors.items())))
        return results
    finally:
        runtime.KERNEL_LOCK = old_lock
        for w in worlds:
            w.close()
        shutil.rmtree(folder, ignore_errors=True)
