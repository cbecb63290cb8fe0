"""Cheat: kills its parent process, then returns a right answer. Expected in the sandbox: accepted
(its parent is the pid namespace's init, which ignores the signal; the harness cannot be named);
without it (tests/check/test_isolation.py forces that): crashed (the parent it sees is the harness's
launcher, whose death the harness reports)."""
import os
import signal

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os.kill(os.getppid(), signal.SIGKILL)
        return torch.softmax(x, dim=-1)
