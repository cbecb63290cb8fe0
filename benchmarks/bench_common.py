"""Helpers shared by the benchmark scripts (matmul.py, memory_bound.py).

Importing it makes the checkout's ``src/`` importable when warpsmith is not installed, so a
script runs from a bare checkout (as on the device machine).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
try:  # run from a checkout without installing: use its src/
    import warpsmith  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "src"))


def say(*parts: object) -> None:
    print(*parts, flush=True)  # flushed on every line, whatever PYTHONUNBUFFERED says


def write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # atomic: a killed run leaves the previous complete document


def cuda_broken() -> str | None:
    """A sticky CUDA error (e.g. an illegal address) poisons the context: every later case would fail."""
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        torch.cuda.synchronize()
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
