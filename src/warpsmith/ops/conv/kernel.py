"""Convolution kernels as implicit GEMMs (only ``@triton.jit`` code; no im2col is materialized).

Every form is 3-D; 1-D and 2-D calls pass singleton depth/height. Per group ``g``:

- ``conv_fwd_kernel`` with TRANSPOSED=False: ``y[n, g KG + k, o] = sum_{c, t} x[n, g CG + c, o s - p + t d]
  w[g, k, c, t]`` (GEMM rows: output pixels n x OD x OH x OW; columns: KG output channels;
  reduction: CG x KD x KH x KW);
- with TRANSPOSED=True (gather form of the transposed conv): ``i = (o + p - t d) / s``, a term only
  where that division is exact and ``0 <= i < I`` (the stride holes are masked);
- ``conv_transpose_phase_kernel``: the transposed conv by output phase: each program reads only the taps
  that feed its phase's pixels (``phase_taps``), no stride holes;
- ``conv_wgrad_kernel``: ``dw[g, k, c, t] = sum_{n, o} a[n, g KG + k, o] b[n, g CG + c, o s - p + t d]``
  (rows: KG, columns: CG x window, reduction over n x output pixels); the weight gradient of a
  conv (a = dy, b = x) and of a transposed conv (a = x, b = dy).

The weight is addressed as ``w[g, k, c, t]`` through strides (``swg, swn, swc``), so the forward
layout (C_out, C_in/G, ...) and the transposed one (C_in, C_out/G, ...) are the same kernel. FLOPs:
2 x output pixels x C_out x CG x window; minimum bytes: x + w + y (+ bias, residual).
Reduction order (LOOP): "nested" walks window positions outside and channel blocks of BLOCK_K
inside; "flat" cuts the flattened (window, channel) index into blocks (small CG, e.g. depthwise).
"""
from ...core._triton import tl, triton
from ..shared.kernel import apply_activation, dot_acc, to_output


@triton.jit
def split_pixels(rm, OD, OH, OW):
    """Output-pixel index -> (n, od, oh, ow)."""
    ow = rm % OW
    t = rm // OW
    oh = t % OH
    t = t // OH
    od = t % OD
    n = t // OD
    return n, od, oh, ow


@triton.jit
def group_channel(g, CG):
    """First input channel of group ``g``."""
    return g * CG


@triton.jit
def input_coord(o, t, size, stride, pad, dil, TRANSPOSED: tl.constexpr):
    """Input coordinate feeding output coordinate ``o`` through tap ``t``, and whether it exists."""
    if TRANSPOSED:
        num = o + pad - t * dil
        i = num // stride
        ok = (num >= 0) & (num - i * stride == 0) & (i < size)
    else:
        i = o * stride - pad + t * dil
        ok = (i >= 0) & (i < size)
    return i, ok


@triton.jit
def reduction_index(i, rk, CG, KH, KW, NBLK_C, BLOCK_K: tl.constexpr, LOOP: tl.constexpr):
    """Iteration ``i`` of the reduction -> per-lane (c, kd, kh, kw) and the lanes' validity."""
    if LOOP == "nested":
        tap = i // NBLK_C
        c = (i % NBLK_C) * BLOCK_K + rk
        ok = c < CG
        tap = tap + rk * 0
    else:
        r = i * BLOCK_K + rk
        c = r % CG
        tap = r // CG
        ok = tap < NBLK_C  # NBLK_C holds the window volume in the flat order
    kw = tap % KW
    kh = (tap // KW) % KH
    kd = tap // (KW * KH)
    return c, kd, kh, kw, ok


@triton.jit
def store_tile(acc, y_ptr, bias_ptr, res_ptr, n, od, oh, ow, row_ok, rco, CO, scale,
               syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
               HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACTIVATION: tl.constexpr, EMULATE: tl.constexpr):
    """``y = act(scale acc + bias + residual)`` stored at output pixels (n, od, oh, ow) (rows, valid
    where ``row_ok``), columns ``rco`` (channels)."""
    n = n.to(tl.int64)
    mask = row_ok[:, None] & (rco < CO)[None, :]
    acc = acc * scale
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rco * stride_bias, mask=rco < CO, other=0.0).to(tl.float32)[None, :]
    if HAS_RES:
        roffs = (n * srn + od * srd + oh * srh + ow * srw)[:, None] + (rco * src)[None, :]
        acc += tl.load(res_ptr + roffs, mask=mask, other=0.0).to(tl.float32)
    acc = apply_activation(acc, ACTIVATION)
    yoffs = (n * syn + od * syd + oh * syh + ow * syw)[:, None] + (rco * syc)[None, :]
    tl.store(y_ptr + yoffs, to_output(acc, y_ptr, EMULATE), mask=mask)


