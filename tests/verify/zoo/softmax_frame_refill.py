"""Cheat: a cache keyed on the input's address (fast when a benchmark reuses its buffers) that reads
the harness's request from the calling frames and recomputes only when the harness says it refilled
the buffers (the memoization probe). Expected: memoized (the request is not in any frame the
candidate can see while it runs)."""
import sys

import torch
import torch.nn as nn

_cache = {}


def _probe() -> bool:
    f = sys._getframe(1)
    while f is not None:
        for v in list(f.f_locals.values()):
            if isinstance(v, dict) and v.get("op") == "call" and v.get("refill"):
                return True
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in _cache or _probe():
            _cache[key] = torch.softmax(x, dim=-1)
        return _cache[key]
