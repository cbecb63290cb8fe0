"""index_select, gather, x[idx], index_add, scatter_add and scatter (tensor and scalar sources): each
lowers to the gather family (compiler/lower_gather.py); solved with --strict (no ATen fallback)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(7, 6))

    def forward(self, x, rows, pick, idx3):
        a = torch.index_select(x, 1, rows)
        b = torch.gather(x, 2, pick)
        c = self.table[rows]
        d = torch.index_add(x, 1, rows, a)
        e = torch.scatter_add(x, 2, idx3, torch.ones_like(x))
        f = torch.scatter(x, 1, pick[:, :1, :], -1.0)
        return a.sum() + b.sum() + c.sum(), d, e, f


def get_inputs():
    return [torch.randn(4, 7, 6), torch.tensor([6, 0, 6]), torch.randint(0, 6, (4, 7, 2)),
            torch.randint(0, 6, (4, 7, 6))]


def get_init_inputs():
    return []
