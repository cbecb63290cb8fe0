"""Rejected (unsafe_kernel): a split-K GEMM whose two programs per output tile each load the C tile, add
their partial product and store it back with a plain ``tl.store``. Under Triton's CPU interpreter the
programs run one after another, so the sum is exact and every other check passes; on a GPU the two
programs race (one partial sum is lost). The prover, on the launch the harness observed, finds the two
programs storing one element."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def splitk_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(pid_k * BK, K, SPLIT * BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    c_ptrs = c_ptr + rm[:, None] * scm + rn[None, :] * scn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    c = tl.load(c_ptrs, mask=mask, other=0.0)
    tl.store(c_ptrs, c + acc, mask=mask)  # not atomic: the other split's program stores this tile too


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.zeros(M, N, dtype=torch.float32, device=a.device)
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16), 2)
        splitk_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), BM=16, BN=16, BK=16, SPLIT=2)
        return torch.clamp_min(c, 0.0) * self.scale
