"""The ``gather`` family: ``gather``, ``scatter_add`` and ``scatter`` along one dim (embedding,
``index_select``, ``torch.gather``, ``index_add``, ``scatter_add``, ``scatter``, and the embedding
backward). Index values are checked on the host against ``[0, V)`` before every launch and declared
so in the launch contracts (:mod:`.contract`), which prove every access in bounds for all shapes.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` and
``VARIANTS``. The public functions are in :mod:`.op`.
"""
from .spec import GATHER, SCATTER, SCATTER_ADD, SPECS
from .variant import VARIANTS

SPECS = SPECS

__all__ = ["SPECS", "VARIANTS", "GATHER", "SCATTER_ADD", "SCATTER"]
