"""Import Triton the right way for this machine.

Triton reads ``TRITON_INTERPRET`` when it is first imported, so the decision is
taken here, once, before any kernel module imports ``triton``: with no CUDA or
ROCm device (or with ``WARPSMITH_INTERPRET=1``) kernels run on the CPU under
Triton's interpreter, for correctness only.
"""
from __future__ import annotations

import os
import sys

import torch

from .settings import settings


def _decide() -> bool:
    if "triton" in sys.modules:  # already imported by someone else: respect their choice
        return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    interpret = settings().force_interpret or not torch.cuda.is_available()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    return interpret


INTERPRET: bool = _decide()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

__all__ = ["INTERPRET", "triton", "tl"]
