"""Index-computed values: triu / tril (arange masks), flip, a cat with a constant piece, integer arithmetic."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        u = torch.triu(a @ b)
        l = torch.tril(a, diagonal=-1)
        f = torch.flip(a, dims=(0, 1)) + 1.0
        c = torch.cat((a, torch.ones_like(a[:, :2]) * 3.0, b[:3].t()), dim=1)
        i = (torch.arange(a.shape[1]) * 2 + 1).float() * a
        return u, l, f, c, i


def get_inputs():
    return [torch.randn(7, 7), torch.randn(7, 7)]


def get_init_inputs():
    return []
