"""Cheat (or a heap-corrupting kernel): the process aborts with SIGABRT in forward. Expected: crashed."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os.abort()
