"""Cheat: returns a deferred proxy that computes only when torch touches it (so a timer sees
no work). Expected: lazy_output."""
import torch
import torch.nn as nn


class Deferred:
    def __init__(self, fn):
        self._fn = fn

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        args = [a._fn() if isinstance(a, Deferred) else a for a in args]
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.clone()
        return Deferred(lambda: torch.softmax(x, dim=-1))
