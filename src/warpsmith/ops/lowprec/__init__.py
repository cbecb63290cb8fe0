"""The ``lowprec`` family: low-precision GEMMs and quantization.

- scaled GEMM on fp8 (e4m3, e5m2) and int8 operands with per-tensor, per-row/column and block scales
  (``scaled_matmul``: scaled_spec.py, scaled_kernel.py, scaled_variant.py, scaled_contract.py,
  scaled_op.py);
- quantization kernels (dynamic per-row / per-block, static, dequantization, stochastic rounding:
  quant_kernel.py, quant_op.py), all four pipeline ops (specs
  quant_spec.py, criteria quant_judge.py, variants quant_variant.py, launch contracts quant_contract.py),
  and the formats and plain-PyTorch quantization every reference uses
  (quant_reference.py);
- the weight-only int4 GEMM (``int4_matmul``, AutoAWQ and GPTQ v1 packed formats): spec
  int4_spec.py, formats and packers int4_formats.py, kernels int4_kernel.py, variants ``gemv`` and
  ``gemm`` int4_variant.py, launch contracts int4_contract.py, the public op int4_op.py.

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` and
``VARIANTS``.
"""
from .int4_spec import INT4_MATMUL, Int4MatmulSpec
from .int4_variant import VARIANTS as _INT4_VARIANTS
from .scaled_spec import SCALED_MATMUL, ScaledMatmulSpec
from .scaled_variant import VARIANTS as _SCALED_VARIANTS
from .quant_spec import DEQUANTIZE, QUANTIZE, QUANTIZE_STATIC, STOCHASTIC_ROUND
from .quant_variant import VARIANTS as _QUANT_VARIANTS

SPECS = (SCALED_MATMUL, INT4_MATMUL, QUANTIZE, STOCHASTIC_ROUND, QUANTIZE_STATIC, DEQUANTIZE)
VARIANTS = tuple(_SCALED_VARIANTS) + tuple(_INT4_VARIANTS) + tuple(_QUANT_VARIANTS)

__all__ = ["SPECS", "VARIANTS", "SCALED_MATMUL", "ScaledMatmulSpec", "INT4_MATMUL", "Int4MatmulSpec", "QUANTIZE",
           "STOCHASTIC_ROUND", "QUANTIZE_STATIC", "DEQUANTIZE"]
