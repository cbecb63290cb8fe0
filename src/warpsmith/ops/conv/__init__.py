"""The ``conv`` family: 1-D/2-D/3-D convolutions, direct and transposed, as implicit GEMMs in Triton
(spec, kernels, variants ``depthwise`` (a direct kernel for one input channel per group),
``phased`` (a strided transposed conv by output phase), ``implicit_gemm`` and ``pointwise``, launch contracts, the public ops and
their custom ops with autograd in :mod:`.op`)."""
from .spec import CONV, ConvSpec
from .variant import VARIANTS

SPECS = (CONV,)

__all__ = ["SPECS", "VARIANTS", "CONV", "ConvSpec"]
