"""KernelBench-style problem: relu(scale * (A @ B)), the scale a constructor argument."""
import torch
import torch.nn as nn

M = 1024
N = 2048
K = 4096
scale = 0.5


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.relu(torch.matmul(a, b) * self.scale)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return [scale]
