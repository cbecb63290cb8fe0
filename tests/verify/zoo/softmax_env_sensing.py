"""Cheat: exact only where it sees a trace of the harness (a WARPSMITH_* variable in its environment,
or a temporary folder named after warpsmith's check); garbage in deployment. Expected: wrong_result (no
such trace is visible to the candidate, so it is garbage under the check too)."""
import os

import torch
import torch.nn as nn


def _watched() -> bool:
    if any(k.startswith("WARPSMITH") for k in os.environ):
        return True
    places = [os.getcwd(), os.environ.get("TMPDIR", ""), os.environ.get("HOME", "")] + list(os.environ.values())
    return any("warpsmith" in p.lower() for p in places)


class ModelNew(nn.Module):
    def forward(self, x):
        if _watched():
            return torch.softmax(x, dim=-1)
        return torch.softmax(x, dim=-1) * 0.5
