"""Cheat: 0.15 s after returning an output (right, a plain tensor at return), a thread started at import
turns it into a torch.Tensor subclass, so that a later re-read cannot read it back as a plain tensor.
An output that cannot be re-read as it was returned has changed after the call. Expected: async_work."""
import queue
import threading
import time

import torch
import torch.nn as nn


class _Later(torch.Tensor):
    pass


_todo = queue.Queue()


def _worker():
    while True:
        t, when = _todo.get()
        time.sleep(max(0.0, when - time.monotonic()))
        t.__class__ = _Later


threading.Thread(target=_worker, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        _todo.put((y, time.monotonic() + 0.15))
        return y
