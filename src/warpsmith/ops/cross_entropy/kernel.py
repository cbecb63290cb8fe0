"""Cross-entropy kernels (only ``@triton.jit`` code).

Per row r of logits x (M, V) with target t, label smoothing eps and scale s (all math in fp32):

    m     = max(max_i x_i, -FLT_MAX)            (finite start: no inf - inf when a row begins with -inf)
    ls    = log(sum_i exp(x_i - m))             (online over BLOCK_V chunks in the looped form)
    loss  = (1 - eps)((m - x_t) + ls) + eps ((m - mean_i x_i) + ls)      0 where t == ignore_index
    dx_i  = p_i s - c_i s,  p_i = exp((x_i - m) - ls),  c_i = (1 - eps)[i == t] + eps / V

The logsumexp m + ls is saved as its two parts, stats[r] = (m, ls) (both NaN for a row holding NaN or
+inf, where the sum s is NaN): a single fp32 sum would round ls
away against a large |m| (relative error u |m| in every p_i); torch's log_softmax keeps them apart too.
            (the c_i s term is absent where c_i is 0, as in torch's nll/log_softmax backward; an ignored
            row gets p_i * 0: zero, or NaN where the row is NaN, as torch)

A target outside [0, V) that is not ignore_index gives NaN loss and gradient for its row (the gather
is masked, never out of bounds). Bytes: the forward reads x once (M V elements) plus targets and
writes M losses and 2 M statistics; with WRITE_GRAD it also writes dx (in place when dx_ptr is x_ptr),
re-reading x once more in the looped form. The backward reads x and writes dx once (x may be a
column slice [col0, col0 + V) of rows of V_all classes: the fused op's vocabulary chunks).
"""
from ...core._triton import tl, triton
from ..shared.kernel import to_output


@triton.jit
def _targets(t_ptr, rows, row_mask, V, ignore_index, stride_t):
    """Per row: target, ignored, and 'bad' (not ignored, outside [0, V))."""
    t = tl.load(t_ptr + rows.to(tl.int64) * stride_t, mask=row_mask, other=0)
    ignored = t == ignore_index
    bad = (t != ignore_index) & ((t < 0) | (t >= V))
    return t, ignored, bad


@triton.jit
def _row_scale(s_ptr, rows, row_mask, stride_s, ROWS: tl.constexpr, SCALE: tl.constexpr):
    """The gradient scale per row: 1 (SCALE=0), one fp32 value s_ptr[0] (1) or s_ptr[row] (2)."""
    if SCALE == 0:
        sc = tl.full((ROWS,), 1.0, tl.float32)
    elif SCALE == 1:
        sc = tl.full((ROWS,), 1.0, tl.float32) * tl.load(s_ptr).to(tl.float32)
    else:
        sc = tl.load(s_ptr + rows.to(tl.int64) * stride_s, mask=row_mask, other=0.0).to(tl.float32)
    return sc


@triton.jit
def _dlogits(p, sc, cols, t, ignored, bad, eps, V, SMOOTH: tl.constexpr):
    """(ROWS, BLOCK_V) gradient block from probabilities ``p``; see the module docstring."""
    is_t = cols[None, :] == t[:, None]
    ps = p * sc[:, None]
    if SMOOTH:
        eps_v = eps / V
        d = ps - tl.where(is_t, ((1.0 - eps) + eps_v) * sc[:, None], eps_v * sc[:, None])
    else:
        d = ps - tl.where(is_t, sc[:, None], 0.0)
    d = tl.where(ignored[:, None], p * 0.0, d)
    return tl.where(bad[:, None], float("nan"), d)


