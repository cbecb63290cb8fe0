"""One strided, dilated, padded 2-D conv with bias, then relu: the library's implicit-GEMM conv launcher,
whose tiles solve tunes (compiler.library_tune)."""
import torch
import torch.nn as nn

batch, channels, out_channels, size = 2, 4, 8, 10


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channels, out_channels, 3, stride=2, padding=2, dilation=2)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch, channels, size, size)]


def get_init_inputs():
    return []
