"""The quantization kernels' limits and preconditions, one definition for the launchers (variant.py, op.py)
and the launch contracts (contract.py)."""
from __future__ import annotations

from typing import Any

INDEX_LIMIT = 2**31  # the kernels index columns (and loop counters) in int32
PHILOX_LIMIT = 2**32  # element indices are Philox counters in uint32: distinct below this
AMAX_BLOCK = 1024  # rows' amaxes one step of amax_scale_kernel reads


def columns_fit(N: Any, block: int) -> Any:
    """The row kernel's precondition: column indices and the loop counter, up to N + BLOCK - 1, stay
    below 2^31 (a bool for ints; a z3 condition for the contracts' symbolic N)."""
    return N + block <= INDEX_LIMIT


def elements_fit(n: Any) -> Any:
    """The stochastic-rounding kernel's precondition: every element index is a distinct uint32 counter."""
    return n <= PHILOX_LIMIT
