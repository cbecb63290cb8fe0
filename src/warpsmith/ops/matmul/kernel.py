"""GEMM kernels (only ``@triton.jit`` code).

All compute ``C[b] = act(A[b] @ B[b] + bias)`` with fp32 accumulation, for
A of shape (M, K), B (K, N), C (M, N), any strides (a transposed operand is
a stride swap, never a copy). FLOPs: 2 M N K per batch. Minimum bytes:
(M K + K N + M N) x element size per batch (+ N for the bias).
"""
from ...core._triton import tl, triton
from ..shared.kernel import apply_activation, dot_acc, to_output


@triton.jit
def tile_coords(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Grouped (L2-friendly) order: GROUP_M row-tiles are swept column by column."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % size_m
    pid_n = (tile % per_group) // size_m
    return pid_m, pid_n


@triton.jit
def tile_dot(a_ptr, b_ptr, rm, rn, k_lo, k_hi, M, N, stride_am, stride_ak, stride_bk, stride_bn,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
             IS_FP32: tl.constexpr, PRECISION: tl.constexpr, EMULATE: tl.constexpr):
    """fp32 accumulator of A[rm, k_lo:k_hi] @ B[k_lo:k_hi, rn]. EVEN_K: (k_hi - k_lo) % BLOCK_K == 0."""
    rk = tl.arange(0, BLOCK_K)
    mask_m = rm < M
    mask_n = rn < N
    a_ptrs = a_ptr + rm[:, None] * stride_am + (k_lo + rk)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_lo + rk)[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_lo, k_hi, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)
            b = tl.load(b_ptrs, mask=mask_n[None, :], other=0.0)
        else:
            mask_k = (k + rk) < k_hi
            a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        acc = dot_acc(a, b, acc, IS_FP32, PRECISION, EMULATE)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def store_tile(c_ptr, bias_ptr, acc, rm, rn, M, N, stride_cm, stride_cn, stride_bias,
               HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, EMULATE: tl.constexpr):
    """Epilogue: + bias, activation, cast, masked store of one (BLOCK_M, BLOCK_N) tile."""
    if HAS_BIAS:
        bias = tl.load(bias_ptr + rn * stride_bias, mask=rn < N, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    acc = apply_activation(acc, ACTIVATION)
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, to_output(acc, c_ptr, EMULATE), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def output_tile(a_ptr, b_ptr, c_ptr, bias_ptr, tile, batch, M, N, K,
                stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn, stride_cb, stride_cm, stride_cn,
                stride_bias, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
                IS_FP32: tl.constexpr, PRECISION: tl.constexpr, EMULATE: tl.constexpr):
    """Compute and store tile number ``tile`` (grouped order) of batch ``batch`` (int64) of C."""
    pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tile_dot(a_ptr + batch * stride_ab, b_ptr + batch * stride_bb, rm, rn, 0, K, M, N,
                   stride_am, stride_ak, stride_bk, stride_bn,
                   BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, IS_FP32, PRECISION, EMULATE)
    store_tile(c_ptr + batch * stride_cb, bias_ptr, acc, rm, rn, M, N, stride_cm, stride_cn, stride_bias,
               HAS_BIAS, ACTIVATION, EMULATE)


@triton.jit
def matmul_tiled_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr,
    M, N, K,
    stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn, stride_cb, stride_cm, stride_cn, stride_bias,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
    IS_FP32: tl.constexpr, PRECISION: tl.constexpr, EMULATE: tl.constexpr,
):
    """One program per (BLOCK_M, BLOCK_N) tile of C, grouped order; grid (tiles, batch)."""
    output_tile(a_ptr, b_ptr, c_ptr, bias_ptr, tl.program_id(0), tl.program_id(1).to(tl.int64), M, N, K,
                stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn, stride_cb, stride_cm, stride_cn,
                stride_bias, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, HAS_BIAS, ACTIVATION,
                IS_FP32, PRECISION, EMULATE)


@triton.jit
def matmul_splitk_kernel(
    a_ptr, b_ptr, p_ptr,
    M, N, K, K_PER_SPLIT,
    stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, ATOMIC: tl.constexpr,
    IS_FP32: tl.constexpr, PRECISION: tl.constexpr, EMULATE: tl.constexpr,
):
    """Partial products over K slices; grid (tiles, SPLIT_K, batch).

    K_PER_SPLIT is a multiple of BLOCK_K. Partials go to p[batch, split, M, N] (fp32,
    contiguous), or, with ATOMIC, are atomically added into p[batch, M, N] (zeroed
    beforehand; the summation order then varies run to run: not deterministic).
    """
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    split = tl.program_id(1)
    batch = tl.program_id(2).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_lo = split * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    acc = tile_dot(a_ptr + batch * stride_ab, b_ptr + batch * stride_bb, rm, rn, k_lo, k_hi, M, N,
                   stride_am, stride_ak, stride_bk, stride_bn,
                   BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, IS_FP32, PRECISION, EMULATE)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    if ATOMIC:
        tl.atomic_add(p_ptr + batch * M * N + offs, acc, mask=mask)
    else:
        nsplit = tl.num_programs(1)
        tl.store(p_ptr + (batch * nsplit + split) * M * N + offs, acc, mask=mask)


@triton.jit
def matmul_splitk_reduce_kernel(
    p_ptr, c_ptr, bias_ptr,
    M, N, SPLIT_K,
    stride_cb, stride_cm, stride_cn, stride_bias,
    BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, EMULATE: tl.constexpr,
):
    """C[b] = act(sum over splits of p[b, s] + bias), splits summed in order; grid (cdiv(M N, BLOCK), batch)."""
    batch = tl.program_id(1).to(tl.int64)
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < M * N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, SPLIT_K):
        acc += tl.load(p_ptr + (batch * SPLIT_K + s) * M * N + idx, mask=mask, other=0.0)
    rm = idx // N
    rn = idx % N
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn * stride_bias, mask=mask, other=0.0).to(tl.float32)
    acc = apply_activation(acc, ACTIVATION)
    tl.store(c_ptr + batch * stride_cb + rm * stride_cm + rn * stride_cn, to_output(acc, c_ptr, EMULATE), mask=mask)


@triton.jit
def matmul_persistent_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr,
    M, N, K, BATCH,
    stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn, stride_cb, stride_cm, stride_cn, stride_bias,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
    IS_FP32: tl.constexpr, PRECISION: tl.constexpr, EMULATE: tl.constexpr,
):
    """A fixed grid (sized to the SM count) strides over all tiles of all batches."""
    tiles_per_batch = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), tiles_per_batch * BATCH, tl.num_programs(0)):
        output_tile(a_ptr, b_ptr, c_ptr, bias_ptr, tile % tiles_per_batch, (tile // tiles_per_batch).to(tl.int64),
                    M, N, K, stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn, stride_cb, stride_cm,
                    stride_cn, stride_bias, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, HAS_BIAS, ACTIVATION,
                    IS_FP32, PRECISION, EMULATE)