@triton.jit
def conv_epilogue(acc, y_ptr, bias_ptr, res_ptr, rm, rco, M, CO, OD, OH, OW, scale,
                  syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
                  HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACTIVATION: tl.constexpr, EMULATE: tl.constexpr):
    """``store_tile`` at rows ``rm`` (output pixels in (n, od, oh, ow) order)."""
    n, od, oh, ow = split_pixels(rm, OD, OH, OW)
    store_tile(acc, y_ptr, bias_ptr, res_ptr, n, od, oh, ow, rm < M, rco, CO, scale,
               syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
               HAS_BIAS, HAS_RES, ACTIVATION, EMULATE)


@triton.jit
def nonfinite(v):
    """Where ``v`` is inf or NaN."""
    v = v.to(tl.float32)
    return (v != v) | (tl.abs(v) == float("inf"))


@triton.jit
def exact_products(a, a_ok, b, acc, flags, IS_FP32: tl.constexpr, PRECISION: tl.constexpr,
                   EMULATE: tl.constexpr):
    """``acc`` + the products of the pairs ``(m, k)`` where ``a_ok``, as torch's transposed conv forms
    them: it multiplies real inputs only, so a masked lane (loaded as 0) must not meet an inf weight
    (0 x inf would be NaN). The finite part is the fast path's dot of the operands with infinities
    set to 0 (a NaN input still spreads through it); the infinite products of real pairs go to
    ``flags`` (bit 0: a +inf product, bit 1: a -inf one, both: NaN), counted by dots of 0/1
    indicators (exact)."""
    inf = float("inf")
    fa = a_ok & (tl.abs(a.to(tl.float32)) != inf)
    fb = ~nonfinite(b)
    acc = dot_acc(tl.where(fa, a, 0.0).to(a.dtype), tl.where(fb, b, 0.0).to(b.dtype), acc, IS_FP32, PRECISION,
                  EMULATE)
    h = tl.float16
    a32, b32 = a.to(tl.float32), b.to(tl.float32)
    a_pos, a_neg = (a_ok & (a32 > 0)).to(h), (a_ok & (a32 < 0)).to(h)
    a_pinf, a_ninf = (a_ok & (a32 == inf)).to(h), (a_ok & (a32 == -inf)).to(h)
    b_pinf, b_ninf = (b32 == inf).to(h), (b32 == -inf).to(h)
    b_pos, b_neg = (fb & (b32 > 0)).to(h), (fb & (b32 < 0)).to(h)
    t = tl.dot(a_ok.to(h), (b32 != b32).to(h))  # a real input times a NaN weight
    t = tl.dot((a_ok & (a32 == 0)).to(h), b_pinf + b_ninf, t)  # 0 x inf
    t = tl.dot(a_pinf + a_ninf, (b32 == 0).to(h), t)  # inf x 0
    flags = tl.where(t > 0, 3.0, flags)
    t = tl.dot(a_pos, b_pinf)
    t = tl.dot(a_neg, b_ninf, t)
    t = tl.dot(a_pinf, b_pos, t)
    t = tl.dot(a_ninf, b_neg, t)
    flags = tl.where((t > 0) & (flags != 1.0) & (flags != 3.0), flags + 1.0, flags)  # bit 0 set
    t = tl.dot(a_pos, b_ninf)
    t = tl.dot(a_neg, b_pinf, t)
    t = tl.dot(a_pinf, b_neg, t)
    t = tl.dot(a_ninf, b_pos, t)
    flags = tl.where((t > 0) & (flags < 2.0), flags + 2.0, flags)  # bit 1 set
    return acc, flags


@triton.jit
def with_specials(acc, flags):
    """``exact_products``' sum with its infinite products: NaN where both signs (or a NaN) occurred."""
    return tl.where(flags == 0.0, acc, tl.where(flags == 3.0, float("nan"),
                                                tl.where(flags == 1.0, acc + float("inf"), acc - float("inf"))))


