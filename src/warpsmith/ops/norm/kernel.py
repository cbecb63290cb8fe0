"""Normalization kernels (only ``@triton.jit`` code): RMSNorm and LayerNorm over rows of length N.

Forward, per row (``IS_RMS`` selects the op; statistics in fp32):
    s = x + residual (HAS_RES; rounded to x's dtype, stored, and normalized)
    RMSNorm:   rstd = 1/sqrt(sum(x^2)/N + eps),                  y = x * rstd * w
    LayerNorm: mean = sum(x)/N, rstd = 1/sqrt(sum((x-mean)^2)/N + eps), y = (x - mean) * rstd * w + b
Bytes: read M N (x) [+ M N residual] + N (w, b) elements, write M N (y) [+ M N s] elements and
4 M (rstd) [+ 4 M mean] bytes; the looped kernel reads each row twice (x, or s when fused).
FLOPs: about 4 M N (RMSNorm), 7 M N (LayerNorm).

Backward, with xhat = x * rstd (RMSNorm) or (x - mean) * rstd, g = dy * w:
    dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (no mean(g) term for RMSNorm) [+ ds]
    dw = sum over rows of dy * xhat,  db = sum over rows of dy
dx is written by the row kernels; dw and db are first reduced per program into fp32 partial rows
(a (P, K, N) workspace, K = number of parameter gradients), then summed over P in a fixed order
by ``norm_partials_reduce_kernel`` (deterministic); with ``ATOMIC`` programs add into one
zeroed partial row instead (order varies run to run: declared non-deterministic).
Bytes: read 2 M N (dy, x) [+ M N ds] + N (w) elements and the statistics, write M N (dx), plus
2 x 4 P K N for the workspace and K N elements for dw/db; the looped kernel reads dy and x twice.

Every kernel indexes rows in int64 (row * row stride may pass 2^31) and columns in int32
(the launchers require unit column stride).
"""
from ...core._triton import tl, triton
from ..shared.kernel import to_output


# ---------------------------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------------------------
@triton.jit
def norm_fwd_tile(x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, s_ptr, mean_ptr, rstd_ptr, rows, M, N, eps,
                  stride_xm, stride_rm, stride_ym, stride_sm,
                  BLOCK_N: tl.constexpr, IS_RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                  HAS_RES: tl.constexpr, EMULATE: tl.constexpr):
    """Normalize the rows ``rows`` (a (ROWS,) block), each held whole in registers (BLOCK_N >= N)."""
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    mask = row_ok[:, None] & col_ok[None, :]
    r64 = rows.to(tl.int64)
    x = tl.load(x_ptr + r64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_RES:
        x += tl.load(res_ptr + r64[:, None] * stride_rm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        s = to_output(x, s_ptr, EMULATE)
        tl.store(s_ptr + r64[:, None] * stride_sm + cols[None, :], s, mask=mask)
        x = s.to(tl.float32)  # normalize the sum as returned (rounded to x's dtype)
    if IS_RMS:
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
        xhat = x * rstd[:, None]
    else:
        mean = tl.sum(x, axis=1) / N
        d = tl.where(mask, x - mean[:, None], 0.0)
        rstd = tl.rsqrt(tl.sum(d * d, axis=1) / N + eps)
        xhat = d * rstd[:, None]
        tl.store(mean_ptr + rows, mean, mask=row_ok)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)
    y = xhat
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + r64[:, None] * stride_ym + cols[None, :], to_output(y, y_ptr, EMULATE), mask=mask)


