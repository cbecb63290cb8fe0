"""Correct and declared nondeterministic: flips the lowest mantissa bit at random (within one ulp).
Expected: accepted, with the determinism check skipped (declared)."""
import torch
import torch.nn as nn

WARPSMITH_NONDETERMINISTIC = True


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        flip = (torch.rand(y.shape) < 0.5).to(torch.int32)
        return (y.view(torch.int32) ^ flip).view(torch.float32)
