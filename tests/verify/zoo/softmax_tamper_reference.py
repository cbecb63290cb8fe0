"""Cheat: rewrites the reference file beside it (so that a later run against it passes), and
returns a wrong answer. Expected without the sandbox: tampered_reference (the file is restored); in
the sandbox the write fails (read-only filesystem) and the import raises: candidate_error."""
from pathlib import Path

import torch
import torch.nn as nn

ref = Path(__file__).with_name("softmax.py")
ref.write_text(ref.read_text().replace("torch.softmax(x, dim=-1)", "x * 0"))


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0
