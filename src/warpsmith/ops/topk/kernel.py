"""Top-k by repeated selection over a row held in registers (only ``@triton.jit`` code).

One program per row of N <= BLOCK_N elements: K times, the best element left is found (a max
reduction), the lowest index holding it is taken (a min reduction), and it is removed from the row.
So the k values come out sorted (best first) and **ties go to the lowest index first**: what a stable
sort gives (``torch.sort(stable=True)``); ``torch.topk`` leaves the order of equal values unspecified
(the CPU kernel returns e.g. indices 1, 6, 4 for three equal maxima), so indices may differ from it
between equal values, never the values. NaN ranks above every number, as in torch: first when
``LARGEST``, last otherwise, NaNs among themselves by index. Values are copied exactly (read in fp32,
which holds every fp16 and bf16 value, and stored back in the input dtype).

Work: K passes over the row in registers (O(K N) comparisons); bytes: N read, 2K written per row.
"""
from ...core._triton import tl, triton


@triton.jit
def topk_rows_kernel(
    x_ptr, val_ptr, idx_ptr,
    M, N, K,
    stride_xm, stride_xn, stride_vm, stride_im,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, LARGEST: tl.constexpr,
):
    """values[row, :K], indices[row, :K] of the K largest (``LARGEST``) or smallest x[row, :N]."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    inb = offs < N
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + offs.to(tl.int64) * stride_xn, mask=inb,
                other=0.0).to(tl.float32)
    num = x == x  # not NaN
    if LARGEST:
        key = x
    else:
        key = -x
    offs_k = tl.arange(0, BLOCK_K)
    vals = tl.zeros((BLOCK_K,), dtype=tl.float32)
    idxs = tl.zeros((BLOCK_K,), dtype=tl.int32)
    left = inb
    for t in range(K):
        nan_left = tl.max((left & (x != x)).to(tl.int32), 0)
        num_left = tl.max((left & num).to(tl.int32), 0)
        if LARGEST:
            take_nan = nan_left > 0
        else:
            take_nan = num_left == 0
        best = tl.max(tl.where(left & num, key, float("-inf")), 0)
        cand = left & tl.where(take_nan, x != x, num & (key == best))
        i = tl.min(tl.where(cand, offs, BLOCK_N), 0)
        v = tl.sum(tl.where(offs == i, x, 0.0), 0)
        vals = tl.where(offs_k == t, v, vals)
        idxs = tl.where(offs_k == t, i, idxs)
        left = left & (offs != i)
    keep = offs_k < K
    tl.store(val_ptr + row.to(tl.int64) * stride_vm + offs_k, vals.to(val_ptr.dtype.element_ty), mask=keep)
    tl.store(idx_ptr + row.to(tl.int64) * stride_im + offs_k, idxs.to(tl.int64), mask=keep)
