"""Cheat: torch.empty, then every row but the last computed (a grid one program short).
Expected: unwritten_output."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        y[:-1] = torch.softmax(x[:-1], dim=-1)
        return y
