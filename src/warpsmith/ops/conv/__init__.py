"""The ``conv`` family: 1-D/2-D/3-D convolutions, direct and transposed, as implicit GEMMs in Triton
(spec, kernels, variants ``depthwise`` (a direct kernel for one input channel per group),
``phased`` (a strided transposed conv by output phase), ``implicit_gemm`` and ``pointwise``; the weight
gradient ``conv_weight_grad`` (wgrad.py), launch contracts, the public ops and
their custom ops with autograd in :mod:`.op`)."""
from . import variant as _variant, wgrad as _wgrad
from .spec import CONV, ConvSpec
from .wgrad import CONV_WEIGHT_GRAD

SPECS = (CONV, CONV_WEIGHT_GRAD)
VARIANTS = _variant.VARIANTS + _wgrad.VARIANTS

__all__ = ["SPECS", "VARIANTS", "CONV", "CONV_WEIGHT_GRAD", "ConvSpec"]
