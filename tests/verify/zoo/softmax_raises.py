"""Broken: raises on every call. Expected: candidate_error."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise RuntimeError("kernel launch failed: too many resources requested")
