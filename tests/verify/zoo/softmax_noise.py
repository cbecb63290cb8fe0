"""Cheat (undeclared): flips the lowest mantissa bit at random; every result is within the
contract, yet two runs differ. Expected: nondeterministic."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        flip = (torch.rand(y.shape) < 0.5).to(torch.int32)
        return (y.view(torch.int32) ^ flip).view(torch.float32)
