"""The softmax kernels' limits, one definition for the launchers (variant.py) and the launch contracts
(contract.py)."""
INDEX_LIMIT = 2**31  # offsets within a row are int32 (row offsets are int64)
