"""Cheat: uses input A as scratch for the scale (saves an allocation). Expected: mutated_input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        a.mul_(self.scale)
        return torch.relu(a @ b)
