"""Import Triton the right way for this machine.

Triton reads ``TRITON_INTERPRET`` when it is first imported, so the decision is
taken here, once, before any kernel module imports ``triton``:

- with ``WARPSMITH_COMPILE_ONLY=<arch>`` (``sm_90``, ``gfx942``) kernels are compiled for that
  GPU architecture and never run (``warpsmith gpucheck``; see ``_compile_only``);
- else with no CUDA or ROCm device (or with ``WARPSMITH_INTERPRET=1``) kernels run on the
  CPU under Triton's interpreter, for correctness only;
- else they compile and run on the GPU.
"""
from __future__ import annotations

import os
import sys

import torch

from .settings import settings


def _decide() -> tuple[bool, str | None]:
    """(interpret, compile-only architecture)."""
    s = settings()
    if s.compile_only:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
            raise RuntimeError("WARPSMITH_COMPILE_ONLY is set but Triton was already imported with its "
                               "interpreter: set it before anything imports triton")
        os.environ.pop("TRITON_INTERPRET", None)
        return False, s.compile_only
    if "triton" in sys.modules:  # already imported by someone else: respect their choice
        return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"), None
    interpret = s.force_interpret or not torch.cuda.is_available()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    return interpret, None


INTERPRET, COMPILE_ONLY_ARCH = _decide()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

if not INTERPRET:
    from . import _compile_only  # noqa: E402

    if COMPILE_ONLY_ARCH:
        from triton.runtime.driver import driver as _driver

        _driver.set_active(_compile_only.make_driver(COMPILE_ONLY_ARCH))
    _compile_only.install(compile_only=COMPILE_ONLY_ARCH is not None)

__all__ = ["INTERPRET", "COMPILE_ONLY_ARCH", "triton", "tl"]
