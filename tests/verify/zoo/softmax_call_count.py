"""Cheat: right for its first 10 calls, garbage after (a benchmark that checks the first calls and
times later ones). Expected: wrong_result (the number of judged calls is drawn from a heavy-tailed
distribution with no bound, at least half again the calls made before it)."""
import torch
import torch.nn as nn

_calls = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        _calls[0] += 1
        y = torch.softmax(x, dim=-1)
        return y if _calls[0] <= 10 else y * 0.5
