"""KernelBench level-2 style: a nested MLP, transposes, a non-last-dim reduction, dropout(p=0)."""
import torch
import torch.nn as nn

batch_size = 4
seq = 6
d = 32


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d, bias=False)
        self.norm = nn.LayerNorm(d)
        self.register_buffer("scale", torch.rand(d))

    def forward(self, x):
        h = self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))
        return x + h * self.scale


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.blocks = nn.Sequential(Block(d), Block(d))
        self.drop = nn.Dropout(0.0)
        self.head = nn.Parameter(torch.randn(d, 8))

    def forward(self, x):
        y = self.drop(self.blocks(x))
        z = torch.matmul(y, self.head)             # 3-D @ 2-D
        s = z.transpose(1, 2).sum(dim=2)            # reduction over a non-last dim of the original
        return torch.log_softmax(z, dim=-1).mean(dim=1) + s.clamp(min=-1.0, max=1.0)


def get_inputs():
    return [torch.randn(batch_size, seq, d)]


def get_init_inputs():
    return [d]
