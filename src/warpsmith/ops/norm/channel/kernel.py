"""Channel normalization kernels (only ``@triton.jit`` code): batch, instance and group norm over
an (N, C, S) view of an (N, C, *) input (S: the spatial dims flattened; NCHW gives unit spatial
stride, channels-last stride C: both read in place).

``plane_stats_kernel`` (grid (C, N)): per plane (n, c), a two-pass mean and sum of squared
deviations M2 over its S elements in fp32 (pass 1 sums, pass 2 sums (x - mean)^2: no cancellation).
The launcher merges planes into groups with Chan's identity (exact: M2 = sum M2_p + S sum (mean_p
- mean)^2) in a fixed order. ``channel_apply_kernel`` (grid (cdiv(S, BLOCK), C, N)):
y = (x - mean[n, c]) * scale[n, c] + shift[c] with per-plane mean and scale = rstd * w.
Backward: ``plane_grad_sums_kernel`` (grid (C, N)) sums dy * xhat and dy per plane;
``channel_grad_apply_kernel`` writes dx = r (w dy - k1 - xhat k2), r = rstd, with the group
constants k1 = mean(w dy), k2 = mean(w dy xhat) per plane (zero in inference mode).
Bytes: forward reads x twice (stats) + once (apply), writes y; backward reads dy, x twice, writes dx.
Programs of a grid index planes by program id (int64 offsets) and positions in int32.
"""
from ....core._triton import tl, triton
from ...shared.kernel import to_output


@triton.jit
def plane_stats_kernel(x_ptr, mean_ptr, m2_ptr, C, S, stride_xn, stride_xc, stride_xs,
                       BLOCK: tl.constexpr):
    """mean[n, c] and M2[n, c] (fp32, contiguous (N, C)) of plane (n, c)."""
    c = tl.program_id(0)
    n = tl.program_id(1)
    base = x_ptr + n.to(tl.int64) * stride_xn + c.to(tl.int64) * stride_xc
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, S, BLOCK):
        s = start + offs
        acc += tl.load(base + s.to(tl.int64) * stride_xs, mask=s < S, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / S
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, S, BLOCK):
        s = start + offs
        v = tl.load(base + s.to(tl.int64) * stride_xs, mask=s < S, other=0.0).to(tl.float32)
        d = tl.where(s < S, v - mean, 0.0)
        acc2 += d * d
    plane = n.to(tl.int64) * C + c
    tl.store(mean_ptr + plane, mean)
    tl.store(m2_ptr + plane, tl.sum(acc2, axis=0))


@triton.jit
def channel_apply_kernel(x_ptr, y_ptr, mean_ptr, scale_ptr, shift_ptr, C, S,
                         stride_xn, stride_xc, stride_xs, stride_yn, stride_yc, stride_ys,
                         BLOCK: tl.constexpr, HAS_SHIFT: tl.constexpr, EMULATE: tl.constexpr):
    """y = (x - mean[n, c]) * scale[n, c] (+ shift[c]); grid (cdiv(S, BLOCK), C, N)."""
    s = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1)
    n = tl.program_id(2)
    plane = n.to(tl.int64) * C + c
    mean = tl.load(mean_ptr + plane)
    scale = tl.load(scale_ptr + plane)
    m = s < S
    x = tl.load(x_ptr + n.to(tl.int64) * stride_xn + c.to(tl.int64) * stride_xc + s.to(tl.int64) * stride_xs,
                mask=m, other=0.0).to(tl.float32)
    y = (x - mean) * scale
    if HAS_SHIFT:
        y += tl.load(shift_ptr + c).to(tl.float32)
    tl.store(y_ptr + n.to(tl.int64) * stride_yn + c.to(tl.int64) * stride_yc + s.to(tl.int64) * stride_ys,
             to_output(y, y_ptr, EMULATE), mask=m)


@triton.jit
def plane_grad_sums_kernel(dy_ptr, x_ptr, mean_ptr, rstd_ptr, a_ptr, b_ptr, C, S,
                           stride_dyn, stride_dyc, stride_dys, stride_xn, stride_xc, stride_xs,
                           BLOCK: tl.constexpr):
    """a[n, c] = sum dy * xhat, b[n, c] = sum dy over plane (n, c), xhat = (x - mean) rstd."""
    c = tl.program_id(0)
    n = tl.program_id(1)
    plane = n.to(tl.int64) * C + c
    mean = tl.load(mean_ptr + plane)
    rstd = tl.load(rstd_ptr + plane)
    dy_base = dy_ptr + n.to(tl.int64) * stride_dyn + c.to(tl.int64) * stride_dyc
    x_base = x_ptr + n.to(tl.int64) * stride_xn + c.to(tl.int64) * stride_xc
    offs = tl.arange(0, BLOCK)
    acc_a = tl.zeros((BLOCK,), dtype=tl.float32)
    acc_b = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, S, BLOCK):
        s = start + offs
        m = s < S
        dy = tl.load(dy_base + s.to(tl.int64) * stride_dys, mask=m, other=0.0).to(tl.float32)
        x = tl.load(x_base + s.to(tl.int64) * stride_xs, mask=m, other=0.0).to(tl.float32)
        acc_a += dy * tl.where(m, (x - mean) * rstd, 0.0)
        acc_b += dy
    tl.store(a_ptr + plane, tl.sum(acc_a, axis=0))
    tl.store(b_ptr + plane, tl.sum(acc_b, axis=0))


@triton.jit
def channel_grad_apply_kernel(dy_ptr, x_ptr, dx_ptr, mean_ptr, rstd_ptr, w_ptr, k1_ptr, k2_ptr, C, S,
                              stride_dyn, stride_dyc, stride_dys, stride_xn, stride_xc, stride_xs,
                              stride_dxn, stride_dxc, stride_dxs,
                              BLOCK: tl.constexpr, HAS_W: tl.constexpr, EMULATE: tl.constexpr):
    """dx = rstd (w dy - k1 - xhat k2) per plane constants; grid (cdiv(S, BLOCK), C, N)."""
    s = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1)
    n = tl.program_id(2)
    plane = n.to(tl.int64) * C + c
    mean = tl.load(mean_ptr + plane)
    rstd = tl.load(rstd_ptr + plane)
    k1 = tl.load(k1_ptr + plane)
    k2 = tl.load(k2_ptr + plane)
    m = s < S
    s64 = s.to(tl.int64)
    dy = tl.load(dy_ptr + n.to(tl.int64) * stride_dyn + c.to(tl.int64) * stride_dyc + s64 * stride_dys,
                 mask=m, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + n.to(tl.int64) * stride_xn + c.to(tl.int64) * stride_xc + s64 * stride_xs,
                mask=m, other=0.0).to(tl.float32)
    g = dy
    if HAS_W:
        g = dy * tl.load(w_ptr + c).to(tl.float32)
    dx = rstd * (g - k1 - (x - mean) * rstd * k2)
    tl.store(dx_ptr + n.to(tl.int64) * stride_dxn + c.to(tl.int64) * stride_dxc + s64 * stride_dxs,
             to_output(dx, dx_ptr, EMULATE), mask=m)