@triton.jit
def norm_fwd_row_kernel(
    x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, s_ptr, mean_ptr, rstd_ptr,
    M, N, eps,
    stride_xm, stride_rm, stride_ym, stride_sm,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, IS_RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    HAS_RES: tl.constexpr, EMULATE: tl.constexpr,
):
    """ROWS whole rows per program; grid (cdiv(M, ROWS),)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    norm_fwd_tile(x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, s_ptr, mean_ptr, rstd_ptr, rows, M, N, eps,
                  stride_xm, stride_rm, stride_ym, stride_sm, BLOCK_N, IS_RMS, HAS_W, HAS_B, HAS_RES, EMULATE)


@triton.jit
def norm_fwd_persistent_kernel(
    x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, s_ptr, mean_ptr, rstd_ptr,
    M, N, eps,
    stride_xm, stride_rm, stride_ym, stride_sm,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, IS_RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    HAS_RES: tl.constexpr, EMULATE: tl.constexpr,
):
    """A fixed grid (PROGRAMS_PER_SM x SMs) strides over blocks of ROWS whole rows."""
    for blk in range(tl.program_id(0), tl.cdiv(M, ROWS), tl.num_programs(0)):
        rows = blk * ROWS + tl.arange(0, ROWS)
        norm_fwd_tile(x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, s_ptr, mean_ptr, rstd_ptr, rows, M, N, eps,
                      stride_xm, stride_rm, stride_ym, stride_sm, BLOCK_N, IS_RMS, HAS_W, HAS_B, HAS_RES, EMULATE)


@triton.jit
def norm_fwd_looped_kernel(
    x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, s_ptr, mean_ptr, rstd_ptr,
    M, N, eps,
    stride_xm, stride_rm, stride_ym, stride_sm,
    BLOCK_N: tl.constexpr, IS_RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    HAS_RES: tl.constexpr, EMULATE: tl.constexpr,
):
    """One row per program in chunks of BLOCK_N (any N); grid (M,).

    Pass 1 (statistics): RMSNorm sums x^2 per lane; LayerNorm sums x per lane (the mean is
    sum / N, as in the reference, so a row holding an infinity has an infinite mean) and runs
    Welford's update per lane (lane l sees one element per chunk, so every valid lane has seen
    k + 1 elements after chunk k), then merges the lanes' squared deviations with Chan's formula
    M2 = sum_l M2_l + sum_l n_l (mean_l - mean)^2: stable, without a separate mean pass. With HAS_RES, s = x + residual is stored here. Pass 2 re-reads
    x (or s, after a barrier) and writes y.
    """
    row = tl.program_id(0)
    r64 = row.to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    if IS_RMS:
        acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    else:
        lane_n = tl.zeros((BLOCK_N,), dtype=tl.float32)
        lane_sum = tl.zeros((BLOCK_N,), dtype=tl.float32)
        lane_mean = tl.zeros((BLOCK_N,), dtype=tl.float32)
        lane_m2 = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_ptr + r64 * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_RES:
            x += tl.load(res_ptr + r64 * stride_rm + cols, mask=mask, other=0.0).to(tl.float32)
            s = to_output(x, s_ptr, EMULATE)
            tl.store(s_ptr + r64 * stride_sm + cols, s, mask=mask)
            x = s.to(tl.float32)
        if IS_RMS:
            acc += x * x
        else:
            count = start // BLOCK_N + 1.0  # elements each valid lane has seen
            lane_sum += x
            delta = x - lane_mean
            new_mean = lane_mean + delta * (1.0 / count)
            lane_m2 = tl.where(mask, lane_m2 + delta * (x - new_mean), lane_m2)
            lane_mean = tl.where(mask, new_mean, lane_mean)
            lane_n = tl.where(mask, count, lane_n)
    if IS_RMS:
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    else:
        mean = tl.sum(lane_sum, axis=0) / N
        dev = lane_mean - mean
        var = (tl.sum(lane_m2, axis=0) + tl.sum(lane_n * dev * dev, axis=0)) / N
        rstd = tl.rsqrt(var + eps)
        tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    if HAS_RES:
        tl.debug_barrier()  # pass 2 reads s back: make every thread's stores of pass 1 visible
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        if HAS_RES:
            x = tl.load(s_ptr + r64 * stride_sm + cols, mask=mask, other=0.0).to(tl.float32)
        else:
            x = tl.load(x_ptr + r64 * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
        if IS_RMS:
            y = x * rstd
        else:
            y = (x - mean) * rstd
        if HAS_W:
            y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + r64 * stride_ym + cols, to_output(y, y_ptr, EMULATE), mask=mask)


# ---------------------------------------------------------------------------------------------
# backward
# ---------------------------------------------------------------------------------------------
@triton.jit
def norm_bwd_load(dy_ptr, x_ptr, w_ptr, r64, cols, mask, mean, rstd, N, stride_dym, stride_xm,
                  IS_RMS: tl.constexpr, HAS_W: tl.constexpr):
    """(dy, xhat, g = dy * w) in fp32 for a (ROWS, BLOCK_N) tile; zero outside ``mask``."""
    dy = tl.load(dy_ptr + r64[:, None] * stride_dym + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + r64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if IS_RMS:
        xhat = tl.where(mask, x * rstd[:, None], 0.0)
    else:
        xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
    g = dy
    if HAS_W:
        g = dy * tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    return dy, xhat, g


@triton.jit
def norm_bwd_store_dx(ds_ptr, dx_ptr, r64, cols, mask, g, xhat, rstd, c1, c2, stride_dsm, stride_dxm,
                      IS_RMS: tl.constexpr, HAS_DS: tl.constexpr, EMULATE: tl.constexpr):
    """Store dx for a tile, given the row means c1 = mean(g) and c2 = mean(g * xhat)."""
    if IS_RMS:
        dx = (g - xhat * c2[:, None]) * rstd[:, None]
    else:
        dx = (g - c1[:, None] - xhat * c2[:, None]) * rstd[:, None]
    if HAS_DS:
        dx += tl.load(ds_ptr + r64[:, None] * stride_dsm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(dx_ptr + r64[:, None] * stride_dxm + cols[None, :], to_output(dx, dx_ptr, EMULATE), mask=mask)


@triton.jit
def norm_bwd_tile(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, dx_ptr, rows, M, N,
                  stride_dym, stride_xm, stride_dsm, stride_dxm,
                  BLOCK_N: tl.constexpr, IS_RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_DS: tl.constexpr,
                  EMULATE: tl.constexpr):
    """dx for the whole rows ``rows``; returns this tile's column sums of dy * xhat and of dy."""
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    mask = row_ok[:, None] & (cols < N)[None, :]
    r64 = rows.to(tl.int64)
    rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
    mean = rstd
    if not IS_RMS:
        mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)
    dy, xhat, g = norm_bwd_load(dy_ptr, x_ptr, w_ptr, r64, cols, mask, mean, rstd, N, stride_dym, stride_xm,
                                IS_RMS, HAS_W)
    c2 = tl.sum(g * xhat, axis=1) / N
    c1 = c2
    if not IS_RMS:
        c1 = tl.sum(g, axis=1) / N
    norm_bwd_store_dx(ds_ptr, dx_ptr, r64, cols, mask, g, xhat, rstd, c1, c2, stride_dsm, stride_dxm,
                      IS_RMS, HAS_DS, EMULATE)
    return tl.sum(dy * xhat, axis=0), tl.sum(dy, axis=0)


