"""Recurrent layers (torch.export path): a single-layer LSTM (sequence-first) and GRU (batch-first)
with given initial states, and an Elman RNN (relu) without biases, each unrolled into a loop of fused
steps."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(10, 12)
        self.gru = nn.GRU(10, 12, batch_first=True)
        self.rnn = nn.RNN(10, 6, nonlinearity="relu", bias=False)

    def forward(self, xs, h, c):
        y, (hn, cn) = self.lstm(xs, (h, c))
        z, hz = self.gru(xs.transpose(0, 1), h)
        r, hr = self.rnn(xs)
        return y, hn, cn, z, hz, r, hr


def get_inputs():
    return [torch.randn(5, 3, 10), torch.randn(1, 3, 12), torch.randn(1, 3, 12)]


def get_init_inputs():
    return []
