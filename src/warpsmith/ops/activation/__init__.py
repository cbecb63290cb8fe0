"""The ``activation`` family: gated activations ``swiglu``, ``geglu`` and their backwards.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` (what each op
computes) and ``VARIANTS`` (how, each naming its op, in order of preference). The public function,
custom ops and autograd are in :mod:`.op`.
"""
from .spec import ACTIVATION_OPS, GEGLU, GEGLU_BACKWARD, SWIGLU, SWIGLU_BACKWARD
from .variant import VARIANTS

SPECS = ACTIVATION_OPS

__all__ = ["SPECS", "VARIANTS", "SWIGLU", "SWIGLU_BACKWARD", "GEGLU", "GEGLU_BACKWARD"]
