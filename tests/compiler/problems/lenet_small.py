"""KernelBench level 3's 4_LeNet5 at tiny sizes: conv -> relu -> max pool, twice, then three linear
layers. One program holds the library's conv kernel and its matmul kernel, whose modules each define
a ``@triton.jit`` helper named ``store_tile`` (the name clash issue 29 found)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2
num_classes = 10


class Model(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=5, stride=1)
        self.conv2 = nn.Conv2d(4, 8, kernel_size=3, stride=1)
        self.fc1 = nn.Linear(8 * 2 * 2, 24)
        self.fc2 = nn.Linear(24, 16)
        self.fc3 = nn.Linear(16, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), kernel_size=2, stride=2)
        x = F.max_pool2d(F.relu(self.conv2(x)), kernel_size=2, stride=2)
        x = x.view(-1, 8 * 2 * 2)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def get_inputs():
    return [torch.randn(batch_size, 1, 16, 16)]


def get_init_inputs():
    return [num_classes]
