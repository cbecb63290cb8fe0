"""Softmax / log-softmax kernels over the last dimension (only ``@triton.jit`` code).

Rows of length N; x (or y and dy) read with any row and column strides, the output written
contiguous along the row (row stride given). Row offsets are computed in int64, offsets within a
row in int32 (the launcher checks they fit). Everything is computed in fp32 and rounded once.
``LOG`` selects log-softmax. Element size e; FLOPs about 5 per element forward, 4 backward.

NaN/Inf follow torch through plain arithmetic: a NaN or +inf in a row reaches the row's sum
(``exp(NaN)`` or ``exp(inf - inf)``) and makes the whole row NaN; a row of -inf has
``x - m = -inf - (-inf) = NaN``; a -inf among finite values gives ``exp(-inf) = 0``.
``tl.maximum``/``tl.max`` may drop a NaN operand (GPU, interpreter): the NaN still reaches the
sum through ``exp(x - m)``. The online pass takes its exponents against
``max(m, -FLT_MAX)`` so that -inf entries seen before any finite one (and the empty start)
give 0 rather than ``exp(-inf - -inf) = NaN``.
"""
from ...core._triton import tl, triton
from ..shared.kernel import to_output

FLT_MAX = tl.constexpr(3.4028234663852886e38)  # the largest finite fp32


@triton.jit
def softmax_single_pass_kernel(
    x_ptr, y_ptr,
    M, N,
    stride_xm, stride_xn, stride_ym,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr, LOG: tl.constexpr, EMULATE: tl.constexpr,
):
    """Whole rows in registers: ROWS rows of BLOCK_N >= N per step; programs stride over row blocks
    (grid = cdiv(M, ROWS), or fewer for a persistent launch).

    y = exp(x - m) / s, or (x - m) - log s. Bytes: 2 M N e (read x once, write y once).
    """
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    for tile in range(tl.program_id(0), tl.cdiv(M, ROWS), tl.num_programs(0)):
        rows = tl.arange(0, ROWS).to(tl.int64) + tile * ROWS
        mask = (rows < M)[:, None] & col_ok[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask,
                    other=float("-inf")).to(tl.float32)
        m = tl.max(x, axis=1)
        d = x - m[:, None]
        e = tl.exp(d)
        s = tl.sum(e, axis=1)
        if LOG:
            y = d - tl.log(s)[:, None]
        else:
            y = e / s[:, None]
        tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :], to_output(y, y_ptr, EMULATE), mask=mask)


