"""Correct: sets the default dtype to float64 at import, and still returns float32 (softmax keeps its
input's dtype). Expected: accepted."""
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
