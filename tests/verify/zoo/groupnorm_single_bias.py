"""Correct: group norm over one element per group is its bias, the same output for every input
(parameters equal to the reference's by seeding alone)."""
import torch
import torch.nn as nn

C = 16


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(C, C)
        with torch.no_grad():
            self.norm.bias.uniform_(-1.0, 1.0)

    def forward(self, x):
        return self.norm.bias.detach().expand(x.shape).clone()
