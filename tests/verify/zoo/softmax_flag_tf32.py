"""Correct: allows tf32 at import (a GPU's matmuls and convolutions would round their operands; this
softmax has neither, and a CPU has no tf32). Expected: accepted."""
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
