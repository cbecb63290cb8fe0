"""KernelBench-style problem with dropout in training mode: its reference differs from itself
on identical inputs. Checked against itself it is unusable (exit 2) unless run with --eval."""
import torch
import torch.nn as nn

rows = 6
cols = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(torch.relu(x))


ModelNew = Model


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
