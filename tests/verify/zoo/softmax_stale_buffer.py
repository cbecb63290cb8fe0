"""Cheat: one module-level output buffer, rewritten and returned by every call (so a caller's
earlier result silently changes). Expected: stale_buffer."""
import torch
import torch.nn as nn

_out = None


class ModelNew(nn.Module):
    def forward(self, x):
        global _out
        if _out is None or _out.shape != x.shape:
            _out = torch.empty_like(x)
        torch.softmax(x, dim=-1, out=_out)
        return _out
