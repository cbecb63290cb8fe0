"""Scans: a cumsum over a non-last dim, a reverse cumsum (flip, cumsum, flip) and a cumprod."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = torch.cumsum(x, dim=1) * 0.5
        b = torch.flip(torch.cumsum(torch.flip(x, [2]), 2), [2])
        return a + b, torch.cumprod(torch.sigmoid(x), dim=-1)


def get_inputs():
    return [torch.randn(3, 6, 5)]


def get_init_inputs():
    return []
