"""An embedding, a linear head, a class-weighted cross-entropy with ignore_index and a torch.gather of
the logits: every gather lowers to the gather family (compiler/lower_gather.py), nll_loss decomposes onto
them; solved with --strict (no ATen fallback)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(13, 16)
        self.head = nn.Linear(16, 7)
        self.register_buffer("w", torch.linspace(0.5, 1.5, 7))

    def forward(self, tokens, targets):
        logits = self.head(self.emb(tokens)).reshape(-1, 7)
        return F.cross_entropy(logits, targets.reshape(-1), weight=self.w, ignore_index=3) + \
            torch.gather(logits, 1, targets.reshape(-1, 1)).sum()


def get_inputs():
    return [torch.randint(0, 13, (4, 5)), torch.randint(0, 7, (4, 5))]


def get_init_inputs():
    return []
