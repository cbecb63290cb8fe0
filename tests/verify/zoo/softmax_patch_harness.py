"""Cheat: patches the harness's own comparison so that everything passes. Expected: monkey_patch."""
import torch
import torch.nn as nn

import warpsmith.check.compare as compare
import warpsmith.check.hardened as hardened

compare.judge = hardened.judge = lambda *args, **kwargs: (True, "patched")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
