"""nn.Linear (with bias) on a 3-D input, scaled by a constant, then the mean over the features
(keepdim=False): the mean of the GEMM's output is the GEMM of the weight's mean."""
import torch
import torch.nn as nn

B = 4
T = 8
K = 32
N = 48


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(K, N)

    def forward(self, x):
        return (self.proj(x) * 0.5).mean(dim=-1)


def get_inputs():
    return [torch.randn(B, T, K)]


def get_init_inputs():
    return []
