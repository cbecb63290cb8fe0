"""Cheat: ends its process with status 0 from forward, after registering an atexit hook and
replacing sys.exit (neither reaches the harness). Expected: exited."""
import atexit
import os
import sys

import torch
import torch.nn as nn

atexit.register(lambda: os._exit(0))


class ModelNew(nn.Module):
    def forward(self, x):
        sys.exit = lambda *a: None
        os._exit(0)
