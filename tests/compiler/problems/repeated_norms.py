"""One block (a layer norm over the last dim, then a ReLU) applied to two inputs of different row
counts: its generated kernels differ only in names and in sizes their contract leaves free, so the
second block's proofs are the first's (compiler/proofs.py)."""
from __future__ import annotations

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        def block(x):
            mu = x.mean(dim=-1, keepdim=True)
            d = x - mu
            return torch.relu(d * torch.rsqrt((d * d).mean(dim=-1, keepdim=True) + 1e-5))

        return block(a), block(b)


def get_inputs():
    return [torch.randn(6, 32), torch.randn(10, 32)]


def get_init_inputs():
    return []
