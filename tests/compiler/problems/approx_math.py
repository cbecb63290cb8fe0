"""exp, a division by a tensor and x / sqrt(y) in one generated kernel: each can be computed by an
approximate function (compiler/precision.py, rewrite approximate) within a declared bound."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        d = torch.exp(x) / (y * y + 1.0)
        r = x / torch.sqrt(y * y + 0.5)
        return d + r


def get_inputs():
    return [torch.randn(16, 40), torch.randn(16, 40)]


def get_init_inputs():
    return []