@triton.jit
def store_partials(p_ptr, slot, cols, N, dw, db, K: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                   ATOMIC: tl.constexpr):
    """Write (or, with ATOMIC, add) this program's partial dw and db at columns ``cols`` of
    workspace row ``slot`` (int64; slot 0 with ATOMIC)."""
    mask = cols < N
    if HAS_W:
        if ATOMIC:
            tl.atomic_add(p_ptr + (slot * K) * N + cols, dw, mask=mask)
        else:
            tl.store(p_ptr + (slot * K) * N + cols, dw, mask=mask)
    if HAS_B:
        if ATOMIC:
            tl.atomic_add(p_ptr + (slot * K + K - 1) * N + cols, db, mask=mask)
        else:
            tl.store(p_ptr + (slot * K + K - 1) * N + cols, db, mask=mask)


@triton.jit
def norm_bwd_row_kernel(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, dx_ptr, p_ptr,
    M, N,
    stride_dym, stride_xm, stride_dsm, stride_dxm,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, K: tl.constexpr, IS_RMS: tl.constexpr, HAS_W: tl.constexpr,
    HAS_B: tl.constexpr, HAS_DS: tl.constexpr, ATOMIC: tl.constexpr, EMULATE: tl.constexpr,
):
    """ROWS whole rows per program, one partial row per program; grid (cdiv(M, ROWS),)."""
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    dw, db = norm_bwd_tile(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, dx_ptr, rows, M, N,
                           stride_dym, stride_xm, stride_dsm, stride_dxm, BLOCK_N, IS_RMS, HAS_W, HAS_DS, EMULATE)
    slot = pid.to(tl.int64)
    if ATOMIC:
        slot = slot * 0
    store_partials(p_ptr, slot, tl.arange(0, BLOCK_N), N, dw, db, K, HAS_W, HAS_B, ATOMIC)


