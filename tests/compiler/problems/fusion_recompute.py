"""A cheap producer read by two kernels of different domains: the sigmoid of a (40,) gate scales a
row sum of x (6, 40) and a (3, 40) y. Written once and read back by both, or recomputed in each."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, g):
        s = torch.sigmoid(g) * 2.0
        return (x * s).sum(-1), y * s + 1.0


def get_inputs():
    return [torch.randn(6, 40), torch.randn(3, 40), torch.randn(40)]


def get_init_inputs():
    return []
