"""Softmax and log-softmax over dims other than the last (the library's softmax takes the last dim):
decomposed into max, exp, sum and a division that the codegen fuses; fp16 upcasts as torch does."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, h):
        a = torch.softmax(x, dim=1)  # over the channels of a 5-D tensor, as after a Conv3d
        b = torch.log_softmax(x, dim=0)
        c = torch.softmax(h, dim=-2)
        return a, b, c, torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(2, 5, 3, 4, 6), torch.randn(3, 7, 5, dtype=torch.float16)]


def get_init_inputs():
    return []
