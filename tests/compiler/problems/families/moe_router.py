"""A mixture-of-experts router (Mixtral's): linear -> softmax (fp32) -> top-2 -> renormalized weights,
and an expert-choice variant that sorts each expert's scores (``torch.sort``)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d=32, experts=12, k=2):
        super().__init__()
        self.gate = nn.Linear(d, experts, bias=False)
        self.k = k

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1, dtype=torch.float)
        w, idx = torch.topk(probs, self.k, dim=-1)
        w = (w / w.sum(-1, keepdim=True)).to(x.dtype)
        scores, order = torch.sort(probs.reshape(-1, probs.shape[-1]).t(), dim=-1, descending=True)
        return w, idx, scores[:, :4], order[:, :4]


def get_inputs():
    return [torch.randn(2, 5, 32)]


def get_init_inputs():
    return []
