"""Pooling kernels (only ``@triton.jit`` code): max / avg pooling and adaptive avg pooling over an
(N, C, D, H, W) input read through its strides (1-D and 2-D problems have D = H = 1).

Grid of the backward and adaptive kernels: (cdiv(spatial elements, BLOCK), C, N): program (b, c, n)
handles BLOCK consecutive flat spatial positions of plane (n, c). The max / avg forward takes a
(ROWS, BLOCK) tile: grid (cdiv(output positions, BLOCK), cdiv(N C, ROWS)), ROWS consecutive planes
(flat n C + c) at the same BLOCK positions, so a launch over many small planes is few programs. Plane
offsets are int64; spatial coordinates are int32 and multiplied by the strides in int64.

Forward (``pool_fwd_kernel``), per output (od, oh, ow): the window starts at o * s - p and its
taps are k * dilation apart; max keeps the first largest tap (a NaN tap wins, the last NaN,
as torch's CPU kernel) and its flat input index ``(id H + ih) W + iw``; avg sums in fp32 and
divides by ``divisor_override``, the window clipped to the padded input (count_include_pad) or to
the input. Bytes: read about volume / stride^dims x the input (cache-resident re-reads), write y
(+ 8 bytes an index). FLOPs: volume per output.

Backward (``pool_bwd_kernel``), per input element: the gather form. Input i is tap k of output
o = (i + p - k d) / s where that divides exactly; it sums, over the taps in a fixed order, dy[o]
where o's saved index is i (max) or dy[o] / divisor(o) (avg). No two programs write one element
and no atomics: deterministic. Adaptive pooling (``adaptive_fwd_kernel``, ``adaptive_bwd_kernel``)
uses windows [floor(o L / O), ceil((o + 1) L / O)) and, backward, the outputs
[floor(i O / L), ceil((i + 1) O / L)) that contain input i; loop bounds MD, MH, MW are host-computed
maxima of those counts.
"""
from ...core._triton import tl, triton
from ..shared.kernel import to_output


@triton.jit
def _split(s, A, B):
    """Flat s over (., A, B) -> (s // (A B), (s // B) % A, s % B)."""
    b = s % B
    t = s // B
    return t // A, t % A, b


@triton.jit
def _avg_divisor(od, oh, ow, D, H, W, KD, KH, KW, SD, SH, SW, PD, PH, PW, DIVISOR,
                 COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr):
    """torch's avg_pool divisor of output (od, oh, ow), as fp32."""
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    d1 = tl.minimum(d0 + KD, D + PD)
    h1 = tl.minimum(h0 + KH, H + PH)
    w1 = tl.minimum(w0 + KW, W + PW)
    if HAS_DIVISOR:
        div = (od * 0).to(tl.float32) + DIVISOR
    elif COUNT_PAD:
        div = (d1 - d0).to(tl.float32) * (h1 - h0).to(tl.float32) * (w1 - w0).to(tl.float32)
    else:
        dd = tl.minimum(d1, D) - tl.maximum(d0, 0)
        hh = tl.minimum(h1, H) - tl.maximum(h0, 0)
        ww = tl.minimum(w1, W) - tl.maximum(w0, 0)
        div = dd.to(tl.float32) * hh.to(tl.float32) * ww.to(tl.float32)
    return tl.maximum(div, 1.0)  # >= 1 at every real output; lanes past the end would divide by 0


