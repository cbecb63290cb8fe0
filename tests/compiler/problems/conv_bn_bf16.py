"""bfloat16 conv with bias -> batch norm in inference -> silu: the fold runs in float32 and is
rounded once to bfloat16; it is computed from the parameters alone, once per parameter version."""
import torch
import torch.nn as nn

batch, channels, out_channels, size = 2, 4, 6, 7


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channels, out_channels, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(out_channels)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 2.0)
        self.bn.eval()
        self.to(torch.bfloat16)

    def forward(self, x):
        return torch.nn.functional.silu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch, channels, size, size, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
