"""nn.Linear, a constant added, then the sum over the features: adding a constant does not commute
with the sum (sum(y + c) = sum(y) + N c), so the reduction is not folded into the weight."""
import torch
import torch.nn as nn

M = 16
K = 32
N = 40


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(K, N)

    def forward(self, x):
        return (self.proj(x) + 1.0).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return []
