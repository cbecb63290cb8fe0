"""KernelBench-style problem whose reference raises on its own inputs once --set shrinks them
(a dilated kernel no longer fits): ModelNew = Model, checked with --set length=4, is unusable
input (exit 2, reference_error), not the candidate's fault."""
import torch
import torch.nn as nn

length = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 3, kernel_size=3, dilation=4)

    def forward(self, x):
        return self.conv(x)


ModelNew = Model


def get_inputs():
    return [torch.randn(2, 2, length)]


def get_init_inputs():
    return []
