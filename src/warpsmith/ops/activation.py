"""``warpsmith.ops.swiglu`` and ``warpsmith.ops.geglu``: validate, then call the custom ops."""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import InvalidInputError
from ..runtime.activation_ops import geglu_op, swiglu_op
from ..spec.activation import SWIGLU
from .validate import check_device, check_dtype, check_like, check_tensor

APPROXIMATE = ("none", "tanh")


def _prepare(gate: object, up: object) -> tuple[torch.Tensor, Optional[torch.Tensor], tuple[int, ...], int]:
    """2-D views (rows = flattened leading dims) with unit column stride; copies only where needed."""
    gate = check_tensor("gate", gate)
    if gate.dim() < 1 or gate.numel() == 0:
        raise InvalidInputError("gate", "a non-empty tensor of shape (..., H) (or (..., 2H) when up is None)",
                                f"shape {tuple(gate.shape)}")
    check_dtype("gate", gate, SWIGLU.dtypes)
    check_device("gate", gate)
    n = gate.shape[-1]
    if up is None:
        if n % 2:
            raise InvalidInputError("last dimension of gate (packed gate and up, up=None)",
                                    "an even size 2H (gate = x[..., :H], up = x[..., H:])", n)
        hidden = n // 2
    else:
        up = check_tensor("up", up)
        check_like("up", up, "gate", gate, shape=tuple(gate.shape))
        hidden = n
    lead = tuple(gate.shape[:-1])

    def flat(t: torch.Tensor) -> torch.Tensor:
        t = t.reshape(-1, t.shape[-1])  # a view where the strides allow, else a copy
        return t if t.shape[1] == 1 or t.stride(1) == 1 else t.contiguous()

    return flat(gate), (None if up is None else flat(up)), lead, hidden


def swiglu(gate: torch.Tensor, up: Optional[torch.Tensor] = None) -> torch.Tensor:
    """SwiGLU: ``silu(gate) * up``, computed in fp32, rounded once to the input dtype.

    Args:
        gate: (..., H); or, when ``up`` is None, the packed (..., 2H) tensor whose first half
            ``[..., :H]`` is the gate and second half ``[..., H:]`` is up (a fused gate/up projection).
        up: (..., H), same shape, dtype and device as ``gate``; or None (packed form).

    Returns:
        (..., H), contiguous, in the input dtype (float32, float16 or bfloat16). Differentiable:
        the gradient is computed by the ``warpsmith::swiglu_backward`` kernels.

    Any leading dims and row strides are used in place; an input whose last dimension is not
    contiguous (stride != 1), or whose leading dims cannot be flattened into one row stride, is
    copied first.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes or devices (nothing is computed).
    """
    g, u, lead, hidden = _prepare(gate, up)
    return swiglu_op(g, u).view(*lead, hidden)


def geglu(gate: torch.Tensor, up: Optional[torch.Tensor] = None, approximate: str = "none") -> torch.Tensor:
    """GeGLU: ``gelu(gate, approximate) * up``, computed in fp32, rounded once to the input dtype.

    Args:
        gate: (..., H); or, when ``up`` is None, the packed (..., 2H) tensor (gate first, then up).
        up: (..., H) like ``gate``, or None (packed form).
        approximate: "none" (the erf form) or "tanh", as :func:`torch.nn.functional.gelu`.

    Returns:
        (..., H), contiguous, in the input dtype (float32, float16 or bfloat16); differentiable.
        Inputs are handled as in :func:`swiglu`.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices or ``approximate`` (nothing is computed).
    """
    if approximate not in APPROXIMATE:
        raise InvalidInputError("approximate", "one of " + ", ".join(APPROXIMATE), approximate)
    g, u, lead, hidden = _prepare(gate, up)
    return geglu_op(g, u, approximate).view(*lead, hidden)


__all__ = ["swiglu", "geglu"]