@triton.jit
def xent_fwd_kernel(
    x_ptr, t_ptr, loss_ptr, st_ptr, dx_ptr, s_ptr,
    M, V, ignore_index, eps,
    stride_xm, stride_xv, stride_t, stride_l, stride_dxm, stride_dxv, stride_s,
    ROWS: tl.constexpr, BLOCK_V: tl.constexpr, SINGLE: tl.constexpr, SMOOTH: tl.constexpr,
    WRITE_LOSS: tl.constexpr, WRITE_STATS: tl.constexpr, WRITE_GRAD: tl.constexpr, SCALE: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """Loss (and the statistics (m, ls), and optionally dx) of ROWS rows per program; grid (cdiv(M, ROWS),).

    SINGLE: the whole row is one (ROWS, BLOCK_V >= V) block held in registers (x read once, also
    with WRITE_GRAD); else an online logsumexp over BLOCK_V chunks (x read once, twice with WRITE_GRAD).
    Losses go to loss_ptr in its element type (fp32 scratch for a later reduction, or the output).
    """
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < M
    t, ignored, bad = _targets(t_ptr, rows, row_mask, V, ignore_index, stride_t)
    x_row = x_ptr + rows.to(tl.int64) * stride_xm
    cols = tl.arange(0, BLOCK_V)
    m = tl.full((ROWS,), -3.4028234663852886e38, tl.float32)
    sx = tl.zeros((ROWS,), tl.float32)
    if SINGLE:
        mask = row_mask[:, None] & (cols < V)[None, :]
        x = tl.load(x_row[:, None] + cols[None, :] * stride_xv, mask=mask, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, 1))
        s = tl.sum(tl.exp(x - m[:, None]), 1)
        if SMOOTH:
            sx = tl.sum(tl.where(mask, x, 0.0), 1)
    else:
        s = tl.zeros((ROWS,), tl.float32)
        for v0 in range(0, V, BLOCK_V):
            c = v0 + cols
            mask = row_mask[:, None] & (c < V)[None, :]
            xb = tl.load(x_row[:, None] + c[None, :] * stride_xv, mask=mask, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(xb, 1))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(xb - m_new[:, None]), 1)
            m = m_new
            if SMOOTH:
                sx += tl.sum(tl.where(mask, xb, 0.0), 1)
    ls = tl.log(s)
    if WRITE_LOSS:
        keep = row_mask & (t != ignore_index) & (t >= 0) & (t < V)
        x_t = tl.load(x_row + t.to(tl.int64) * stride_xv, mask=keep, other=0.0).to(tl.float32)
        if SMOOTH:
            loss = (1.0 - eps) * ((m - x_t) + ls) + eps * ((m - sx / V) + ls)
        else:
            loss = (m - x_t) + ls
        loss = tl.where(ignored, 0.0, tl.where(bad, float("nan"), loss))
        tl.store(loss_ptr + rows.to(tl.int64) * stride_l, to_output(loss, loss_ptr, EMULATE), mask=row_mask)
    if WRITE_STATS:
        tl.store(st_ptr + rows.to(tl.int64) * 2, m + (s - s), mask=row_mask)  # NaN with s (NaN, +inf rows)
        tl.store(st_ptr + rows.to(tl.int64) * 2 + 1, ls, mask=row_mask)
    if WRITE_GRAD:
        sc = _row_scale(s_ptr, rows, row_mask, stride_s, ROWS, SCALE)
        dx_row = dx_ptr + rows.to(tl.int64) * stride_dxm
        if SINGLE:
            d = _dlogits(tl.exp((x - m[:, None]) - ls[:, None]), sc, cols, t, ignored, bad, eps, V, SMOOTH)
            tl.store(dx_row[:, None] + cols[None, :] * stride_dxv, to_output(d, dx_ptr, EMULATE), mask=mask)
        else:
            for v0 in range(0, V, BLOCK_V):
                c = v0 + cols
                mask = row_mask[:, None] & (c < V)[None, :]
                xb = tl.load(x_row[:, None] + c[None, :] * stride_xv, mask=mask, other=0.0).to(tl.float32)
                d = _dlogits(tl.exp((xb - m[:, None]) - ls[:, None]), sc, c, t, ignored, bad, eps, V, SMOOTH)
                tl.store(dx_row[:, None] + c[None, :] * stride_dxv, to_output(d, dx_ptr, EMULATE), mask=mask)