@triton.jit
def norm_bwd_persistent_kernel(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, dx_ptr, p_ptr,
    M, N,
    stride_dym, stride_xm, stride_dsm, stride_dxm,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, K: tl.constexpr, IS_RMS: tl.constexpr, HAS_W: tl.constexpr,
    HAS_B: tl.constexpr, HAS_DS: tl.constexpr, ATOMIC: tl.constexpr, EMULATE: tl.constexpr,
):
    """A fixed grid strides over blocks of ROWS rows, accumulating dw and db in registers; one
    partial row per program at the end."""
    pid = tl.program_id(0)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for blk in range(pid, tl.cdiv(M, ROWS), tl.num_programs(0)):
        rows = blk * ROWS + tl.arange(0, ROWS)
        tdw, tdb = norm_bwd_tile(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, dx_ptr, rows, M, N,
                                 stride_dym, stride_xm, stride_dsm, stride_dxm, BLOCK_N, IS_RMS, HAS_W, HAS_DS,
                                 EMULATE)
        dw += tdw
        db += tdb
    slot = pid.to(tl.int64)
    if ATOMIC:
        slot = slot * 0
    store_partials(p_ptr, slot, tl.arange(0, BLOCK_N), N, dw, db, K, HAS_W, HAS_B, ATOMIC)


@triton.jit
def norm_bwd_looped_kernel(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, dx_ptr, p_ptr,
    M, N,
    stride_dym, stride_xm, stride_dsm, stride_dxm,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, K: tl.constexpr, IS_RMS: tl.constexpr, HAS_W: tl.constexpr,
    HAS_B: tl.constexpr, HAS_DS: tl.constexpr, ATOMIC: tl.constexpr, EMULATE: tl.constexpr,
):
    """ROWS rows per program in chunks of BLOCK_N (any N); grid (cdiv(M, ROWS),).

    Pass 1 accumulates the row sums of g and g * xhat per lane; pass 2 re-reads dy and x, writes
    dx and the program's partial dw and db, chunk by chunk (each chunk of the partial row once).
    """
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    r64 = rows.to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
    mean = rstd
    if not IS_RMS:
        mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)
    acc_gx = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    acc_g = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = row_ok[:, None] & (cols < N)[None, :]
        dy, xhat, g = norm_bwd_load(dy_ptr, x_ptr, w_ptr, r64, cols, mask, mean, rstd, N, stride_dym, stride_xm,
                                    IS_RMS, HAS_W)
        acc_gx += g * xhat
        if not IS_RMS:
            acc_g += g
    c2 = tl.sum(acc_gx, axis=1) / N
    c1 = c2
    if not IS_RMS:
        c1 = tl.sum(acc_g, axis=1) / N
    slot = pid.to(tl.int64)
    if ATOMIC:
        slot = slot * 0
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = row_ok[:, None] & (cols < N)[None, :]
        dy, xhat, g = norm_bwd_load(dy_ptr, x_ptr, w_ptr, r64, cols, mask, mean, rstd, N, stride_dym, stride_xm,
                                    IS_RMS, HAS_W)
        norm_bwd_store_dx(ds_ptr, dx_ptr, r64, cols, mask, g, xhat, rstd, c1, c2, stride_dsm, stride_dxm,
                          IS_RMS, HAS_DS, EMULATE)
        store_partials(p_ptr, slot, cols, N, tl.sum(dy * xhat, axis=0), tl.sum(dy, axis=0), K, HAS_W, HAS_B, ATOMIC)


@triton.jit
def norm_partials_reduce_kernel(
    p_ptr, dw_ptr, db_ptr,
    P, N,
    BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr, K: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """dw[n] = sum over p of partial[p, 0, n], db[n] = sum of partial[p, K - 1, n], in a fixed
    order (BLOCK_P rows at a time, then a fixed tree over them); grid (cdiv(N, BLOCK_N),).
    Bytes: read 4 P K N, write K N elements."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    offs_p = tl.arange(0, BLOCK_P)
    if HAS_W:
        acc = tl.zeros((BLOCK_P, BLOCK_N), dtype=tl.float32)
        for p0 in range(0, P, BLOCK_P):
            p = (p0 + offs_p).to(tl.int64)
            acc += tl.load(p_ptr + (p[:, None] * K) * N + cols[None, :],
                           mask=(p < P)[:, None] & col_ok[None, :], other=0.0)
        tl.store(dw_ptr + cols, to_output(tl.sum(acc, axis=0), dw_ptr, EMULATE), mask=col_ok)
    if HAS_B:
        acc_b = tl.zeros((BLOCK_P, BLOCK_N), dtype=tl.float32)
        for p0 in range(0, P, BLOCK_P):
            p = (p0 + offs_p).to(tl.int64)
            acc_b += tl.load(p_ptr + (p[:, None] * K + K - 1) * N + cols[None, :],
                             mask=(p < P)[:, None] & col_ok[None, :], other=0.0)
        tl.store(db_ptr + cols, to_output(tl.sum(acc_b, axis=0), db_ptr, EMULATE), mask=col_ok)
