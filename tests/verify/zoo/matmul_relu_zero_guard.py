"""Wrong only on exact zeros: a "division-safe" kernel that replaces every exact 0 of A by 1e-3
before multiplying (a guard copied from a kernel that divides by A). Random normal inputs never
hold an exact 0, so only drawn zeros (ReLU activations, padding) show it. Expected: wrong_result."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        a = torch.where(a == 0, torch.full_like(a, 1e-3), a)
        return torch.relu(torch.matmul(a, b) * self.scale)