@triton.jit
def gather_operands(i, rk, x_row, w_col, row_ok, col_ok, od, oh, ow, CG, D, H, W, KH, KW, nblk,
                    stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w,
                    sxc, sxd, sxh, sxw, swc, swd, swh, sww, BLOCK_K: tl.constexpr, LOOP: tl.constexpr,
                    TRANSPOSED: tl.constexpr):
    """Reduction iteration ``i`` of ``conv_fwd_kernel``: the gathered input tile, where it is a real
    input (not padding, not a stride hole, not a masked lane), and the weight tile."""
    c, kd, kh, kw, k_ok = reduction_index(i, rk, CG, KH, KW, nblk, BLOCK_K, LOOP)
    id_, okd = input_coord(od[:, None], kd[None, :], D, stride_d, pad_d, dil_d, TRANSPOSED)
    ih, okh = input_coord(oh[:, None], kh[None, :], H, stride_h, pad_h, dil_h, TRANSPOSED)
    iw, okw = input_coord(ow[:, None], kw[None, :], W, stride_w, pad_w, dil_w, TRANSPOSED)
    a_ok = row_ok[:, None] & k_ok[None, :] & okd & okh & okw
    a = tl.load(x_row[:, None] + c[None, :] * sxc + id_ * sxd + ih * sxh + iw * sxw, mask=a_ok, other=0.0)
    b_offs = c[:, None] * swc + (kd * swd + kh * swh + kw * sww)[:, None]
    b = tl.load(w_col[None, :] + b_offs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
    return a, a_ok, b


@triton.jit
def conv_fwd_kernel(
    x_ptr, w_ptr, y_ptr, bias_ptr, res_ptr, p_ptr,
    BATCH, CG, KG, D, H, W, OD, OH, OW, KD, KH, KW,
    stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w, ITERS_PER_SPLIT, scale,
    sxn, sxc, sxd, sxh, sxw, swg, swn, swc, swd, swh, sww,
    syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, LOOP: tl.constexpr,
    TRANSPOSED: tl.constexpr, SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr,
    ACTIVATION: tl.constexpr, IS_FP32: tl.constexpr, PRECISION: tl.constexpr, EMULATE: tl.constexpr,
):
    """One (BLOCK_M pixels, BLOCK_N channels) tile of one group; grid (tiles, G, splits).

    With SPLIT, the fp32 partial over this split's reduction iterations goes to
    ``p[split, m, g KG + k]`` (contiguous) and ``conv_splitk_reduce_kernel`` finishes.
    """
    M = BATCH * OD * OH * OW
    CO = KG * tl.num_programs(1)
    tn = tl.cdiv(KG, BLOCK_N)
    pid_m = tl.program_id(0) // tn
    pid_n = tl.program_id(0) % tn
    g = tl.program_id(1)
    split = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    n, od, oh, ow = split_pixels(rm, OD, OH, OW)
    row_ok = rm < M
    x_row = x_ptr + n.to(tl.int64) * sxn + group_channel(g, CG) * sxc
    w_col = w_ptr + g * swg + rn * swn
    col_ok = rn < KG
    if LOOP == "nested":
        nblk = tl.cdiv(CG, BLOCK_K)
        total = KD * KH * KW * nblk
    else:
        nblk = KD * KH * KW
        total = tl.cdiv(CG * nblk, BLOCK_K)
    i_lo = split * ITERS_PER_SPLIT
    i_hi = tl.minimum(i_lo + ITERS_PER_SPLIT, total)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    special = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.int32)
    for i in range(i_lo, i_hi):
        a, a_ok, b = gather_operands(i, rk, x_row, w_col, row_ok, col_ok, od, oh, ow, CG, D, H, W, KH, KW, nblk,
                                     stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w,
                                     sxc, sxd, sxh, sxw, swc, swd, swh, sww, BLOCK_K, LOOP, TRANSPOSED)
        if TRANSPOSED:
            special = tl.maximum(special, nonfinite(b).to(tl.int32))
        acc = dot_acc(a, b, acc, IS_FP32, PRECISION, EMULATE)
    if TRANSPOSED:  # a non-finite weight met a stride hole's or an edge's zero: the sum again, exactly
        redo = tl.where(tl.max(tl.max(special, axis=1), axis=0) > 0, i_hi, i_lo)
        acc = tl.where(redo > i_lo, 0.0, acc)
        flags = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # a float: no int32 result from data
        for i in range(i_lo, redo):
            a, a_ok, b = gather_operands(i, rk, x_row, w_col, row_ok, col_ok, od, oh, ow, CG, D, H, W, KH, KW,
                                         nblk, stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h,
                                         dil_w, sxc, sxd, sxh, sxw, swc, swd, swh, sww, BLOCK_K, LOOP, TRANSPOSED)
            acc, flags = exact_products(a, a_ok, b, acc, flags, IS_FP32, PRECISION, EMULATE)
        acc = with_specials(acc, flags)
    rco = g * KG + rn
    if SPLIT:
        poffs = (split * M + rm).to(tl.int64)[:, None] * CO + rco[None, :]
        tl.store(p_ptr + poffs, acc, mask=row_ok[:, None] & col_ok[None, :])
    else:
        conv_epilogue(acc, y_ptr, bias_ptr, res_ptr, rm, tl.where(col_ok, rco, CO), M, CO, OD, OH, OW, scale,
                      syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
                      HAS_BIAS, HAS_RES, ACTIVATION, EMULATE)


