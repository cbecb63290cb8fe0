"""Causal attention written by hand, the mask as masked_fill of triu: lowered to the library's flash
attention with a causal window (compiler/lower_softmax_attention.py)."""
import torch
import torch.nn as nn

B, H, S, D = 1, 2, 16, 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) / (D ** 0.5)
        mask = torch.triu(torch.ones(S, S, dtype=torch.bool, device=q.device), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    return [torch.randn(B, H, S, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)]


def get_init_inputs():
    return []
