"""A 2-D max pool over many small planes (2 x 4 channels of 32 x 32): the library's pool launcher, whose
(BLOCK, ROWS) tiles solve tunes (compiler.library_tune)."""
import torch
import torch.nn as nn

batch, channels, size = 2, 4, 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(2, stride=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch, channels, size, size)]


def get_init_inputs():
    return []
