"""Reductions over any dims: several dims, all dims, a non-last dim, prod, argmax, max.dim, var, logsumexp."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        a = x.sum(dim=(0, 2), keepdim=True)
        b = x.amax()
        c = x.prod(dim=1)
        d = torch.argmax(x, dim=1)
        e, f = torch.min(x, dim=0)
        g = x.var(dim=(1, 2), unbiased=True)
        h = torch.logsumexp(x, dim=0)
        i = torch.argmin(x)
        return a, b, c, d, e, f, g, h, i, x - x.mean(dim=(1, 2), keepdim=True)


def get_inputs():
    return [torch.randn(3, 5, 7)]


def get_init_inputs():
    return []
