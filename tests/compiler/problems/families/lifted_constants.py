"""Tensors built in forward from Python values (``torch.tensor(c)``), which torch.export lifts into
constant inputs: a scalar clamp as KernelBench level 2 writes it, one on the input's device, a
float32 scalar beside a float16 tensor (type promotion keeps float16), and a constant of one value."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    def forward(self, x, h):
        a = torch.min(x, torch.tensor(self.limit)) * 2.0
        b = torch.max(x, torch.tensor(0.0, device=x.device)) - torch.tensor([3.0, 3.0, 3.0])
        c = torch.minimum(h, torch.tensor(-0.25)) + h
        return a, b, c


def get_inputs():
    return [torch.randn(5, 3), torch.randn(4, 6).half()]


def get_init_inputs():
    return [0.5]
