"""Cheat: caches results keyed on the input's address and shape (fast when a benchmark reuses
its input buffers). Expected: memoized."""
import torch
import torch.nn as nn

_cache = {}


class ModelNew(nn.Module):
    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in _cache:
            _cache[key] = torch.softmax(x, dim=-1)
        return _cache[key]
