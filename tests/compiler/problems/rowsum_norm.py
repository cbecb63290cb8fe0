"""Row-sum normalization fused with its prologue and epilogue: exp(x) / exp(x).sum(-1) * 2."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.abs(x) + 0.1
        return e / e.sum(dim=-1, keepdim=True) * 2.0 + x.amax(-1, keepdim=True)


def get_inputs():
    return [torch.randn(7, 33)]


def get_init_inputs():
    return []
