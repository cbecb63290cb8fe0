"""The int4 GEMM kernels' limits, one definition for the launchers (variant.py) and the launch contracts
(contract.py)."""
INDEX_LIMIT = 2**31
MAX_BLOCK = 256
