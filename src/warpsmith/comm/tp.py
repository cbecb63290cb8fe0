"""A row-parallel linear layer whose all-reduce is warpsmith.comm's: each rank holds the columns
``[lo, hi)`` of the weight (its slice of the input features), computes its partial product, and the
partial products are summed across the group; the bias is added once, after the sum. With
``residual`` and ``norm_weight`` the sum, the residual add and RMSNorm are one fused kernel."""
from __future__ import annotations

from typing import Any

import torch

from ..core.errors import InvalidInputError
from .api import all_reduce, all_reduce_add_rms_norm


class RowParallelLinear(torch.nn.Module):
    """``y = all_reduce(x_shard @ W[:, lo:hi]^T) + b``: the tensor-parallel layer after attention and
    after the MLP's down projection.

    Args:
        weight_shard: [out_features, in_features / W (this rank's columns)].
        bias: [out_features] or None (added once, after the all-reduce).
        group: the tensor-parallel process group (None: the default group).
    """

    def __init__(self, weight_shard: torch.Tensor, bias: torch.Tensor | None = None, group: Any = None) -> None:
        super().__init__()
        if weight_shard.dim() != 2:
            raise InvalidInputError("RowParallelLinear weight shard", "a 2-d tensor [out, in_shard]",
                                    tuple(weight_shard.shape))
        if bias is not None and bias.shape != (weight_shard.shape[0],):
            raise InvalidInputError("RowParallelLinear bias", f"shape ({weight_shard.shape[0]},)", tuple(bias.shape))
        self.weight = torch.nn.Parameter(weight_shard, requires_grad=False)
        self.bias = None if bias is None else torch.nn.Parameter(bias, requires_grad=False)
        self.group = group

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, rank: int, world: int, group: Any = None) -> "RowParallelLinear":
        """This rank's layer from a whole ``nn.Linear`` (columns split as ``torch.chunk`` splits)."""
        cols = torch.chunk(linear.weight.detach(), world, dim=1)
        if len(cols) != world:
            raise InvalidInputError("RowParallelLinear in_features", f"at least {world} (one per rank)",
                                    linear.in_features)
        bias = None if linear.bias is None else linear.bias.detach().clone()
        return cls(cols[rank].contiguous(), bias, group)

    def forward(self, x_shard: torch.Tensor, residual: torch.Tensor | None = None,
                norm_weight: torch.Tensor | None = None, eps: float = 1e-6) -> Any:
        """``x_shard``: [..., in_shard]. Returns ``y``; with ``residual`` and ``norm_weight``
        (bias must be None then) returns ``(rms_norm(y + residual) * norm_weight, y + residual)``."""
        partial = torch.nn.functional.linear(x_shard, self.weight)
        if residual is None:
            y = all_reduce(partial, self.group)
            return y if self.bias is None else y + self.bias
        if self.bias is not None or norm_weight is None:
            raise InvalidInputError("RowParallelLinear fused residual + RMSNorm", "no bias and a norm_weight",
                                    f"bias={self.bias is not None}, norm_weight={norm_weight is not None}")
        shape = partial.shape
        y, s = all_reduce_add_rms_norm(partial.reshape(-1, shape[-1]), residual.reshape(-1, shape[-1]),
                                       norm_weight, eps, self.group)
        return y.reshape(shape), s.reshape(shape)