@triton.jit
def pool_fwd_kernel(
    x_ptr, y_ptr, idx_ptr,
    N, C, D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, DIVISOR,
    stride_xn, stride_xc, stride_xd, stride_xh, stride_xw,
    stride_yn, stride_yc, stride_yd, stride_yh, stride_yw,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, IS_MAX: tl.constexpr, COUNT_PAD: tl.constexpr,
    HAS_DIVISOR: tl.constexpr, RETURN_INDICES: tl.constexpr, EMULATE: tl.constexpr,
):
    """y[n, c, od, oh, ow] = max or mean of its window; grid (cdiv(OD OH OW, BLOCK), cdiv(N C, ROWS)):
    program (b, g) computes a (ROWS, BLOCK) tile: planes r = g ROWS + i (n = r // C, c = r % C, int64)
    at the BLOCK flat positions b BLOCK + j of each (the window arithmetic is shared by the rows)."""
    s = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r = tl.program_id(1).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    n = r // C
    c = r % C
    od, oh, ow = _split(s, OH, OW)
    ok = (n < N)[:, None] & ((s < OD * OH * OW) & (od < OD))[None, :]
    x_base = x_ptr + (n * stride_xn + c * stride_xc)[:, None]
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    best = tl.full((ROWS, BLOCK), float("-inf"), tl.float32)
    best_i = tl.full((ROWS, BLOCK), -1, tl.int64)
    acc = tl.zeros((ROWS, BLOCK), dtype=tl.float32)
    for kd in range(0, KD):
        i_d = d0 + kd * DD
        ok_d = (i_d >= 0) & (i_d < D)
        for kh in range(0, KH):
            i_h = h0 + kh * DH
            ok_h = ok_d & (i_h >= 0) & (i_h < H)
            for kw in range(0, KW):
                i_w = w0 + kw * DW
                tap = ok_h & (i_w >= 0) & (i_w < W)
                m = ok & tap[None, :]
                off = i_d.to(tl.int64) * stride_xd + i_h.to(tl.int64) * stride_xh + i_w.to(tl.int64) * stride_xw
                v = tl.load(x_base + off[None, :], mask=m, other=float("-inf") if IS_MAX else 0.0)
                v = v.to(tl.float32)
                if IS_MAX:
                    if RETURN_INDICES:  # (the interpreter runs what a GPU build would drop unstored)
                        take = (m & ((v > best) | (v != v) | (best_i < 0))).to(tl.int64)
                        # blend, not select: the index follows the value (NaN wins, else the first maximum)
                        flat = (i_d.to(tl.int64) * H + i_h) * W + i_w
                        best_i = best_i + take * (flat[None, :] - best_i)
                    best = tl.maximum(best, v, propagate_nan=tl.PropagateNan.ALL)
                else:
                    acc += v
    if IS_MAX:
        out = best
    else:
        out = acc / _avg_divisor(od, oh, ow, D, H, W, KD, KH, KW, SD, SH, SW, PD, PH, PW, DIVISOR,
                                 COUNT_PAD, HAS_DIVISOR)[None, :]
    y_off = ((n * stride_yn + c * stride_yc)[:, None]
             + (od.to(tl.int64) * stride_yd + oh.to(tl.int64) * stride_yh + ow.to(tl.int64) * stride_yw)[None, :])
    tl.store(y_ptr + y_off, to_output(out, y_ptr, EMULATE), mask=ok)
    if RETURN_INDICES:
        tl.store(idx_ptr + y_off, best_i, mask=ok)


@triton.jit
def _taps(i, P, KI, S, DIL, O):
    """Output o of which input i is tap k (o s - p + k dil == i), and whether there is one."""
    t = i + P - KI * DIL
    tt = tl.maximum(t, 0)
    o = tt // S
    return o, (t >= 0) & (tt - o * S == 0) & (o < O)


@triton.jit
def pool_bwd_kernel(
    dy_ptr, idx_ptr, dx_ptr,
    D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, DIVISOR,
    stride_dyn, stride_dyc, stride_dyd, stride_dyh, stride_dyw,
    stride_xn, stride_xc, stride_xd, stride_xh, stride_xw,
    BLOCK: tl.constexpr, IS_MAX: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """dx[n, c, i] = sum over the taps (kd, kh, kw) routing to i; grid (cdiv(D H W, BLOCK), C, N).
    ``idx`` (max) has dy's strides."""
    s = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1).to(tl.int64)
    n = tl.program_id(2).to(tl.int64)
    i_d, i_h, i_w = _split(s, H, W)
    ok = (s < D * H * W) & (i_d < D)
    flat = s.to(tl.int64)
    dy_base = n * stride_dyn + c * stride_dyc
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for kd in range(0, KD):
        od, ok_d = _taps(i_d, PD, kd, SD, DD, OD)
        ok_d = ok & ok_d
        for kh in range(0, KH):
            oh, ok_h = _taps(i_h, PH, kh, SH, DH, OH)
            ok_h = ok_d & ok_h
            for kw in range(0, KW):
                ow, ok_w = _taps(i_w, PW, kw, SW, DW, OW)
                m = ok_h & ok_w
                off = (dy_base + od.to(tl.int64) * stride_dyd + oh.to(tl.int64) * stride_dyh
                       + ow.to(tl.int64) * stride_dyw)
                g = tl.load(dy_ptr + off, mask=m, other=0.0).to(tl.float32)
                if IS_MAX:
                    hit = tl.load(idx_ptr + off, mask=m, other=-1) == flat
                    acc += tl.where(m & hit, g, 0.0)
                else:
                    acc += g / _avg_divisor(od, oh, ow, D, H, W, KD, KH, KW, SD, SH, SW, PD, PH, PW, DIVISOR,
                                            COUNT_PAD, HAS_DIVISOR)
    x_off = (n * stride_xn + c * stride_xc + i_d.to(tl.int64) * stride_xd + i_h.to(tl.int64) * stride_xh
             + i_w.to(tl.int64) * stride_xw)
    tl.store(dx_ptr + x_off, to_output(acc, dx_ptr, EMULATE), mask=ok)


