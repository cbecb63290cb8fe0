"""Correct: softmax as exp(x - logsumexp(x)), a standard algorithm whose error grows with
|logsumexp| (the op's own conditioning) where torch's is smaller. Expected: accepted."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))
