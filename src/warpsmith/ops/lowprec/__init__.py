"""The ``lowprec`` family: low-precision GEMMs and quantization, one sub-family per folder.

- :mod:`.scaled`: the scaled GEMM on fp8 (e4m3, e5m2) and int8 operands with per-tensor, per-row/column
  and block scales (``scaled_matmul``), and the fp8 linear's autograd;
- :mod:`.quant`: the quantization kernels (dynamic per-row / per-block, static, dequantization,
  stochastic rounding), all four pipeline ops, and the formats and plain-PyTorch quantization every
  reference uses (``quant/reference.py``);
- :mod:`.int4`: the weight-only int4 GEMM (``int4_matmul``, AutoAWQ and GPTQ v1 packed formats).

Each holds spec.py, kernel.py, variant.py, contract.py and op.py (plus its own helpers).
The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` and
``VARIANTS``.
"""
from .int4.spec import INT4_MATMUL, Int4MatmulSpec
from .int4.variant import VARIANTS as _INT4_VARIANTS
from .scaled.spec import SCALED_MATMUL, ScaledMatmulSpec
from .scaled.variant import VARIANTS as _SCALED_VARIANTS
from .quant.spec import DEQUANTIZE, QUANTIZE, QUANTIZE_STATIC, STOCHASTIC_ROUND
from .quant.variant import VARIANTS as _QUANT_VARIANTS

SPECS = (SCALED_MATMUL, INT4_MATMUL, QUANTIZE, STOCHASTIC_ROUND, QUANTIZE_STATIC, DEQUANTIZE)
VARIANTS = tuple(_SCALED_VARIANTS) + tuple(_INT4_VARIANTS) + tuple(_QUANT_VARIANTS)

__all__ = ["SPECS", "VARIANTS", "SCALED_MATMUL", "ScaledMatmulSpec", "INT4_MATMUL", "Int4MatmulSpec", "QUANTIZE",
           "STOCHASTIC_ROUND", "QUANTIZE_STATIC", "DEQUANTIZE"]
