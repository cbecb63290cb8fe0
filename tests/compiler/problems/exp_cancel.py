"""The difference of two nearly equal exponentials of large arguments: a relative deviation of a few
float32 ulps in each exp is hundreds of times the difference, past KernelBench's tolerance, so exp
is not approximated (compiler/precision.py refuses the rewrite and says by how much)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.exp(x * 8.0) - torch.exp(x * 8.0 + 1e-3)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
