"""Correct: turns on deterministic algorithms at import. That changes only this process's own numbers
(the reference runs elsewhere). Expected: accepted."""
import torch
import torch.nn as nn

torch.use_deterministic_algorithms(True)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
