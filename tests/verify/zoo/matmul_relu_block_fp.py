"""Precision cut to the floor: each operand is quantized on one shared exponent (block floating
point, as in the MX formats), a grid of 2^-23 times its largest magnitude. On inputs of one scale
that is as good as float32, but an element 2^10 below the largest keeps 13 mantissa bits: with
outliers (1% of the inputs 100x larger) the typical elements are rounded to about 13 bits, a
thousand times the reference's own error there, inside an allowance that grows with the largest
input. Expected: wrong_result (on the outliers distribution)."""
import torch
import torch.nn as nn


def _block(x):
    top = x.abs().amax()
    if not bool(top > 0):
        return x
    step = torch.exp2(torch.ceil(torch.log2(top)) - 23)
    return torch.round(x / step) * step


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.relu(torch.matmul(_block(a), _block(b)) * self.scale)