@triton.jit
def _window(o, L, O):
    """Adaptive window [floor(o L / O), ceil((o + 1) L / O)) of output o (products in int64)."""
    o64 = o.to(tl.int64)
    return ((o64 * L) // O).to(tl.int32), (((o64 + 1) * L + O - 1) // O).to(tl.int32)


@triton.jit
def adaptive_fwd_kernel(
    x_ptr, y_ptr,
    D, H, W, OD, OH, OW, MD, MH, MW,
    stride_xn, stride_xc, stride_xd, stride_xh, stride_xw,
    stride_yn, stride_yc, stride_yd, stride_yh, stride_yw,
    BLOCK: tl.constexpr, EMULATE: tl.constexpr,
):
    """y = mean of x over the adaptive window; MD, MH, MW bound the window lengths."""
    s = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1).to(tl.int64)
    n = tl.program_id(2).to(tl.int64)
    od, oh, ow = _split(s, OH, OW)
    ok = (s < OD * OH * OW) & (od < OD)
    d0, d1 = _window(od, D, OD)
    h0, h1 = _window(oh, H, OH)
    w0, w1 = _window(ow, W, OW)
    x_base = x_ptr + n * stride_xn + c * stride_xc
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for kd in range(0, MD):
        i_d = d0 + kd
        ok_d = ok & (i_d < d1)
        for kh in range(0, MH):
            i_h = h0 + kh
            ok_h = ok_d & (i_h < h1)
            for kw in range(0, MW):
                i_w = w0 + kw
                m = ok_h & (i_w < w1)
                acc += tl.load(x_base + i_d.to(tl.int64) * stride_xd + i_h.to(tl.int64) * stride_xh
                               + i_w.to(tl.int64) * stride_xw, mask=m, other=0.0).to(tl.float32)
    out = acc / ((d1 - d0).to(tl.float32) * (h1 - h0).to(tl.float32) * (w1 - w0).to(tl.float32))
    y_off = (n * stride_yn + c * stride_yc + od.to(tl.int64) * stride_yd + oh.to(tl.int64) * stride_yh
             + ow.to(tl.int64) * stride_yw)
    tl.store(y_ptr + y_off, to_output(out, y_ptr, EMULATE), mask=ok)


@triton.jit
def adaptive_bwd_kernel(
    dy_ptr, dx_ptr,
    D, H, W, OD, OH, OW, MD, MH, MW,
    stride_dyn, stride_dyc, stride_dyd, stride_dyh, stride_dyw,
    stride_xn, stride_xc, stride_xd, stride_xh, stride_xw,
    BLOCK: tl.constexpr, EMULATE: tl.constexpr,
):
    """dx[i] = sum over the outputs o whose window holds i of dy[o] / |window o|; MD, MH, MW
    bound how many outputs hold one input."""
    s = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1).to(tl.int64)
    n = tl.program_id(2).to(tl.int64)
    i_d, i_h, i_w = _split(s, H, W)
    ok = (s < D * H * W) & (i_d < D)
    dy_base = n * stride_dyn + c * stride_dyc
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for jd in range(0, MD):
        od = ((i_d.to(tl.int64) * OD) // D).to(tl.int32) + jd
        d0, d1 = _window(od, D, OD)
        ok_d = ok & (od < OD) & (d0 <= i_d) & (i_d < d1)
        for jh in range(0, MH):
            oh = ((i_h.to(tl.int64) * OH) // H).to(tl.int32) + jh
            h0, h1 = _window(oh, H, OH)
            ok_h = ok_d & (oh < OH) & (h0 <= i_h) & (i_h < h1)
            for jw in range(0, MW):
                ow = ((i_w.to(tl.int64) * OW) // W).to(tl.int32) + jw
                w0, w1 = _window(ow, W, OW)
                m = ok_h & (ow < OW) & (w0 <= i_w) & (i_w < w1)
                g = tl.load(dy_ptr + dy_base + od.to(tl.int64) * stride_dyd + oh.to(tl.int64) * stride_dyh
                            + ow.to(tl.int64) * stride_dyw, mask=m, other=0.0).to(tl.float32)
                acc += g / ((d1 - d0).to(tl.float32) * (h1 - h0).to(tl.float32) * (w1 - w0).to(tl.float32))
    x_off = (n * stride_xn + c * stride_xc + i_d.to(tl.int64) * stride_xd + i_h.to(tl.int64) * stride_xh
             + i_w.to(tl.int64) * stride_xw)
    tl.store(dx_ptr + x_off, to_output(acc, dx_ptr, EMULATE), mask=ok)
