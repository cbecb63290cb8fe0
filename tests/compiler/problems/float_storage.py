"""The float32 twin of half_storage.py: its centred values could be stored in bfloat16, but that
rounding is far outside KernelBench's float32 tolerance, so the rewrite is refused."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(48))

    def forward(self, x):
        h = x * 1.7
        c = h - h.mean(0, keepdim=True)
        return (torch.tanh(c) * self.scale).sum(1)


def get_inputs():
    return [torch.randn(64, 48)]


def get_init_inputs():
    return []
