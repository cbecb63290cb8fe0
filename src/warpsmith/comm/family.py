"""The collectives' declaration for the op registry (:mod:`warpsmith.ops` reads ``SPECS`` and
``VARIANTS``, as from a family under ``ops/``): the all-reduce (:mod:`.spec`, :mod:`.variant`)."""
from .spec import ALL_REDUCE, SPECS
from .variant import VARIANTS

__all__ = ["SPECS", "VARIANTS", "ALL_REDUCE"]
