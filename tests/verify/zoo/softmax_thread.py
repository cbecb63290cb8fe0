"""Cheat: returns while a thread is still writing the last row (a timer stops early).
Expected: async_work."""
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        y[:-1] = torch.softmax(x[:-1], dim=-1)

        def finish():
            time.sleep(0.01)
            y[-1] = torch.softmax(x[-1], dim=-1)

        threading.Thread(target=finish, daemon=True).start()
        return y
