"""Verification: error contracts, identity tests, hardened execution, certificates.

The names below are imported on first use (PEP 562), so that importing one submodule (the check's
child imports ``harness``) does not load the prover and z3.
"""
from __future__ import annotations

from ..core.lazy import attributes

_WHERE = {"Certificate": ".certificate", "Check": ".certificate", "HarnessFailure": ".harness",
          "run_guarded": ".harness", "odd_problems": ".verifier", "verify_candidate": ".verifier"}
__all__ = list(_WHERE)
__getattr__ = attributes(__name__, _WHERE)
