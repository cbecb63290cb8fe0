"""The public ops: validate, then call the ``warpsmith::`` custom op (which dispatches to the best
verified kernel for the shape, else the heuristic default).

Example:
    >>> import torch, warpsmith.ops as wops
    >>> c = wops.matmul(torch.randn(64, 32).half(), torch.randn(32, 16).half(), activation="relu")
"""
from .matmul import matmul

__all__ = ["matmul"]
