"""The ``lowprec`` family: low-precision GEMMs and quantization.

This branch declares the weight-only int4 GEMM (``int4_matmul``, AutoAWQ and GPTQ v1 packed formats):
spec :mod:`.int4_spec`, formats and packers :mod:`.int4_formats`, kernels :mod:`.int4_kernel`,
variants ``gemv`` and ``gemm`` :mod:`.int4_variant`, launch contracts :mod:`.int4_contract`, the public
op :mod:`.int4_op`. (The scaled fp8/int8 GEMMs and quantization kernels of the same family are
declared beside these when the branches are merged.)
"""
from .int4_spec import INT4_MATMUL, Int4MatmulSpec
from .int4_variant import VARIANTS as INT4_VARIANTS

SPECS = (INT4_MATMUL,)
VARIANTS = INT4_VARIANTS

__all__ = ["SPECS", "VARIANTS", "INT4_MATMUL", "Int4MatmulSpec"]
