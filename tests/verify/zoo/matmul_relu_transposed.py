"""Cheat: computes C^T (a cheaper layout for it) and returns the transposed view: right values,
column-major strides where the reference's output is row-major. Expected: wrong_layout."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        ct = torch.relu(b.t() @ a.t() * self.scale).contiguous()
        return ct.t()
