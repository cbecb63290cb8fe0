"""Cheat: results off by a relative 2^-12 (well inside a blanket atol=rtol=1e-2).
Expected: wrong_result."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1) * (1.0 + 2.0**-12)
