"""A softmax written out over rows longer than a kernel holds (4500): one row kernel walked in chunks,
in three passes (max, sum, the normalized values); its chunk (BLOCK_N), warps and stages are searched."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(2, 4500) * 2.0]


def get_init_inputs():
    return []
