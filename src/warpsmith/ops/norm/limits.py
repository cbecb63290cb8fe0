"""The row norms' limits: the blocks and warps of the weight-gradient partials' reduction, one definition for
the launchers (variant.py) and the launch contracts (contract.py)."""
REDUCE_BLOCK_P, REDUCE_BLOCK_N, REDUCE_WARPS = 32, 64, 4
