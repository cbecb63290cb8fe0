"""The ``norm`` family: ``rms_norm``, ``layer_norm`` and their backwards.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` (what each op
computes) and ``VARIANTS`` (how, each naming its op, in order of preference). The public function,
custom ops and autograd are in :mod:`.op`.
"""
from .spec import LAYER_NORM, LAYER_NORM_BACKWARD, NORM_SPECS, RMS_NORM, RMS_NORM_BACKWARD
from .variant import VARIANTS

SPECS = NORM_SPECS

__all__ = ["SPECS", "VARIANTS", "RMS_NORM", "RMS_NORM_BACKWARD", "LAYER_NORM", "LAYER_NORM_BACKWARD"]
