"""exp/log identities (compiler/algebra.py): log(exp(t)), exp(t) * exp(s), log(exp(t) * w), with
arguments the compiler can bound (tanh, sigmoid): exp neither overflows nor underflows there, so
the rewritten program has the reference's inf and NaN patterns (the check compares them)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        t = torch.tanh(x) * 4.0
        s = torch.tanh(y) * 0.5
        a = torch.log(torch.exp(t))
        b = torch.exp(t) * torch.exp(s)
        c = torch.log(torch.exp(t) * (torch.sigmoid(y) + 0.5))
        return a + b + c


def get_inputs():
    return [torch.randn(16, 40), torch.randn(16, 40)]


def get_init_inputs():
    return []
