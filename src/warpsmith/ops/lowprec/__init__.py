"""The ``lowprec`` family: low-precision GEMMs and quantization.

- scaled GEMM on fp8 (e4m3, e5m2) and int8 operands with per-tensor, per-row/column and block scales
  (``scaled_matmul``: scaled_spec.py, scaled_kernel.py, scaled_variant.py, scaled_contract.py,
  scaled_op.py);
- formats and the plain-PyTorch quantization every reference uses (quant_reference.py).

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` and
``VARIANTS``, one part per op group (the int4 weight-only GEMM adds its own).
"""
from .scaled_spec import SCALED_MATMUL, ScaledMatmulSpec
from .scaled_variant import VARIANTS as _SCALED_VARIANTS

SPECS = (SCALED_MATMUL,)
VARIANTS = tuple(_SCALED_VARIANTS)

__all__ = ["SPECS", "VARIANTS", "SCALED_MATMUL", "ScaledMatmulSpec"]
