"""A chain of matrix products, (x @ A) @ B, where x has more rows than A and B have:
written left to right it costs 2*M*K*L + 2*M*L*N flops; x @ (A @ B) costs 2*K*L*N + 2*M*K*N."""
import torch
import torch.nn as nn

M = 128
K = 16
L = 128
N = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.randn(K, L) / K ** 0.5)
        self.b = nn.Parameter(torch.randn(L, N) / L ** 0.5)

    def forward(self, x):
        return torch.relu((x @ self.a) @ self.b)


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return []
