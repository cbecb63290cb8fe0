"""Scaled GEMM on fp8 (e4m3, e5m2) and int8 operands with per-tensor, per-row/column and block scales
(``scaled_matmul``): spec.py, kernel.py, variant.py, launch contracts contract.py, the public op
op.py."""
