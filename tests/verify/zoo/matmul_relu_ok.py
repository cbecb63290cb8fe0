"""Correct: relu first, then the (exact, power-of-two) scale."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.clamp_min(a @ b, 0.0) * self.scale
