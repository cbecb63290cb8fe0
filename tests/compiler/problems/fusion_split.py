"""Long reductions over few rows: a (2, 131072) sum of squares over dim 1 (two rows) and the mean
of |y| over all of a (256, 512) tensor (one row): each a split reduction when predicted cheaper."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (x * x).sum(dim=1), y.abs().mean()


def get_inputs():
    return [torch.randn(2, 131072), torch.randn(256, 512)]


def get_init_inputs():
    return []
