"""The decode kernels' tile padding (``tl.dot`` needs every dimension >= 16), one definition for the
launcher (variant.py) and the launch contracts (contract.py)."""
from __future__ import annotations

from ....core.variant import next_pow2

MIN_DOT = 16  # tl.dot needs every dimension >= 16


def dot_pad(n: int) -> int:
    """``n`` padded to a power of two, at least MIN_DOT."""
    return max(MIN_DOT, next_pow2(n))
