"""Cheat: computes and returns float64 (more accurate, and twice the bytes). Expected: wrong_dtype."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x.double(), dim=-1)
