"""log(exp(x)) and exp(x) * exp(y) of unbounded inputs: exp underflows to 0 (log: -inf) or
overflows (inf * 0: NaN) in the program as written for large |x|, where x itself would be finite:
the identities would change the output's inf and NaN patterns, so compiler/algebra.py does not make them."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.log(torch.exp(x)) + torch.exp(x) * torch.exp(y)


def get_inputs():
    return [torch.randn(16, 40), torch.randn(16, 40)]


def get_init_inputs():
    return []
