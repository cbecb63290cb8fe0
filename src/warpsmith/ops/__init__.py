"""The public ops: validate, then call the ``warpsmith::`` custom op (which dispatches to the best
verified kernel for the shape, else the heuristic default).

Example:
    >>> import torch, warpsmith.ops as wops
    >>> c = wops.matmul(torch.randn(64, 32).half(), torch.randn(32, 16).half(), activation="relu")
"""
from .matmul import matmul
from .norm import layer_norm, rms_norm
from .activation import geglu, swiglu
from .rope import rope, rope_hf
from .softmax import log_softmax, softmax
from .xent import cross_entropy, fused_linear_cross_entropy

__all__ = ["matmul"]
__all__ += ["rms_norm", "layer_norm"]
__all__ += ["softmax", "log_softmax"]
__all__ += ["swiglu", "geglu"]
__all__ += ["rope", "rope_hf"]
__all__ += ["cross_entropy", "fused_linear_cross_entropy"]
