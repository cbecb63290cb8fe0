"""Cheat: ends its process with status 0 in __init__. Expected: exited."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        os._exit(0)