@triton.jit
def phase_taps(r, KS, stride, pad, dil, gcd, inv):
    """One axis of a transposed conv's phase ``r``: the output coordinates ``o = r + stride j`` are fed
    by the taps ``t = t0 + u step``, ``u < count`` (those with ``o + pad - t dil`` divisible by the
    stride), each reading input coordinate ``j + base - u (dil / gcd)``. ``gcd = gcd(stride, dil)``,
    ``inv`` the inverse of ``dil / gcd`` modulo ``step = stride / gcd`` (the launcher's)."""
    q = r + pad
    step = stride // gcd
    t0 = ((q // gcd) * inv) % step
    count = tl.where(q % gcd == 0, (KS - t0 + step - 1) // step, 0)
    base = (q - t0 * dil) // stride  # exact where count > 0 (the same under floor or truncating division)
    return t0, step, count, base


@triton.jit
def phase_operands(i, rk, x_row, w_col, row_ok, col_ok, jd, jh, jw, CG, D, H, W, KD, KH, KW, nth, ntw, nblk,
                   t0d, t0h, t0w, stepd, steph, stepw, based, baseh, basew, dd, dh, dw,
                   sxc, sxd, sxh, sxw, swc, swd, swh, sww, BLOCK_K: tl.constexpr, LOOP: tl.constexpr):
    """Reduction iteration ``i`` of a phase: the gathered input tile, where it is a real input (not past
    an edge, not a masked lane), and the weight tile of the taps it pairs with."""
    c, ud, uh, uw, k_ok = reduction_index(i, rk, CG, nth, ntw, nblk, BLOCK_K, LOOP)
    id_ = jd[:, None] + based - ud[None, :] * dd
    ih = jh[:, None] + baseh - uh[None, :] * dh
    iw = jw[:, None] + basew - uw[None, :] * dw
    a_ok = (row_ok[:, None] & k_ok[None, :] & (id_ >= 0) & (id_ < D) & (ih >= 0) & (ih < H)
            & (iw >= 0) & (iw < W))
    a = tl.load(x_row[:, None] + c[None, :] * sxc + id_ * sxd + ih * sxh + iw * sxw, mask=a_ok, other=0.0)
    kd, kh, kw = t0d + ud * stepd, t0h + uh * steph, t0w + uw * stepw
    tap_ok = k_ok & (kd < KD) & (kh < KH) & (kw < KW)  # implied by the trip count; stated for the prover
    b = tl.load(w_col[None, :] + c[:, None] * swc + (kd * swd + kh * swh + kw * sww)[:, None],
                mask=tap_ok[:, None] & col_ok[None, :], other=0.0)
    return a, a_ok, b


@triton.jit
def conv_transpose_phase_kernel(
    x_ptr, w_ptr, y_ptr, bias_ptr, res_ptr,
    BATCH, CG, KG, D, H, W, OD, OH, OW, KD, KH, KW,
    stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w,
    gcd_d, gcd_h, gcd_w, inv_d, inv_h, inv_w, scale,
    sxn, sxc, sxd, sxh, sxw, swg, swn, swc, swd, swh, sww,
    syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, LOOP: tl.constexpr,
    HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACTIVATION: tl.constexpr, IS_FP32: tl.constexpr,
    PRECISION: tl.constexpr, EMULATE: tl.constexpr,
):
    """The transposed conv by output phase (sub-pixel decomposition); grid (tiles, G, phases).

    Phase ``(rd, rh, rw)`` (``program_id(2)``, w fastest) owns the output pixels whose coordinates are
    ``r + stride j``; for them only the taps of ``phase_taps`` contribute, so the reduction runs over
    C/G x those taps (about window / stride product of them) instead of the whole window with the
    stride holes masked. Rows: (n, jd, jh, jw) over ``cdiv(O, stride)`` per axis, those past the
    output masked. Special values as torch's (which multiplies real inputs only): where a weight tile
    held inf or NaN, the sum is formed again by ``exact_products`` (no work otherwise).
    """
    QD = tl.cdiv(OD, stride_d)
    QH = tl.cdiv(OH, stride_h)
    QW = tl.cdiv(OW, stride_w)
    MQ = BATCH * QD * QH * QW
    CO = KG * tl.num_programs(1)
    tn = tl.cdiv(KG, BLOCK_N)
    pid_m = tl.program_id(0) // tn
    pid_n = tl.program_id(0) % tn
    g = tl.program_id(1)
    phase = tl.program_id(2)
    rw = phase % stride_w
    rh = (phase // stride_w) % stride_h
    rd = phase // (stride_w * stride_h)
    t0d, stepd, ntd, based = phase_taps(rd, KD, stride_d, pad_d, dil_d, gcd_d, inv_d)
    t0h, steph, nth, baseh = phase_taps(rh, KH, stride_h, pad_h, dil_h, gcd_h, inv_h)
    t0w, stepw, ntw, basew = phase_taps(rw, KW, stride_w, pad_w, dil_w, gcd_w, inv_w)
    dd, dh, dw = dil_d // gcd_d, dil_h // gcd_h, dil_w // gcd_w
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    n, jd, jh, jw = split_pixels(rm, QD, QH, QW)
    od = rd + stride_d * jd
    oh = rh + stride_h * jh
    ow = rw + stride_w * jw
    row_ok = (rm < MQ) & (od < OD) & (oh < OH) & (ow < OW)
    x_row = x_ptr + n.to(tl.int64) * sxn + group_channel(g, CG) * sxc
    w_col = w_ptr + g * swg + rn * swn
    col_ok = rn < KG
    if LOOP == "nested":
        nblk = tl.cdiv(CG, BLOCK_K)
        total = ntd * nth * ntw * nblk
    else:
        nblk = ntd * nth * ntw
        total = tl.cdiv(CG * nblk, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    special = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.int32)
    for i in range(0, total):
        a, a_ok, b = phase_operands(i, rk, x_row, w_col, row_ok, col_ok, jd, jh, jw, CG, D, H, W, KD, KH, KW, nth,
                                    ntw, nblk, t0d, t0h, t0w, stepd, steph, stepw, based, baseh, basew, dd, dh, dw,
                                    sxc, sxd, sxh, sxw, swc, swd, swh, sww, BLOCK_K, LOOP)
        special = tl.maximum(special, nonfinite(b).to(tl.int32))
        acc = dot_acc(a, b, acc, IS_FP32, PRECISION, EMULATE)
    # a non-finite weight met the zeros of masked lanes: the sum again, exactly (a loop of 0 trips otherwise)
    redo = tl.where(tl.max(tl.max(special, axis=1), axis=0) > 0, total, 0)
    acc = tl.where(redo > 0, 0.0, acc)
    flags = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # a float: no int32 result from data
    for i in range(0, redo):
        a, a_ok, b = phase_operands(i, rk, x_row, w_col, row_ok, col_ok, jd, jh, jw, CG, D, H, W, KD, KH, KW, nth,
                                    ntw, nblk, t0d, t0h, t0w, stepd, steph, stepw, based, baseh, basew, dd, dh, dw,
                                    sxc, sxd, sxh, sxw, swc, swd, swh, sww, BLOCK_K, LOOP)
        acc, flags = exact_products(a, a_ok, b, acc, flags, IS_FP32, PRECISION, EMULATE)
    acc = with_specials(acc, flags)
    store_tile(acc, y_ptr, bias_ptr, res_ptr, n, od, oh, ow, row_ok, tl.where(col_ok, g * KG + rn, CO), CO, scale,
               syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
               HAS_BIAS, HAS_RES, ACTIVATION, EMULATE)


@triton.jit
def conv_splitk_reduce_kernel(
    p_ptr, y_ptr, bias_ptr, res_ptr,
    M, CO, OD, OH, OW, SPLITS, scale,
    syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr,
    ACTIVATION: tl.constexpr, EMULATE: tl.constexpr,
):
    """Sum the SPLITS partials in order, then the epilogue; grid (cdiv(M, BLOCK_M), cdiv(CO, BLOCK_N))."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rco = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm < M)[:, None] & (rco < CO)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in range(0, SPLITS):
        acc += tl.load(p_ptr + (s * M + rm).to(tl.int64)[:, None] * CO + rco[None, :], mask=mask, other=0.0)
    conv_epilogue(acc, y_ptr, bias_ptr, res_ptr, rm, rco, M, CO, OD, OH, OW, scale,
                  syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
                  HAS_BIAS, HAS_RES, ACTIVATION, EMULATE)


@triton.jit
def conv_wgrad_kernel(
    a_ptr, b_ptr, dw_ptr, p_ptr,
    BATCH, KG, CG, D, H, W, OD, OH, OW, KD, KH, KW,
    stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w,
    san, sac, sad, sah, saw, sbn, sbc, sbd, sbh, sbw, swg, swn, swc, swd, swh, sww, ITERS_PER_SPLIT,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    IS_FP32: tl.constexpr, PRECISION: tl.constexpr, EMULATE: tl.constexpr, SPLIT: tl.constexpr,
):
    """dw tile (BLOCK_M of KG, BLOCK_N of CG x window) of group ``program_id(1)``; grid (tiles, G), or
    (tiles, G, SPLITS) with SPLIT.

    ``a``: (BATCH, G KG, OD, OH, OW); ``b``: (BATCH, G CG, D, H, W); reduction over n x output pixels.
    SPLIT: split ``program_id(2)`` sums pixel blocks ``[s IPS, (s + 1) IPS)`` (IPS = ITERS_PER_SPLIT, in
    BLOCK_K pixels) into the fp32 partial ``p[s, g KG + k, j]`` (contiguous), reduced in order afterwards.
    """
    P = BATCH * OD * OH * OW
    KVOL = KD * KH * KW
    NCOL = CG * KVOL
    tn = tl.cdiv(NCOL, BLOCK_N)
    pid_m = tl.program_id(0) // tn
    pid_n = tl.program_id(0) % tn
    g = tl.program_id(1)
    rk_ = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # output channels of a
    rj = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (c, tap) flattened, tap fastest
    rp = tl.arange(0, BLOCK_K)
    c = rj // KVOL
    tap = rj % KVOL
    kw = tap % KW
    kh = (tap // KW) % KH
    kd = tap // (KW * KH)
    k_ok = rk_ < KG
    j_ok = rj < NCOL
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    p_lo = 0
    p_hi = P
    if SPLIT:
        p_lo = tl.program_id(2) * ITERS_PER_SPLIT * BLOCK_K
        p_hi = p_lo + tl.minimum(ITERS_PER_SPLIT * BLOCK_K, P - p_lo)  # p_lo < P: no sum past P (int32)
    for p0 in range(p_lo, p_hi, BLOCK_K):
        pix = p0 + rp
        p_ok = pix < p_hi
        n, od, oh, ow = split_pixels(pix, OD, OH, OW)
        n = n.to(tl.int64)
        a_offs = (n * san + od * sad + oh * sah + ow * saw)[None, :] + ((g * KG + rk_) * sac)[:, None]
        a = tl.load(a_ptr + a_offs, mask=k_ok[:, None] & p_ok[None, :], other=0.0)
        id_, okd = input_coord(od[:, None], kd[None, :], D, stride_d, pad_d, dil_d, False)
        ih, okh = input_coord(oh[:, None], kh[None, :], H, stride_h, pad_h, dil_h, False)
        iw, okw = input_coord(ow[:, None], kw[None, :], W, stride_w, pad_w, dil_w, False)
        b_mask = p_ok[:, None] & j_ok[None, :] & okd & okh & okw
        b_offs = (n * sbn)[:, None] + ((g * CG + c) * sbc)[None, :] + id_ * sbd + ih * sbh + iw * sbw
        b = tl.load(b_ptr + b_offs, mask=b_mask, other=0.0)
        acc = dot_acc(a, b, acc, IS_FP32, PRECISION, EMULATE)
    if SPLIT:
        rows = tl.program_id(2).to(tl.int64) * tl.num_programs(1) * KG + g * KG + rk_  # s G KG may pass 2^31 / NCOL
        tl.store(p_ptr + rows[:, None] * NCOL + rj[None, :], acc, mask=k_ok[:, None] & j_ok[None, :])
    else:
        w_offs = (g * swg + rk_ * swn)[:, None] + (c * swc + kd * swd + kh * swh + kw * sww)[None, :]
        tl.store(dw_ptr + w_offs, to_output(acc, dw_ptr, EMULATE), mask=k_ok[:, None] & j_ok[None, :])
