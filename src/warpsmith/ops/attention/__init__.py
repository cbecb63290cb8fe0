"""The ``attention`` family: prefill / training attention (``attention``, ``attention_backward``,
``merge_attention_states``: spec.py, kernel.py, variant.py, contract.py, op.py) and decode over
contiguous or paged KV caches and MLA (``attention_decode``, ``attention_decode_mla``: decode/).

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` and
``VARIANTS``, the prefill part's followed by the decode part's. The public functions, custom ops
and autograd are in :mod:`.op` and :mod:`.decode.op`.
"""
from .decode.spec import DECODE_SPECS
from .decode.variant import DECODE_VARIANTS
from .spec import ATTENTION, ATTENTION_BACKWARD
from .spec import SPECS as _PREFILL_SPECS
from .variant import VARIANTS as _PREFILL_VARIANTS

SPECS = tuple(_PREFILL_SPECS) + tuple(DECODE_SPECS)
VARIANTS = tuple(_PREFILL_VARIANTS) + tuple(DECODE_VARIANTS)

__all__ = ["SPECS", "VARIANTS", "ATTENTION", "ATTENTION_BACKWARD"]
