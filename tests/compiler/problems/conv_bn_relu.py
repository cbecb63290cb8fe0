"""A ResNet-style block: conv (3x3, padding 1) -> batch norm in inference -> relu, and a strided 1x1
shortcut conv with bias added."""
import torch
import torch.nn as nn

batch, channels, out_channels, size = 2, 5, 8, 9


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 2.0)
        self.bn.eval()  # inference statistics: foldable into the conv
        self.short = nn.Conv2d(channels, out_channels, 1, stride=1)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))) + self.short(x)


def get_inputs():
    return [torch.randn(batch, channels, size, size)]


def get_init_inputs():
    return []
