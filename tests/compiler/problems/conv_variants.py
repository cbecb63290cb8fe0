"""Convolutions torch has, each lowered to the library: a transposed 1-D conv with output padding
then gelu, a grouped dilated 3-D conv with "same" padding, and a depthwise 2-D conv with stride 2."""
import torch
import torch.nn as nn

batch = 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.vol = nn.Conv3d(4, 6, 3, padding="same", dilation=(1, 2, 1), groups=2)
        self.dw = nn.Conv2d(3, 3, 3, stride=2, padding=1, groups=3)

    def forward(self, z, v, x):
        return torch.nn.functional.gelu(self.up(z)), self.vol(v), self.dw(x)


def get_inputs():
    return [torch.randn(batch, 4, 7), torch.randn(batch, 4, 5, 6, 5), torch.randn(batch, 3, 9, 8)]


def get_init_inputs():
    return []
