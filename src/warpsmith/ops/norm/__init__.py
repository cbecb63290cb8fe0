"""The ``norm`` family: ``rms_norm``, ``layer_norm`` (rows), ``batch_norm``, ``group_norm`` (channels: the
``channel/`` sub-family) and their backwards.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` (what each op
computes) and ``VARIANTS`` (how, each naming its op, in order of preference). The public function,
custom ops and autograd are in :mod:`.op`.
"""
from .spec import LAYER_NORM, LAYER_NORM_BACKWARD, NORM_SPECS, RMS_NORM, RMS_NORM_BACKWARD
from .variant import VARIANTS as _ROW_VARIANTS
from .channel.spec import CHANNEL_SPECS
from .channel.variant import VARIANTS as _CHANNEL_VARIANTS

SPECS = NORM_SPECS + CHANNEL_SPECS
VARIANTS = _ROW_VARIANTS + _CHANNEL_VARIANTS

__all__ = ["SPECS", "VARIANTS", "RMS_NORM", "RMS_NORM_BACKWARD", "LAYER_NORM", "LAYER_NORM_BACKWARD"]
