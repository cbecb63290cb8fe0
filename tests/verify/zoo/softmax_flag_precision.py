"""Correct: sets the float32 matmul precision to "medium" at import (no matmul here). Expected: accepted."""
import torch
import torch.nn as nn

torch.set_float32_matmul_precision("medium")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