@triton.jit
def softmax_online_kernel(
    x_ptr, y_ptr,
    M, N,
    stride_xm, stride_xn, stride_ym,
    BLOCK_N: tl.constexpr, LOG: tl.constexpr, EMULATE: tl.constexpr,
):
    """One row per step, looped over BLOCK_N chunks; programs stride over rows (grid = M).

    Pass 1, the online normalizer (Milakov & Gimelshein 2018): running max m and running sum s
    of exp(x - m), rescaled by exp(m_old - m_new) whenever the max grows. Pass 2 writes
    exp(x - m) / s, or (x - m) - log s. Bytes: 3 M N e (x read twice, y written once).
    """
    cols0 = tl.arange(0, BLOCK_N)
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for i in range(0, (M - 1 - pid) // nprog + 1):  # rows pid, pid + nprog, ... (pid < M; no int32 wrap)
        row = (pid + i * nprog).to(tl.int64)
        x_row = x_ptr + row * stride_xm
        y_row = y_ptr + row * stride_ym
        m = float("-inf")
        s = 0.0
        for start in range(0, N, BLOCK_N):
            cols = start + cols0
            x = tl.load(x_row + cols * stride_xn, mask=cols < N, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            # the exponents are taken against a finite base while only -inf has been seen, so that
            # -inf entries and the empty start give exp(-inf) = 0, not exp(-inf - -inf) = NaN
            base = tl.maximum(m_new, -FLT_MAX)
            s = s * tl.exp(m - base) + tl.sum(tl.exp(x - base), axis=0)
            m = m_new
        if LOG:
            log_s = tl.log(s)
        else:
            inv_s = 1.0 / s
        for start in range(0, N, BLOCK_N):
            cols = start + cols0
            mask = cols < N
            d = tl.load(x_row + cols * stride_xn, mask=mask, other=float("-inf")).to(tl.float32) - m
            if LOG:
                y = d - log_s
            else:
                y = tl.exp(d) * inv_s
            tl.store(y_row + cols, to_output(y, y_ptr, EMULATE), mask=mask)


@triton.jit
def softmax_backward_single_pass_kernel(
    y_ptr, dy_ptr, dx_ptr,
    M, N,
    stride_ym, stride_yn, stride_dym, stride_dyn, stride_dxm,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr, LOG: tl.constexpr, EMULATE: tl.constexpr,
):
    """Whole rows in registers (layout as the forward single-pass kernel).

    softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy).
    Bytes: 3 M N e (read y and dy once, write dx).
    """
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    for tile in range(tl.program_id(0), tl.cdiv(M, ROWS), tl.num_programs(0)):
        rows = tl.arange(0, ROWS).to(tl.int64) + tile * ROWS
        mask = (rows < M)[:, None] & col_ok[None, :]
        y = tl.load(y_ptr + rows[:, None] * stride_ym + cols[None, :] * stride_yn, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows[:, None] * stride_dym + cols[None, :] * stride_dyn, mask=mask,
                     other=0.0).to(tl.float32)
        if LOG:
            c = tl.sum(dy, axis=1)
            dx = dy - tl.exp(y) * c[:, None]
        else:
            c = tl.sum(dy * y, axis=1)
            dx = y * (dy - c[:, None])
        tl.store(dx_ptr + rows[:, None] * stride_dxm + cols[None, :], to_output(dx, dx_ptr, EMULATE), mask=mask)


@triton.jit
def softmax_backward_online_kernel(
    y_ptr, dy_ptr, dx_ptr,
    M, N,
    stride_ym, stride_yn, stride_dym, stride_dyn, stride_dxm,
    BLOCK_N: tl.constexpr, LOG: tl.constexpr, EMULATE: tl.constexpr,
):
    """One row per step, looped over BLOCK_N chunks (grid = M).

    Pass 1: c = sum(dy y) (log-softmax: sum(dy)), accumulated per lane and reduced once.
    Pass 2: dx = y (dy - c) (log-softmax: dy - exp(y) c).
    Bytes: softmax 5 M N e (y and dy read twice), log-softmax 4 M N e (pass 1 reads only dy).
    """
    cols0 = tl.arange(0, BLOCK_N)
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for i in range(0, (M - 1 - pid) // nprog + 1):  # rows pid, pid + nprog, ... (pid < M; no int32 wrap)
        row = (pid + i * nprog).to(tl.int64)
        y_row = y_ptr + row * stride_ym
        dy_row = dy_ptr + row * stride_dym
        dx_row = dx_ptr + row * stride_dxm
        acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            cols = start + cols0
            mask = cols < N
            dy = tl.load(dy_row + cols * stride_dyn, mask=mask, other=0.0).to(tl.float32)
            if LOG:
                acc += dy
            else:
                acc += dy * tl.load(y_row + cols * stride_yn, mask=mask, other=0.0).to(tl.float32)
        c = tl.sum(acc, axis=0)
        for start in range(0, N, BLOCK_N):
            cols = start + cols0
            mask = cols < N
            y = tl.load(y_row + cols * stride_yn, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_row + cols * stride_dyn, mask=mask, other=0.0).to(tl.float32)
            if LOG:
                dx = dy - tl.exp(y) * c
            else:
                dx = y * (dy - c)
            tl.store(dx_row + cols, to_output(dx, dx_ptr, EMULATE), mask=mask)