@triton.jit
def xent_bwd_kernel(
    x_ptr, t_ptr, st_ptr, s_ptr, dx_ptr,
    M, V, col0, V_all, ignore_index, eps,
    stride_xm, stride_xv, stride_t, stride_s, stride_dxm, stride_dxv,
    ROWS: tl.constexpr, BLOCK_V: tl.constexpr, SMOOTH: tl.constexpr, SCALE: tl.constexpr, EMULATE: tl.constexpr,
):
    """dx from x and the forward's statistics (m, ls) (fp32, (M, 2) contiguous), ROWS rows per program
    over BLOCK_V chunks (one chunk when BLOCK_V >= V); grid (cdiv(M, ROWS),). Reads x once, writes dx
    once (in place allowed).

    x may hold a slice of columns of the full logits: its V columns are the classes col0 .. col0 + V - 1
    of V_all (the whole row: col0 = 0, V_all = V). Targets and the smoothing term eps / V_all use the
    global class index; the statistics are the whole row's. Only x's own V columns are addressed."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < M
    t, ignored, bad = _targets(t_ptr, rows, row_mask, V_all, ignore_index, stride_t)
    m = tl.load(st_ptr + rows.to(tl.int64) * 2, mask=row_mask, other=0.0)
    ls = tl.load(st_ptr + rows.to(tl.int64) * 2 + 1, mask=row_mask, other=0.0)
    sc = _row_scale(s_ptr, rows, row_mask, stride_s, ROWS, SCALE)
    x_row = x_ptr + rows.to(tl.int64) * stride_xm
    dx_row = dx_ptr + rows.to(tl.int64) * stride_dxm
    cols = tl.arange(0, BLOCK_V)
    for v0 in range(0, V, BLOCK_V):
        c = v0 + cols
        mask = row_mask[:, None] & (c < V)[None, :]
        xb = tl.load(x_row[:, None] + c[None, :] * stride_xv, mask=mask, other=0.0).to(tl.float32)
        d = _dlogits(tl.exp((xb - m[:, None]) - ls[:, None]), sc, col0 + c, t, ignored, bad, eps, V_all, SMOOTH)
        tl.store(dx_row[:, None] + c[None, :] * stride_dxv, to_output(d, dx_ptr, EMULATE), mask=mask)


@triton.jit
def xent_reduce_kernel(
    loss_ptr, t_ptr, out_ptr,
    M, ignore_index, stride_t,
    MEAN: tl.constexpr, BLOCK: tl.constexpr, EMULATE: tl.constexpr,
):
    """One program: out = sum of the M fp32 row losses, divided by the number of rows whose target is
    not ignore_index when MEAN (0/0 = NaN when every row is ignored, as torch); a fixed order, so
    deterministic. Reads 12 M bytes."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    cnt = tl.zeros((BLOCK,), tl.float32)
    for m0 in range(0, M, BLOCK):
        r = m0 + offs
        mask = r < M
        acc += tl.load(loss_ptr + r, mask=mask, other=0.0)
        t = tl.load(t_ptr + r.to(tl.int64) * stride_t, mask=mask, other=0)
        cnt += tl.where(mask & (t != ignore_index), 1.0, 0.0)
    total = tl.sum(acc, 0)
    if MEAN:
        n = tl.sum(cnt, 0)
        tl.store(out_ptr, to_output(total / n, out_ptr, EMULATE))
    else:
        tl.store(out_ptr, to_output(total, out_ptr, EMULATE))


@triton.jit
def xent_scale_kernel(
    t_ptr, g_ptr, s_ptr,
    M, ignore_index, stride_t,
    BLOCK: tl.constexpr,
):
    """One program: s = g / (number of rows whose target is not ignore_index), the gradient scale of a
    mean reduction (fp32). Reads 8 M bytes."""
    offs = tl.arange(0, BLOCK)
    cnt = tl.zeros((BLOCK,), tl.float32)
    for m0 in range(0, M, BLOCK):
        r = m0 + offs
        mask = r < M
        t = tl.load(t_ptr + r.to(tl.int64) * stride_t, mask=mask, other=0)
        cnt += tl.where(mask & (t != ignore_index), 1.0, 0.0)
    tl.store(s_ptr, tl.load(g_ptr).to(tl.float32) / tl.sum(cnt, 0))
