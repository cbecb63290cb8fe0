"""KernelBench-style problem whose output is an expanded (stride-0) view: row sums broadcast
along the row. Checked against itself (ModelNew = Model) it must be accepted."""
import torch
import torch.nn as nn

rows = 5
cols = 12


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=-1, keepdim=True).expand(-1, x.shape[-1])


ModelNew = Model


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
