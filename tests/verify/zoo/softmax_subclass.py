"""Cheat: returns a torch.Tensor subclass (whose methods could lie to a checker).
Expected: tensor_subclass."""
import torch
import torch.nn as nn


class Agreeable(torch.Tensor):
    def __eq__(self, other):
        return torch.ones_like(self.as_subclass(torch.Tensor), dtype=torch.bool)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1).as_subclass(Agreeable)
