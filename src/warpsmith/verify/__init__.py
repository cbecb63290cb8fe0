"""Verification: error contracts, identity tests, hardened execution, certificates."""
from .certificate import Certificate, Check
from .harness import HarnessFailure, run_guarded
from .verifier import odd_problems, verify_candidate

__all__ = ["Certificate", "Check", "HarnessFailure", "run_guarded", "odd_problems", "verify_candidate"]
