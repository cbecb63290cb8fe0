"""Cheat-free but wrong: creates bias before weight, so its parameters are not the reference's
(identical seeding only helps a candidate that creates parameters in the same order).
Expected: wrong_result."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.weight = nn.Parameter(torch.randn(features))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
