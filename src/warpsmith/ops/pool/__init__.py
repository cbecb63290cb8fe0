"""The ``pool`` family: ``max_pool``, ``avg_pool``, ``adaptive_avg_pool`` (1-D/2-D/3-D) and their backwards.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` and
``VARIANTS``. The public functions, custom ops and autograd are in :mod:`.op`.
"""
from .spec import POOL_SPECS
from .variant import VARIANTS

SPECS = POOL_SPECS

__all__ = ["SPECS", "VARIANTS"]
