"""The gated-activation kernels' block caps, one definition for the launchers (variant.py) and the launch
contracts (contract.py)."""
MAX_BLOCK_H = 4096
MAX_BLOCK_M = 64
