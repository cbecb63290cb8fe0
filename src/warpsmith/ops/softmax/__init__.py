"""The ``softmax`` family: ``softmax``, ``log_softmax`` and their backwards.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` (what each op
computes) and ``VARIANTS`` (how, each naming its op, in order of preference). The public function,
custom ops and autograd are in :mod:`.op`.
"""
from .spec import LOG_SOFTMAX, LOG_SOFTMAX_BACKWARD, SOFTMAX, SOFTMAX_BACKWARD, SPECS
from .variant import VARIANTS

SPECS = SPECS

__all__ = ["SPECS", "VARIANTS", "SOFTMAX", "LOG_SOFTMAX", "SOFTMAX_BACKWARD", "LOG_SOFTMAX_BACKWARD"]
