"""Cheat: kills its parent process, then returns a right answer. Expected: crashed (the parent it
can see is the harness's launcher, whose death the harness reports)."""
import os
import signal

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os.kill(os.getppid(), signal.SIGKILL)
        return torch.softmax(x, dim=-1)
