"""Cheat: enters autocast (bfloat16) at import, so that a reference run in the same process would
run in bfloat16 and allow a bfloat16-sized error, and computes in bfloat16. Expected: wrong_result."""
import torch
import torch.nn as nn

torch.autocast("cpu", dtype=torch.bfloat16).__enter__()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x.bfloat16(), dim=-1).float()
