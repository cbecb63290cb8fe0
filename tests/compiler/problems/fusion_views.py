"""Views between fusable ops: a permute between a pointwise chain and a row sum, a transpose between
two pointwise ops with a broadcast operand, an unsqueeze + expand into a product."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, b):
        a = torch.relu(x * 2.0 + 1.0).permute(0, 2, 1).sum(-1)
        c = torch.tanh(y - b).transpose(0, 1) * 3.0
        return a, c


def get_inputs():
    return [torch.randn(3, 5, 7), torch.randn(6, 4), torch.randn(4)]


def get_init_inputs():
    return []
