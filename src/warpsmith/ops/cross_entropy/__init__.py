"""The ``cross_entropy`` family: ``cross_entropy`` and ``fused_linear_cross_entropy`` (the logits by
warpsmith's matmul, never materialized), and their backwards.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` (what each op
computes) and ``VARIANTS`` (how, each naming its op, in order of preference). The public function,
custom ops and autograd are in :mod:`.op`.
"""
from .spec import (CROSS_ENTROPY, CROSS_ENTROPY_BACKWARD, FUSED_LINEAR_CROSS_ENTROPY,
                   FUSED_LINEAR_CROSS_ENTROPY_BACKWARD)
from .variant import VARIANTS

SPECS = (CROSS_ENTROPY, CROSS_ENTROPY_BACKWARD, FUSED_LINEAR_CROSS_ENTROPY, FUSED_LINEAR_CROSS_ENTROPY_BACKWARD)

__all__ = ["SPECS", "VARIANTS", "CROSS_ENTROPY", "CROSS_ENTROPY_BACKWARD", "FUSED_LINEAR_CROSS_ENTROPY",
           "FUSED_LINEAR_CROSS_ENTROPY_BACKWARD"]
