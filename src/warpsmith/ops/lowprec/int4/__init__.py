"""Weight-only int4 GEMM (``int4_matmul``; AutoAWQ and GPTQ v1 packed formats): spec.py, the formats
and packers formats.py, kernel.py, the variants ``gemv`` and ``gemm`` variant.py, launch contracts
contract.py, the public op op.py."""
