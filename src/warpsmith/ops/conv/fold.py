"""Batch norm in inference folded into the preceding convolution's weight and bias."""
from __future__ import annotations

from typing import Optional

import torch

from ...core.errors import InvalidInputError


def fold_batch_norm(conv_w: torch.Tensor, conv_b: Optional[torch.Tensor], bn_mean: torch.Tensor,
                    bn_var: torch.Tensor, bn_w: Optional[torch.Tensor], bn_b: Optional[torch.Tensor],
                    eps: float, transposed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``bn(conv(x, w, b))`` in eval mode equals ``conv(x, w', b')`` with, per output channel ``k``,
    ``s = bn_w / sqrt(var + eps)``, ``w'[k] = s w[k]``, ``b' = s (b - mean) + bn_b``.

    Computed in float64 and rounded once to the weight's dtype.

    Args:
        conv_w: (C_out, C_in/G, window...), or (C_in, C_out/G, window...) with ``transposed``.
        conv_b: optional (C_out,).
        bn_mean, bn_var: running statistics, (C_out,).
        bn_w, bn_b: the affine parameters (C_out,), or None (1 and 0).
        eps: the batch norm's eps.
        transposed: the weight is a transposed conv's (then groups must be 1).

    Returns:
        (w', b') in ``conv_w``'s dtype.
    """
    cout = conv_w.shape[1] if transposed else conv_w.shape[0]
    for name, t in (("bn_mean", bn_mean), ("bn_var", bn_var), ("bn_w", bn_w), ("bn_b", bn_b), ("conv_b", conv_b)):
        if t is not None and tuple(t.shape) != (cout,):
            raise InvalidInputError(f"shape of {name}", f"({cout},) (the conv's output channels)", tuple(t.shape))
    s = (bn_w.double() if bn_w is not None else torch.ones(cout, dtype=torch.float64, device=conv_w.device))
    s = s / torch.sqrt(bn_var.double() + eps)
    shift = (bn_b.double() if bn_b is not None else torch.zeros_like(s))
    b = conv_b.double() if conv_b is not None else torch.zeros_like(s)
    view = (1, -1) + (1,) * (conv_w.dim() - 2) if transposed else (-1,) + (1,) * (conv_w.dim() - 1)
    w = (conv_w.double() * s.reshape(view)).to(conv_w.dtype)
    return w, (s * (b - bn_mean.double()) + shift).to(conv_w.dtype)


__all__ = ["fold_batch_norm"]
