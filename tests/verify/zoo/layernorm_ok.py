"""Correct: layer norm written out by hand; parameters created in the reference's order, so the
harness's seeding gives them the reference's values."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(-1, keepdim=True)
        return centered * torch.rsqrt(var + self.eps) * self.weight + self.bias
