"""Attention with masks (torch.export path): a sliding-window band built in forward from ``arange``
(lowered to the kernel's window, no mask read), a causal ``tril`` of ones (likewise), and a boolean
padding mask given as an input (read as an additive bias); GQA (2 query heads per KV head)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v, keep):
        L, S = q.shape[2], k.shape[2]
        i = torch.arange(L)
        j = torch.arange(S)
        window = (j[None, :] <= i[:, None]) & (j[None, :] > i[:, None] - 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=window, enable_gqa=True)
        causal = torch.ones(L, S, dtype=torch.bool).tril()
        b = F.scaled_dot_product_attention(q, k, v, attn_mask=causal, enable_gqa=True)
        c = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :], enable_gqa=True)
        return a, b, c


def get_inputs():
    keep = torch.ones(2, 11, dtype=torch.bool)
    keep[1, 7:] = False
    return [torch.randn(2, 4, 11, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16), keep]


def get_init_inputs():
    return []
