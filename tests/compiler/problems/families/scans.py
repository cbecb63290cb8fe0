"""Scans: cumsum over a non-last dim, reversed, exclusive (narrow + cat of zeros), cumprod, masked (bool input)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, mask):
        a = torch.cumsum(x, dim=0)
        b = torch.cumsum(x.flip(1), dim=1).flip(1)
        ex = torch.cumsum(x.narrow(1, 0, x.size(1) - 1), dim=1)
        c = torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), ex), dim=1)
        d = torch.cumprod(x * 0.5 + 1.0, dim=1)
        e = torch.cumsum(x * mask, dim=1)
        return a, b, c, d, e


def get_inputs():
    return [torch.randn(6, 9), torch.rand(6, 9) > 0.5]


def get_init_inputs():
    return []
