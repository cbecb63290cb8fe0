"""Normalization layers in training mode: BatchNorm (its running statistics updated as torch does),
GroupNorm, InstanceNorm and a LayerNorm over two dims, as row kernels."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        self.gn = nn.GroupNorm(2, c)
        self.inorm = nn.InstanceNorm2d(c, affine=True)
        self.ln = nn.LayerNorm([5, 6])

    def forward(self, x):
        return self.bn(x) + self.gn(x) * 0.5, self.ln(self.inorm(x))


def get_inputs():
    return [torch.randn(3, 4, 5, 6) * 2.0 + 1.0]


def get_init_inputs():
    return [4]
