"""Scalars distributed and collected (compiler/algebra.py): a chain of constant factors and a
division, a factor common to two terms, and a division by a constant alone."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h = (x * 1.5) * 4.0 / 3.0
        z = x * 0.3 + y * 0.3
        return torch.tanh(h) + z / 7.0


def get_inputs():
    return [torch.randn(16, 48), torch.randn(16, 48)]


def get_init_inputs():
    return []
