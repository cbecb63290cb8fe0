"""Scaled GEMM kernels (only ``@triton.jit`` code).

``C = act((A * sa) @ (B * sb) + bias)`` for A (M, K) and B (K, N) in fp8 (e4m3/e5m2) or int8, any
strides; scales fp32, multiply to dequantize (see spec.py for the shapes):

- ``SCALING="tensor"``: one scale each; ``"row"``: ``sa[m]`` (stride ``stride_sam``), ``sb[n]``
  (stride ``stride_sbn``). The raw product is accumulated (fp32 for fp8, exactly in int32 for int8)
  and scaled once in the epilogue.
- ``SCALING="block"``: ``sa[m, k // 128]``, ``sb[k // 128, n // 128]``; BLOCK_K divides 128, so one
  K tile lies in one scale block: each tile's fp32 partial product is scaled by its two scales and added.

Special values: a NaN operand makes its row (A) or column (B) of C NaN, an e5m2 infinity its row or column
±inf (NaN where it meets a zero or the opposite infinity), as the product of the dequantized operands in
float. Under the interpreter, whose fp8 -> fp16 conversion for ``tl.dot`` decodes e4m3's NaN (0x7F/0xFF)
as ±480 (Triton 3.9), ``NAN_A`` / ``NAN_B`` (e4m3 operands) find the NaN bytes of each tile and set the
rows and columns they reach to NaN; a GPU's conversion is right and never compiles that code.

FLOPs 2 M N K; bytes M K + K N (one byte each) + scales + M N x output size.
"""
from ....core._triton import tl, triton
from ...matmul.kernel import store_tile, tile_coords




@triton.jit
def load_scales_block(sa_ptr, sb_ptr, rm, rn, k, M, N, stride_sam, stride_sak, stride_sbk, stride_sbn):
    """The scales of the K tile starting at ``k``: (BLOCK_M,) of A's rows and (BLOCK_N,) of B's columns."""
    kb = k // 128  # quant.reference.BLOCK (a literal: the symbolic tracer reads no constexpr globals)
    sa = tl.load(sa_ptr + rm * stride_sam + kb * stride_sak, mask=rm < M, other=0.0)
    sb = tl.load(sb_ptr + kb * stride_sbk + (rn // 128) * stride_sbn, mask=rn < N, other=0.0)
    return sa, sb


@triton.jit
def accumulate(a, b, acc):
    """``acc + a @ b``: fp32 accumulation for fp8, exact int32 accumulation for int8 (``out_dtype``
    named: Triton 3.6 asserts that it matches the accumulator's, and defaults it to fp32)."""
    return tl.dot(a, b, acc, out_dtype=acc.dtype)


@triton.jit
def e4m3_nan(x, axis: tl.constexpr):
    """1 where a row (``axis=1``) or column (``axis=0``) of the e4m3 tile ``x`` holds a NaN byte (0x7F, 0xFF)."""
    return tl.max(((x.to(tl.uint8, bitcast=True) & 0x7F) == 0x7F).to(tl.int32), axis=axis)


@triton.jit
def scaled_tile(a_ptr, b_ptr, sa_ptr, sb_ptr, rm, rn, k_lo, k_hi, M, N,
                stride_am, stride_ak, stride_bk, stride_bn, stride_sam, stride_sak, stride_sbk, stride_sbn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                SCALING: tl.constexpr, IS_INT: tl.constexpr, NAN_A: tl.constexpr = False,
                NAN_B: tl.constexpr = False):
    """The fp32 tile of (A * sa)[rm, k_lo:k_hi] @ (B * sb)[k_lo:k_hi, rn], scales applied (``NAN_A`` /
    ``NAN_B``: the interpreter's e4m3 NaN, see the module docstring)."""
    rk = tl.arange(0, BLOCK_K)
    mask_m = rm < M
    mask_n = rn < N
    a_ptrs = a_ptr + rm[:, None] * stride_am + (k_lo + rk)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_lo + rk)[:, None] * stride_bk + rn[None, :] * stride_bn
    if IS_INT:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    out = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    nan_m = tl.zeros((BLOCK_M,), dtype=tl.int32)
    nan_n = tl.zeros((BLOCK_N,), dtype=tl.int32)
    for k in range(k_lo, k_hi, BLOCK_K):
        mask_k = (k + rk) < k_hi
        a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        if NAN_A:
            nan_m = tl.maximum(nan_m, e4m3_nan(a, 1))
        if NAN_B:
            nan_n = tl.maximum(nan_n, e4m3_nan(b, 0))
        if SCALING == "block":
            sa, sb = load_scales_block(sa_ptr, sb_ptr, rm, rn, k, M, N, stride_sam, stride_sak, stride_sbk, stride_sbn)
            part = tl.dot(a, b)
            out += part * sa[:, None] * sb[None, :]
        else:
            acc = accumulate(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if SCALING == "tensor":
        out = acc.to(tl.float32) * (tl.load(sa_ptr) * tl.load(sb_ptr))
    elif SCALING == "row":
        sa = tl.load(sa_ptr + rm * stride_sam, mask=mask_m, other=0.0)
        sb = tl.load(sb_ptr + rn * stride_sbn, mask=mask_n, other=0.0)
        out = acc.to(tl.float32) * sa[:, None] * sb[None, :]
    if NAN_A or NAN_B:
        out = tl.where((nan_m[:, None] + nan_n[None, :]) > 0, float("nan"), out)
    return out


@triton.jit
def scaled_mm_kernel(
    a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sam, stride_sak, stride_sbk, stride_sbn,
    stride_cm, stride_cn, stride_bias,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SCALING: tl.constexpr, IS_INT: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
    EMULATE: tl.constexpr, NAN_A: tl.constexpr = False, NAN_B: tl.constexpr = False,
):
    """One program per (BLOCK_M, BLOCK_N) tile of C, grouped order; grid (tiles,)."""
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = scaled_tile(a_ptr, b_ptr, sa_ptr, sb_ptr, rm, rn, 0, K, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                      stride_sam, stride_sak, stride_sbk, stride_sbn, BLOCK_M, BLOCK_N, BLOCK_K, SCALING, IS_INT,
                      NAN_A, NAN_B)
    store_tile(c_ptr, bias_ptr, acc, rm, rn, M, N, stride_cm, stride_cn, stride_bias, HAS_BIAS, ACTIVATION, EMULATE)


@triton.jit
def scaled_mm_splitk_kernel(
    a_ptr, b_ptr, sa_ptr, sb_ptr, p_ptr,
    M, N, K, K_PER_SPLIT,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sam, stride_sak, stride_sbk, stride_sbn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SCALING: tl.constexpr, IS_INT: tl.constexpr, NAN_A: tl.constexpr = False, NAN_B: tl.constexpr = False,
):
    """Scaled partial products over K slices (K_PER_SPLIT a multiple of BLOCK_K) into the fp32 workspace
    p[split, M, N]; grid (tiles, SPLIT_K). The matmul family's split-K reduction adds bias and activation."""
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    split = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_lo = split * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    acc = scaled_tile(a_ptr, b_ptr, sa_ptr, sb_ptr, rm, rn, k_lo, k_hi, M, N, stride_am, stride_ak, stride_bk,
                      stride_bn, stride_sam, stride_sak, stride_sbk, stride_sbn, BLOCK_M, BLOCK_N, BLOCK_K,
                      SCALING, IS_INT, NAN_A, NAN_B)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(p_ptr + split.to(tl.int64) * M * N + rm[:, None] * N + rn[None, :], acc, mask=mask)  # SPLIT_K M N may pass 2^31
