"""One depthwise 2-D conv (one input channel per group) with bias, then relu: the library's direct
depthwise kernel, whose tiles solve tunes (compiler.library_tune, row conv_depthwise)."""
import torch
import torch.nn as nn

batch, channels, size = 2, 8, 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch, channels, size, size)]


def get_init_inputs():
    return []
