"""The gather family's limits, one definition for the launchers (variant.py) and the launch contracts
(contract.py)."""
GRID_LIMIT = 2**31 - 1  # programs on grid axis 0: A * cdiv(J, BLOCK_J) * cdiv(B, BLOCK_B)
SIZE_LIMIT = 2**31 - 1024  # J, B and V (with a block's room below 2^31: block indices are int32)
BLOCK_J = (1, 2, 4, 8, 16, 32, 64, 128)
BLOCK_B = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
MAX_TILE = 4096  # elements per program
