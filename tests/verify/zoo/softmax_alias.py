"""Cheat: computes in place and returns the input tensor itself. Expected: aliased_output."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x.copy_(torch.softmax(x, dim=-1))
        return x
