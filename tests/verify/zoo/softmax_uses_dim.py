"""Correct only if --set reaches the candidate's own module constants too: it checks the input
against its copy of ``dim``."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 16384
row_block = dim * 2  # a derived constant: follows --set because the source is rewritten


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.shape[-1] != dim or row_block != 2 * x.shape[-1]:
            raise ValueError(f"expected rows of {dim}, got {x.shape[-1]}")
        return torch.softmax(x, dim=-1)
