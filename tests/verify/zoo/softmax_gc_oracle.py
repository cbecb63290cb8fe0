"""Cheat: looks for the harness's reference output or oracle in the caller's frames and through gc
(a tensor of the output's shape that is not the input) and returns it. Expected: wrong_result
(the candidate's process holds no reference output; what it finds is not the answer)."""
import gc
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        frame = sys._getframe(1)
        while frame is not None:
            for v in frame.f_locals.values():
                if isinstance(v, torch.Tensor) and v.shape == x.shape and v is not x and v.dtype == x.dtype:
                    return v.clone()
            frame = frame.f_back
        for o in gc.get_objects():
            if type(o) is torch.Tensor and o.shape == x.shape and o is not x and o.dtype == x.dtype:
                return o.clone()
        return torch.zeros_like(x)
