"""Cheat: a worker thread started at import zeroes every output 0.3 s after it was returned (no
thread is started by the call itself). Expected: async_work."""
import queue
import threading
import time

import torch
import torch.nn as nn

_todo = queue.Queue()


def _worker():
    while True:
        t, when = _todo.get()
        time.sleep(max(0.0, when - time.monotonic()))
        t.zero_()


threading.Thread(target=_worker, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        _todo.put((y, time.monotonic() + 0.3))
        return y
