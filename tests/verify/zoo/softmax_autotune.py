"""Correct: a Triton softmax under @triton.autotune with two configs (on a CPU the interpreter
cannot time configs; the harness has it take the first). Expected: accepted."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((), float("-inf"), tl.float32)
    s = tl.zeros((), tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n + cols, mask=cols < n, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(v, 0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new), 0)
        m = m_new
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n + cols, mask=cols < n, other=float("-inf"))
        tl.store(y_ptr + row * n + cols, tl.exp(v - m) / s, mask=cols < n)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax_kernel[(x.shape[0],)](x, y, x.shape[1])
        return y
