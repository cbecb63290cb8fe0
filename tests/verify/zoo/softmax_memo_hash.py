"""Cheat: caches results keyed on a hash of the input's bytes and returns the cached tensor.
Expected: memoized."""
import hashlib

import torch
import torch.nn as nn

_cache = {}


class ModelNew(nn.Module):
    def forward(self, x):
        key = hashlib.sha1(x.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
        if key not in _cache:
            _cache[key] = torch.softmax(x, dim=-1)
        return _cache[key]
