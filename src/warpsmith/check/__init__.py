"""``warpsmith check``: a hardened harness for any implementation of a public-format problem.

- ``formats`` (with ``kernelbench``, ``flashinfer`` and ``solution``) loads problems and candidates.
- ``guards`` snapshots what must not be patched and poisons memory.
- ``compare`` holds bitwise equality, aliasing, layout and the error contract.
- ``hardened`` runs the protocol, and ``speed`` times it on a GPU.
- ``report`` holds the verdict.

The names below are imported on first use (PEP 562): the candidate's process (``child``) imports
this package too, and must not pay for the harness, the prover and z3.
"""
from __future__ import annotations

from ..core.lazy import attributes

_WHERE = {"Candidate": ".formats", "CandidateError": ".formats", "CheckProblem": ".formats", "Workload": ".formats",
          "load_candidate": ".formats", "load_problem": ".formats", "parse_overrides": ".formats",
          "check": ".hardened", "CHECKS": ".report", "CODES": ".report", "CheckReport": ".report",
          "CheckResult": ".report"}
__all__ = list(_WHERE)
__getattr__ = attributes(__name__, _WHERE)
