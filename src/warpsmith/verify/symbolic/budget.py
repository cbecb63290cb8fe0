"""Solver budgets in z3's deterministic resource units, so that an answer does not depend on the load.

A budget is given in milliseconds (what a person reasons in) and handed to z3 as an ``rlimit``: the
same problem with the same budget gets the same answer on an idle machine, a loaded CI runner or a
fast workstation. The wall-clock timeout is only a backstop (20 times the budget) against a solver that
stops counting. ``RLIMIT_PER_MS`` is about what z3 spends per millisecond on these problems on the
2-core development machine under load (1.3k-3.3k units/ms measured on the attention contracts).
"""
from __future__ import annotations

from typing import Any

RLIMIT_PER_MS = 1500  # z3 resource units per millisecond of budget


def budgeted(solver: Any, ms: int) -> Any:
    """``solver`` limited to ``ms`` milliseconds' worth of z3 work (deterministic); returns it."""
    ms = max(1, int(ms))
    solver.set("rlimit", ms * RLIMIT_PER_MS)
    solver.set("timeout", ms * 20)
    return solver
