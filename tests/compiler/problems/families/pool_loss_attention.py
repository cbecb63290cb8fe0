"""Library kernels reached by lowering: max and avg pooling, cross-entropy, attention (SDPA, causal),
and losses that decompose into generated kernels (MSE, smooth L1, KL divergence, triplet margin)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mp = nn.MaxPool2d(3, stride=2, padding=1)
        self.ap = nn.AvgPool1d(3, stride=2, ceil_mode=True, count_include_pad=False, padding=1)
        self.triplet = nn.TripletMarginLoss(margin=0.5)

    def forward(self, img, seq, logits, target, q, k, v, p, t):
        losses = F.mse_loss(p, t) + F.smooth_l1_loss(p, t) + F.kl_div(F.log_softmax(p, -1), t.softmax(-1),
                                                                      reduction="batchmean")
        return (self.mp(img), self.ap(seq), F.cross_entropy(logits, target),
                F.scaled_dot_product_attention(q, k, v, is_causal=True), losses + self.triplet(p, t, p.flip(0)))


def get_inputs():
    return [torch.randn(2, 3, 9, 10), torch.randn(2, 3, 11), torch.randn(6, 13), torch.randint(0, 13, (6,)),
            torch.randn(2, 2, 9, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16),
            torch.randn(4, 10), torch.randn(4, 10)]


def get_init_inputs():
    return []
