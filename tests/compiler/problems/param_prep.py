"""Work on the parameters alone inside forward: a weight scaled by another parameter, a bias
doubled, and a bias broadcast to the batch before it is doubled (a value bigger than its parameter)."""
import torch
import torch.nn as nn

M = 16
K = 24
N = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(K, N) / K ** 0.5)
        self.gain = nn.Parameter(torch.rand(K, N) + 0.5)
        self.bias = nn.Parameter(torch.randn(N))
        self.shift = nn.Parameter(torch.randn(N))

    def forward(self, x):
        y = x @ (self.w * self.gain)
        return y + self.bias * 2 + self.shift.expand(M, N) * 3


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return []
