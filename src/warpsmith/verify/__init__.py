"""Verification: error contracts, identity tests, hardened execution, certificates.

The names below are imported on first use (PEP 562), so that importing one submodule (the check's
child imports ``harness``) does not load the prover and z3.
"""
from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"Certificate": "certificate", "Check": "certificate", "HarnessFailure": "harness",
          "run_guarded": "harness", "odd_problems": "verifier", "verify_candidate": "verifier"}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value
