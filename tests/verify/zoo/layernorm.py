"""KernelBench-style problem: layer norm with learned weight and bias (random at construction)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 512
features = 4096
eps = 1e-5


class Model(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, eps]
