"""Cheat: overrides aten ops with torch.library so that a comparison made in its process (x - y,
torch.equal, allclose) sees no difference, and returns a result 10% off. Expected: wrong_result (the
comparison is made in the harness's own process)."""
import torch
import torch.nn as nn

_lib = torch.library.Library("aten", "IMPL")
_lib.impl("sub.Tensor", lambda a, b, alpha=1: torch.zeros(torch.broadcast_shapes(a.shape, b.shape)), "CPU")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1) * 0.9
