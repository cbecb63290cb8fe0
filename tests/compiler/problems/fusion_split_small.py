"""fusion_split.py at CPU-interpreter sizes: a (2, 4096) sum of squares over dim 1 and the mean of |y|
over a (32, 128) tensor. Split only under the tests' lowered thresholds and launch cost (a row of
4096 is not long on a GPU); the verified program has the split reductions' kernel shape."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (x * x).sum(dim=1), y.abs().mean()


def get_inputs():
    return [torch.randn(2, 4096), torch.randn(32, 128)]


def get_init_inputs():
    return []
