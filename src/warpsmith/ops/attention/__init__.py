"""The ``attention`` family.

For now only the decode ops (``attention_decode``, ``attention_decode_mla``: decode_*.py); the
prefill/training ops join here. The declaration :mod:`warpsmith.ops` reads: ``SPECS`` and ``VARIANTS``.
"""
from .decode_spec import DECODE_SPECS
from .decode_variant import DECODE_VARIANTS

SPECS = DECODE_SPECS
VARIANTS = DECODE_VARIANTS

__all__ = ["SPECS", "VARIANTS"]
