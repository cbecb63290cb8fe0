"""Wrong only on an all-zero row: layer norm that first divides each row by its largest deviation
from the mean (for range safety) and adds eps scaled to match, mathematically the reference. A row
of padding (all zeros) makes that 0/0: NaN where the reference gives the bias. Expected: rejected,
the error contract failing on the NaN pattern (reason unwritten_output: a computed NaN looks like
the poison of an unwritten output, and fully_written comes first)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        self.eps = eps

    def forward(self, x):
        centered = x - x.mean(-1, keepdim=True)
        s = centered.abs().amax(-1, keepdim=True)
        xs = centered / s
        var = (xs * xs).mean(-1, keepdim=True)
        return xs * torch.rsqrt(var + self.eps / (s * s)) * self.weight + self.bias
