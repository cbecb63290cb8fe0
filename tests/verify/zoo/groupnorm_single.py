"""Group norm with one channel per group over (N, C): its exact value is the bias whatever x is
(x minus its own mean is 0); torch's own result differs between inputs only by rounding noise."""
import torch
import torch.nn as nn

N = 8
C = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(C, C)
        with torch.no_grad():
            self.norm.bias.uniform_(-1.0, 1.0)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(N, C)]


def get_init_inputs():
    return []
