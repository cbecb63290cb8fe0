"""The ``attention`` family: prefill / training attention (``attention``, ``attention_backward``).

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` and
``VARIANTS`` are tuples built from the family's parts, so further parts (decode, paged, MLA in
their own modules) extend them by concatenation. The public functions, custom ops and autograd
are in :mod:`.op`.
"""
from .spec import ATTENTION, ATTENTION_BACKWARD
from .spec import SPECS as _PREFILL_SPECS
from .variant import VARIANTS as _PREFILL_VARIANTS

SPECS = tuple(_PREFILL_SPECS)
VARIANTS = tuple(_PREFILL_VARIANTS)

__all__ = ["SPECS", "VARIANTS", "ATTENTION", "ATTENTION_BACKWARD"]
