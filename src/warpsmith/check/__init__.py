"""``warpsmith check``: a hardened harness for any implementation of a public-format problem.

- ``formats`` (with ``kernelbench``, ``flashinfer`` and ``solution``) loads problems and candidates.
- ``guards`` snapshots what must not be patched and poisons memory.
- ``compare`` holds bitwise equality, aliasing, layout and the error contract.
- ``hardened`` runs the protocol, and ``speed`` times it on a GPU.
- ``report`` holds the verdict.
"""
from .formats import Candidate, CandidateError, CheckProblem, Workload, load_candidate, load_problem, parse_overrides
from .hardened import check
from .report import CHECKS, CODES, CheckReport, CheckResult

__all__ = ["Candidate", "CandidateError", "CheckProblem", "Workload", "load_candidate", "load_problem",
           "parse_overrides",
           "check", "CHECKS", "CODES", "CheckReport", "CheckResult"]
