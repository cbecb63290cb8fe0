"""Weight-only int4 GEMM kernels (only ``@triton.jit`` code): ``y = x @ ((q - z[g]) * s[g]) + bias``.

Formats (``FORMAT``, see formats.py): ``"awq"`` packs 8 columns per int32 along N in the
interleaved nibble order (column ``8j + c`` in nibble ``(c & 1) * 4 + (c >> 1)``); ``"gptq"`` packs 8
rows per int32 along K (row ``8r + i`` in nibble ``i``) and its zeros, packed along N in plain order,
store ``z - 1``. ``GROUP`` rows of K share a scale and zero (``g = k // GROUP``, or ``g_idx[k]`` with
``ACT_ORDER``). The packed tensors are contiguous; x has any strides; y is contiguous (M, N).

Each weight is dequantized in fp32 (exact), rounded once to x's dtype, and multiplied with fp32
accumulation. Bytes: K N / 2 (weights) + (K / GROUP) N (2 + 1/2) (scales, zeros) + 2 M (K + N);
FLOPs: 2 M N K.

- ``int4_matmul_gemm_kernel``: one program per (BLOCK_M, BLOCK_N) tile of y, the dequantized
  (BLOCK_K, BLOCK_N) weight tile fed to ``tl.dot`` (large M).
- ``int4_matmul_gemv_kernel``: one program per (row m, BLOCK_N columns, K slice), a broadcast
  multiply and row sum (small M); with one slice it writes y, else fp32 partials (M, SPLIT_K, N)
  that ``int4_matmul_reduce_kernel`` sums in a fixed order (deterministic).
"""
from ....core._triton import tl, triton
from ...shared.kernel import dot_acc, round_to_bf16, to_output


@triton.jit
def awq_nibble(col):
    """AWQ: the nibble (0..7) of its word holding column ``8j + col`` (order [0, 2, 4, 6, 1, 3, 5, 7])."""
    return (col & 1) * 4 + (col >> 1)


@triton.jit
def group_of(offs_k, gidx_ptr, mask_k, num_groups, GROUP: tl.constexpr, ACT_ORDER: tl.constexpr):
    """The quantization group of each row ``offs_k``."""
    if ACT_ORDER:
        g = tl.load(gidx_ptr + offs_k, mask=mask_k, other=0)
    else:
        g = offs_k // GROUP
    return g


@triton.jit
def dequantize(q, z, s):
    """``(q - z) * s`` in fp32 (exact for |q - z| <= 16 and an fp16/bf16 scale)."""
    return (q - z).to(tl.float32) * s.to(tl.float32)


@triton.jit
def weight_tile(qw_ptr, qz_ptr, s_ptr, gidx_ptr, offs_k, offs_n, mask_k, mask_n, N, num_groups,
                FORMAT: tl.constexpr, GROUP: tl.constexpr, ACT_ORDER: tl.constexpr):
    """The dequantized (BLOCK_K, BLOCK_N) weight tile in fp32 (exact)."""
    mask = mask_k[:, None] & mask_n[None, :]
    words_per_row = N // 8
    if FORMAT == "awq":
        words = tl.load(qw_ptr + offs_k[:, None] * words_per_row + (offs_n // 8)[None, :], mask=mask, other=0)
        q = (words >> (awq_nibble(offs_n % 8) * 4)[None, :]) & 0xF
    else:
        words = tl.load(qw_ptr + (offs_k // 8)[:, None] * N + offs_n[None, :], mask=mask, other=0)
        q = (words >> ((offs_k % 8) * 4)[:, None]) & 0xF
    g = group_of(offs_k, gidx_ptr, mask_k, num_groups, GROUP, ACT_ORDER)
    zwords = tl.load(qz_ptr + g[:, None] * words_per_row + (offs_n // 8)[None, :], mask=mask, other=0)
    if FORMAT == "awq":
        z = (zwords >> (awq_nibble(offs_n % 8) * 4)[None, :]) & 0xF
    else:
        z = ((zwords >> ((offs_n % 8) * 4)[None, :]) & 0xF) + 1
    s = tl.load(s_ptr + g[:, None] * N + offs_n[None, :], mask=mask, other=0.0)
    return dequantize(q, z, s)


@triton.jit
def int4_matmul_gemm_kernel(
        x_ptr, qw_ptr, qz_ptr, s_ptr, gidx_ptr, bias_ptr, y_ptr,
        M, N, K, num_groups, stride_xm, stride_xk,
        FORMAT: tl.constexpr, GROUP: tl.constexpr, ACT_ORDER: tl.constexpr, HAS_BIAS: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EMULATE: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk,
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        w = weight_tile(qw_ptr, qz_ptr, s_ptr, gidx_ptr, offs_k, offs_n, mask_k, mask_n, N, num_groups,
                        FORMAT, GROUP, ACT_ORDER)
        if EMULATE:  # bf16 under the interpreter, which truncates fp32 -> bf16: round by hand
            acc = dot_acc(x, round_to_bf16(w), acc, False, "ieee", EMULATE)
        else:
            acc = dot_acc(x, w.to(x_ptr.dtype.element_ty), acc, False, "ieee", EMULATE)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], to_output(acc, y_ptr, EMULATE),
             mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def int4_matmul_gemv_kernel(
        x_ptr, qw_ptr, qz_ptr, s_ptr, gidx_ptr, bias_ptr, y_ptr, p_ptr,
        M, N, K, num_groups, K_PER_SPLIT, stride_xm, stride_xk,
        FORMAT: tl.constexpr, GROUP: tl.constexpr, ACT_ORDER: tl.constexpr, HAS_BIAS: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr, EMULATE: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    m = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    k_start = pid_s * K_PER_SPLIT
    for k0 in range(k_start, k_start + K_PER_SPLIT, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        x = tl.load(x_ptr + m * stride_xm + offs_k * stride_xk, mask=mask_k, other=0.0).to(tl.float32)
        w = weight_tile(qw_ptr, qz_ptr, s_ptr, gidx_ptr, offs_k, offs_n, mask_k, mask_n, N, num_groups,
                        FORMAT, GROUP, ACT_ORDER)
        if EMULATE:  # bf16 under the interpreter, which truncates fp32 -> bf16: round by hand
            w = round_to_bf16(w)
        else:  # the weight rounded once to x's dtype, as the GEMM path feeds tl.dot
            w = w.to(x_ptr.dtype.element_ty).to(tl.float32)
        acc += tl.sum(x[:, None] * w, axis=0)
    if SPLIT_K == 1:
        if HAS_BIAS:
            acc += tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        tl.store(y_ptr + m * N + offs_n, to_output(acc, y_ptr, EMULATE), mask=mask_n)
    else:
        tl.store(p_ptr + (m * SPLIT_K + pid_s) * N + offs_n, acc, mask=mask_n)


@triton.jit
def int4_matmul_reduce_kernel(p_ptr, bias_ptr, y_ptr, N, SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr,
                              BLOCK: tl.constexpr, EMULATE: tl.constexpr):
    """y[m, n] = sum_s p[m, s, n] (+ bias[n]), slices summed in order."""
    pid = tl.program_id(0)
    m = tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(p_ptr + (m * SPLIT_K + s) * N + offs, mask=mask, other=0.0)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + m * N + offs, to_output(acc, y_ptr, EMULATE), mask=mask)
