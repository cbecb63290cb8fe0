"""Cheat: returns the uniform distribution, right only for constant rows. Expected: constant_output."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.full_like(x, 1.0 / x.shape[-1])
