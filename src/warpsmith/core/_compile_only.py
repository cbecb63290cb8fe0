"""Compile-only Triton: kernels compiled for a real GPU target on a machine that has none.

With ``WARPSMITH_COMPILE_ONLY=<target>`` (set by ``warpsmith gpucheck`` for the process it spawns),
``warpsmith.core._triton`` imports Triton without its interpreter and makes :class:`CompileOnlyDriver`
the active driver: it reports the target's architecture (e.g. CUDA sm_90), so every
``kernel[grid](...)`` a launcher makes runs Triton's real front end, its LLVM back end and
ptxas (or the AMD back end) with exactly the specialization a GPU launch would get (argument
alignment and divisibility, constexprs, ``num_warps``, ``num_stages``). Every launch is turned
into ``warmup=True``: the kernel is compiled and Triton's launch-time checks run (e.g. the
re-check of the module globals a kernel read), and nothing is executed. Launch outputs are
therefore garbage; launchers that read device results on the host are not usable in this mode.

:func:`recording` collects what was launched (the Triton function, the compiled kernel and
the grid) for the resource report (``warpsmith.targets.compiler.static``). It also works on a real GPU,
where the compiled kernels come from ordinary launches.

This module belongs to :mod:`warpsmith.targets.compiler` (everything the compiler tells us about a
kernel), which re-exports it; it sits in core because :mod:`._triton` must install it while it imports
Triton, and core imports nothing above it.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from dataclasses import dataclass
from typing import Any, Iterator

import torch

# architectures Triton compiles for, by the prefix of the target's ``arch`` string
_BACKENDS = {"sm_": ("cuda", 32), "gfx": ("hip", 64)}


def gpu_target(arch: str) -> Any:
    """Triton's ``GPUTarget`` for an architecture name: ``sm_90``, ``sm_100``, ``gfx942``."""
    from triton.backends.compiler import GPUTarget

    for prefix, (backend, warp) in _BACKENDS.items():
        if arch.startswith(prefix):
            return GPUTarget(backend, int(arch[3:]) if backend == "cuda" else arch, warp)
    raise ValueError(f"unknown GPU architecture {arch!r}: expected sm_<NN> or gfx<NNN>")


def _driver_base() -> type:
    from triton.backends.driver import DriverBase

    return DriverBase


def make_driver(arch: str) -> Any:
    """A Triton driver that compiles for ``arch`` and can launch nothing."""

    class CompileOnlyDriver(_driver_base()):
        def __init__(self) -> None:  # DriverBase.__init__ would look for a device
            self.target = gpu_target(arch)

        @classmethod
        def is_active(cls) -> bool:
            return False

        def map_python_to_cpp_type(self, ty: str) -> str:
            return ty

        def get_current_target(self) -> Any:
            return self.target

        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_active_torch_device(self) -> torch.device:
            return torch.device("cpu")

        def get_device_interface(self) -> Any:
            raise RuntimeError(f"compile-only Triton ({arch}): there is no device to query")

        def get_benchmarker(self) -> Any:
            raise RuntimeError(f"compile-only Triton ({arch}): nothing can be timed")

    return CompileOnlyDriver()


@dataclass
class Launch:
    """One launch seen by :func:`recording`: the ``@triton.jit`` function, its compiled kernel
    (None when compilation failed before Triton returned one), the grid, and the bytes of its tensor
    arguments (what a kernel reading or writing each once moves)."""

    fn: Any
    kernel: Any
    grid: tuple[int, ...] | None
    arg_bytes: int | None = None


_RECORD: contextvars.ContextVar[list[Launch] | None] = contextvars.ContextVar("warpsmith_launches", default=None)
_installed = False
_lock = threading.Lock()


def _grid(grid: Any) -> tuple[int, ...] | None:
    if callable(grid):
        return None  # a grid computed from the meta-parameters: not evaluated here
    return tuple(int(g) for g in grid)


def _tensor_bytes(args: tuple, kwargs: dict) -> int:
    return sum(a.numel() * a.element_size() for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))


def install(compile_only: bool) -> None:
    """Wrap ``JITFunction.run`` once: record launches inside :func:`recording`, and with
    ``compile_only`` turn every launch into a compile (``warmup=True``)."""
    global _installed
    with _lock:
        if _installed:
            return
        from triton.runtime.jit import JITFunction

        original = JITFunction.run

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            kernel = original(self, *args, grid=grid, warmup=warmup or compile_only, **kwargs)
            record = _RECORD.get()
            if record is not None:
                record.append(Launch(self, kernel, _grid(grid), _tensor_bytes(args, kwargs)))
            return kernel

        JITFunction.run = run
        _installed = True


@contextlib.contextmanager
def recording() -> Iterator[list[Launch]]:
    """Within this block (this thread or task), every Triton launch is appended to the list."""
    launches: list[Launch] = []
    token = _RECORD.set(launches)
    try:
        yield launches
    finally:
        _RECORD.reset(token)
