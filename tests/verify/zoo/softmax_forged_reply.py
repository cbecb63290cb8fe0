"""Cheat: writes its own reply line into the harness's reply channel (the child's argv names the
descriptor), naming an output file outside the exchange folder. Expected: protocol_violation (an
earlier harness stopped with an internal "crashed", recorded no failure and exited 0)."""
import json
import os
import sys

import torch
import torch.nn as nn


def _forge():
    fd = int(sys.argv[2])  # python -m warpsmith.check.child CTRL_FD REPLY_FD EXCHANGE
    os.write(fd, (json.dumps({"ok": True, "outputs": "../x.pt", "kinds": [], "observations": {}, "patches": []})
                  + "\n").encode())


class ModelNew(nn.Module):
    def forward(self, x):
        _forge()
        return torch.zeros_like(x)
