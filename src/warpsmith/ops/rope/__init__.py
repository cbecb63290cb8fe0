"""The ``rope`` family: rotary position embedding of q and k, and its backward.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` (what each op
computes) and ``VARIANTS`` (how, each naming its op, in order of preference). The public function,
custom ops and autograd are in :mod:`.op`.
"""
from .spec import ROPE, ROPE_BACKWARD, ROPE_OPS
from .variant import VARIANTS

SPECS = ROPE_OPS

__all__ = ["SPECS", "VARIANTS", "ROPE", "ROPE_BACKWARD"]
