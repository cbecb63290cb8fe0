"""Correct, and not provable: a Triton softmax whose kernel calls a plain Python function for its fill
value. Triton's interpreter runs it (the kernel is Python there); the harness does not run candidate
code outside the candidate's process, so the kernel is not proved: memory_safe is skipped (the construct
named), never a rejection. Expected: accepted."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def fill_value():
    return -float("inf")


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=fill_value())
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
