"""The cross-entropy kernels' limits and block sizes, one definition for the launchers (variant.py,
fused_variant.py) and the launch contracts (contract.py)."""
REDUCE_BLOCK = 1024
INDEX_LIMIT = 2**31  # offsets within a row are int32 (row offsets are int64); contract.py
MAX_BLOCK_V = 16384
