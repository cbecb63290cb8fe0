"""Flash attention (prefill / training) kernels: forward, and a deterministic backward (only
``@triton.jit`` code).

Layout: every tensor is indexed as (sequence b, head h, position s, feature d) through its
strides; packed (varlen) tensors have a batch stride of 0 and their sequence's first token
``cu_seqlens[b]`` added to s. The (b, h, first token) base of a program is computed in int64;
offsets within one sequence (``s * stride_s + d``) in int32 (the launcher checks
``(max_seqlen + BLOCK) * stride_s < 2^31``). Grids: (position blocks, heads, sequences).

An optional additive score bias (``HAS_BIAS``: an attention mask, boolean masks as 0 / -inf) of
shape (B, H * G, Sq, Sk), any strides (0 to broadcast), is added after the softcap.

Scores are kept in base 2 (``s * log2(e)``) so that the exponentials are ``exp2``. Key j is
visible to query i iff ``j <= i + off + win_hi`` (``HAS_HI``: causal and/or a right window) and
``j >= i + off - win_lo`` (``HAS_LO``), ``off = align_br * (len_k - len_q)``; the loops visit only
the key (query) blocks that hold a visible pair, and mask within them.

Special values as the spec says (spec.py): a row with no visible key (or only -inf scores) keeps
``l = 0`` and gives out = 0, lse = -inf (the exponent base is 0 while the running max is -inf,
so no ``-inf - -inf``); NaN and +inf scores reach l and acc through exp2 (``tl.max`` may drop a
NaN: exp2(NaN) still poisons the row). The backward recomputes P from the lse; a row with
``lse = -inf`` saw no finite score, so its P is 0 (exp2(-inf - -FLT_MAX), or masked); it zeroes dS
outside the visible pairs. No select is conditioned on float data (the prover's tracer models none):
clamps with ``tl.maximum`` do that work.

FLOPs per visible (query, key) pair and head: forward 2 (D + Dv); backward 2 (3 D + 2 Dv).
Bytes: forward reads q, k, v (k and v once per query block), writes out and lse; backward reads
q, k, v, out (preprocess), dout, lse, and writes dq, dk, dv and delta.
"""
from ...core._triton import tl, triton
from ..shared.kernel import dot_acc, round_to_bf16, to_output

# log2(e), ln(2) and the largest finite fp32 appear as literals in the kernels (the prover's tracer
# models no float globals): 1.4426950408889634, 0.6931471805599453, 3.4028234663852886e38


@triton.jit
def operand(x, like_ptr, EMULATE: tl.constexpr):
    """fp32 ``x`` rounded to ``like_ptr``'s element type for a tensor-core product (RNE; under the
    interpreter's bf16 emulation the rounded value stays in fp32, which ``dot_acc`` expects)."""
    if EMULATE:
        if like_ptr.dtype.element_ty == tl.bfloat16:
            return round_to_bf16(x)
    return x.to(like_ptr.dtype.element_ty)


@triton.jit
def seq_span(cu_ptr, b, S, VARLEN: tl.constexpr):
    """(first token, length) of sequence b: from cu_seqlens when packed, else (0, S)."""
    if VARLEN:
        start = tl.load(cu_ptr + b)
        length = tl.load(cu_ptr + b + 1) - start
    else:
        start = 0
        length = S
    return start, length


@triton.jit
def head_base(ptr, b, h, stride_b, stride_h, start, stride_s, VARLEN: tl.constexpr):
    """``ptr`` at sequence b, head h (int64), and at the sequence's first token ``start`` when packed."""
    base = ptr + b.to(tl.int64) * stride_b + h.to(tl.int64) * stride_h
    if VARLEN:
        base += start.to(tl.int64) * stride_s
    return base


@triton.jit
def key_window(m0, off, len_k, win_lo, win_hi, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               HAS_LO: tl.constexpr, HAS_HI: tl.constexpr):
    """(lo, hi): the keys a block of BLOCK_M queries from m0 may see, lo a multiple of BLOCK_N
    (key j is visible to query i iff i + off - win_lo <= j <= i + off + win_hi)."""
    lo = 0
    hi = len_k
    if HAS_LO:
        lo = (tl.maximum(m0 + off - win_lo, 0) // BLOCK_N) * BLOCK_N
    if HAS_HI:
        hi = tl.minimum(m0 + BLOCK_M + off + win_hi, len_k)
    return lo, hi


@triton.jit
def query_window(n0, off, len_q, win_lo, win_hi, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 HAS_LO: tl.constexpr, HAS_HI: tl.constexpr):
    """The transpose of :func:`key_window`: (lo, hi), the queries that may see a block of BLOCK_N keys
    from n0, lo a multiple of BLOCK_M."""
    lo = 0
    hi = len_q
    if HAS_HI:  # query i sees key j only if i >= j - off - win_hi
        lo = (tl.maximum(n0 - off - win_hi, 0) // BLOCK_M) * BLOCK_M
    if HAS_LO:  # ... and i <= j - off + win_lo
        hi = tl.minimum(n0 + BLOCK_N - off + win_lo, len_q)
    return lo, hi


@triton.jit
def scores(qk, sm_scale, softcap, SOFTCAP: tl.constexpr):
    """Base-2 scores from fp32 ``q . k``: ``scale qk log2 e`` or, soft-capped, ``c tanh(scale qk / c) log2 e``;
    also returns tanh (for the backward's ``1 - tanh^2``; without softcap an unused placeholder)."""
    if SOFTCAP:
        t = 2.0 * tl.sigmoid(qk * (2.0 * sm_scale / softcap)) - 1.0  # tanh(x) = 2 sigmoid(2x) - 1
        return t * (softcap * 1.4426950408889634), t
    else:
        return qk * (sm_scale * 1.4426950408889634), qk  # the second value is unused without softcap


@triton.jit
def add_bias(bias_base, offs_i, offs_j, len_i, len_j, stride_bi, stride_bj):
    """The (len(offs_i), len(offs_j)) tile of an additive score bias (an attention mask), base 2, fp32."""
    mask = (offs_i[:, None] < len_i) & (offs_j[None, :] < len_j)
    bias = tl.load(bias_base + offs_i[:, None] * stride_bi + offs_j[None, :] * stride_bj, mask=mask, other=0.0)
    return bias.to(tl.float32) * 1.4426950408889634


@triton.jit
def visible_mask(offs_i, offs_j, len_i, len_j, off, win_lo, win_hi, HAS_LO: tl.constexpr, HAS_HI: tl.constexpr):
    """(len(offs_i), len(offs_j)) visibility of key j to query i, both in range."""
    mask = (offs_i[:, None] < len_i) & (offs_j[None, :] < len_j)
    if HAS_HI:
        mask = mask & (offs_j[None, :] <= offs_i[:, None] + (off + win_hi))
    if HAS_LO:
        mask = mask & (offs_j[None, :] >= offs_i[:, None] + (off - win_lo))
    return mask


@triton.jit
def visible_mask_t(offs_j, offs_i, len_j, len_i, off, win_lo, win_hi, HAS_LO: tl.constexpr, HAS_HI: tl.constexpr):
    """The transpose of :func:`visible_mask`: (len(offs_j), len(offs_i)), keys along rows."""
    mask = (offs_j[:, None] < len_j) & (offs_i[None, :] < len_i)
    if HAS_HI:
        mask = mask & (offs_j[:, None] <= offs_i[None, :] + (off + win_hi))
    if HAS_LO:
        mask = mask & (offs_j[:, None] >= offs_i[None, :] + (off - win_lo))
    return mask


@triton.jit
def kv_head(h, G):
    """The key/value head of query head h (G query heads per key/value head: consecutive query heads
    share one, as torch's ``enable_gqa`` and FlashAttention do)."""
    return h // G


@triton.jit
def online_softmax_step(m_i, l_i, s):
    """One block of base-2 scores into the running max and sum: returns (m_new, alpha, p, l_new) with
    ``alpha = exp2(m_i - m_new)`` the rescaling of what was summed so far, ``p = exp2(s - m_new)``."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    # exponents against a finite base while only -inf was seen: exp2(-inf) = 0, not exp2(-inf - -inf) = NaN
    m_base = tl.maximum(m_new, -3.4028234663852886e38, propagate_nan=tl.PropagateNan.ALL)
    alpha = tl.exp2(m_i - m_base)
    p = tl.exp2(s - m_base[:, None])
    return m_new, alpha, p, l_i * alpha + tl.sum(p, 1)


@triton.jit
def attention_fwd_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, cu_q_ptr, cu_k_ptr, bias_ptr,
    Sq, Sk, D, DV, G,
    sm_scale, softcap, win_lo, win_hi, align_br,
    stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
    stride_ob, stride_oh, stride_os, stride_lb, stride_lh, stride_bb, stride_bh, stride_bm, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    HAS_LO: tl.constexpr, HAS_HI: tl.constexpr, SOFTCAP: tl.constexpr, HAS_BIAS: tl.constexpr, VARLEN: tl.constexpr,
    IS_FP32: tl.constexpr, EMULATE: tl.constexpr,
):
    """One block of BLOCK_M queries of one head: the online softmax over the visible key blocks
    (FlashAttention-2's loop: running max m, running sum l, output accumulator rescaled by
    exp2(m_old - m_new) whenever the max grows), then out = acc / l and lse = (m + log2 l) ln 2.
    Grid (cdiv(Sq, BLOCK_M), H * G, B); Sq is the longest sequence when packed.
    """
    pid_m = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    start_q, len_q = seq_span(cu_q_ptr, b, Sq, VARLEN)
    start_k, len_k = seq_span(cu_k_ptr, b, Sk, VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= len_q:
        return
    kh = kv_head(h, G)
    q_base = head_base(q_ptr, b, h, stride_qb, stride_qh, start_q, stride_qs, VARLEN)
    k_base = head_base(k_ptr, b, kh, stride_kb, stride_kh, start_k, stride_ks, VARLEN)
    v_base = head_base(v_ptr, b, kh, stride_vb, stride_vh, start_k, stride_vs, VARLEN)
    o_base = head_base(o_ptr, b, h, stride_ob, stride_oh, start_q, stride_os, VARLEN)
    l_base = head_base(lse_ptr, b, h, stride_lb, stride_lh, start_q, 1, VARLEN)
    bias_base = head_base(bias_ptr, b, h, stride_bb, stride_bh, 0, 0, False)

    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    offs_nb = tl.arange(0, BLOCK_N)
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :],
                mask=(offs_m[:, None] < len_q) & (offs_d[None, :] < D), other=0.0)

    off = align_br * (len_k - len_q)
    lo, hi = key_window(m0, off, len_k, win_lo, win_hi, BLOCK_M, BLOCK_N, HAS_LO, HAS_HI)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), dtype=tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + offs_nb
        kt = tl.load(k_base + offs_n[None, :] * stride_ks + offs_d[:, None],
                     mask=(offs_n[None, :] < len_k) & (offs_d[:, None] < D), other=0.0)
        qk = dot_acc(q, kt, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), IS_FP32, "ieee", EMULATE)
        s, _t = scores(qk, sm_scale, softcap, SOFTCAP)
        if HAS_BIAS:
            s += add_bias(bias_base, offs_m, offs_n, len_q, len_k, stride_bm, stride_bn)
        s = tl.where(visible_mask(offs_m, offs_n, len_q, len_k, off, win_lo, win_hi, HAS_LO, HAS_HI), s,
                     float("-inf"))
        m_new, alpha, p, l_i = online_softmax_step(m_i, l_i, s)
        v = tl.load(v_base + offs_n[:, None] * stride_vs + offs_dv[None, :],
                    mask=(offs_n[:, None] < len_k) & (offs_dv[None, :] < DV), other=0.0)
        acc = dot_acc(operand(p, v_ptr, EMULATE), v, acc * alpha[:, None], IS_FP32, "ieee", EMULATE)
        m_i = m_new

    # l >= 1 once a finite score was seen (the final max contributes exp2(0) = 1), else l = 0 and acc = 0:
    # max(l, 1) divides by l, or gives out = 0; then lse = -inf + log2(0) = -inf
    out = acc / tl.maximum(l_i, 1.0)[:, None]
    lse = (m_i + tl.log2(l_i)) * 0.6931471805599453
    row_ok = offs_m < len_q
    tl.store(o_base + offs_m[:, None] * stride_os + offs_dv[None, :], to_output(out, o_ptr, EMULATE),
             mask=row_ok[:, None] & (offs_dv[None, :] < DV))
    tl.store(l_base + offs_m, lse, mask=row_ok)


@triton.jit
def attention_bwd_preprocess_kernel(
    o_ptr, do_ptr, delta_ptr, cu_q_ptr,
    Sq, DV,
    stride_ob, stride_oh, stride_os, stride_dob, stride_doh, stride_dos, stride_lb, stride_lh,
    BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr, VARLEN: tl.constexpr,
):
    """delta_i = sum_d dO_id O_id (fp32), laid out as the lse. Grid (cdiv(Sq, BLOCK_M), H * G, B)."""
    pid_m = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    start_q, len_q = seq_span(cu_q_ptr, b, Sq, VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= len_q:
        return
    o_base = head_base(o_ptr, b, h, stride_ob, stride_oh, start_q, stride_os, VARLEN)
    do_base = head_base(do_ptr, b, h, stride_dob, stride_doh, start_q, stride_dos, VARLEN)
    l_base = head_base(delta_ptr, b, h, stride_lb, stride_lh, start_q, 1, VARLEN)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    mask = (offs_m[:, None] < len_q) & (offs_dv[None, :] < DV)
    o = tl.load(o_base + offs_m[:, None] * stride_os + offs_dv[None, :], mask=mask, other=0.0).to(tl.float32)
    do = tl.load(do_base + offs_m[:, None] * stride_dos + offs_dv[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(l_base + offs_m, tl.sum(o * do, 1), mask=offs_m < len_q)


@triton.jit
def attention_bwd_dkdv_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, cu_q_ptr, cu_k_ptr, bias_ptr,
    Sq, Sk, D, DV, G,
    sm_scale, softcap, win_lo, win_hi, align_br,
    stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
    stride_dob, stride_doh, stride_dos, stride_lb, stride_lh, stride_bb, stride_bh, stride_bm, stride_bn,
    stride_dkb, stride_dkh, stride_dks, stride_dvb, stride_dvh, stride_dvs,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    HAS_LO: tl.constexpr, HAS_HI: tl.constexpr, SOFTCAP: tl.constexpr, HAS_BIAS: tl.constexpr, VARLEN: tl.constexpr,
    IS_FP32: tl.constexpr, EMULATE: tl.constexpr,
):
    """dK and dV of one block of BLOCK_N keys of one key/value head, summed over its G query heads
    and the visible query blocks (in a fixed order: deterministic, no atomics). Works on the
    transposed score block (keys along rows): P^T = exp2(S^T - lse), dV += P^T dO,
    dP^T = V dO^T, dS^T = P^T (dP^T - delta), dK += dS^T Q, then dK *= scale.
    Grid (cdiv(Sk, BLOCK_N), H, B).
    """
    pid_n = tl.program_id(0)
    kh = tl.program_id(1)
    b = tl.program_id(2)
    start_q, len_q = seq_span(cu_q_ptr, b, Sq, VARLEN)
    start_k, len_k = seq_span(cu_k_ptr, b, Sk, VARLEN)
    n0 = pid_n * BLOCK_N
    if n0 >= len_k:
        return
    k_base = head_base(k_ptr, b, kh, stride_kb, stride_kh, start_k, stride_ks, VARLEN)
    v_base = head_base(v_ptr, b, kh, stride_vb, stride_vh, start_k, stride_vs, VARLEN)
    dk_base = head_base(dk_ptr, b, kh, stride_dkb, stride_dkh, start_k, stride_dks, VARLEN)
    dv_base = head_base(dv_ptr, b, kh, stride_dvb, stride_dvh, start_k, stride_dvs, VARLEN)

    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    offs_mb = tl.arange(0, BLOCK_M)
    n_ok = offs_n < len_k
    k = tl.load(k_base + offs_n[:, None] * stride_ks + offs_d[None, :], mask=n_ok[:, None] & (offs_d[None, :] < D),
                other=0.0)
    v = tl.load(v_base + offs_n[:, None] * stride_vs + offs_dv[None, :],
                mask=n_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
    dk = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_DV), dtype=tl.float32)

    off = align_br * (len_k - len_q)
    lo, hi = query_window(n0, off, len_q, win_lo, win_hi, BLOCK_M, BLOCK_N, HAS_LO, HAS_HI)
    for g in range(0, G):
        h = kh * G + g
        q_base = head_base(q_ptr, b, h, stride_qb, stride_qh, start_q, stride_qs, VARLEN)
        do_base = head_base(do_ptr, b, h, stride_dob, stride_doh, start_q, stride_dos, VARLEN)
        lse_base = head_base(lse_ptr, b, h, stride_lb, stride_lh, start_q, 1, VARLEN)
        delta_base = head_base(delta_ptr, b, h, stride_lb, stride_lh, start_q, 1, VARLEN)
        bias_base = head_base(bias_ptr, b, h, stride_bb, stride_bh, 0, 0, False)
        for start_m in range(lo, hi, BLOCK_M):
            offs_m = start_m + offs_mb
            m_ok = offs_m < len_q
            qt = tl.load(q_base + offs_m[None, :] * stride_qs + offs_d[:, None],
                         mask=m_ok[None, :] & (offs_d[:, None] < D), other=0.0)
            lse = tl.load(lse_base + offs_m, mask=m_ok, other=0.0)
            lse2 = tl.maximum(lse * 1.4426950408889634, -3.4028234663852886e38, propagate_nan=tl.PropagateNan.ALL)  # -inf: the row saw no finite score
            qkt = dot_acc(k, qt, tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32), IS_FP32, "ieee", EMULATE)
            st, tt = scores(qkt, sm_scale, softcap, SOFTCAP)
            if HAS_BIAS:
                st += add_bias(bias_base, offs_n, offs_m, len_k, len_q, stride_bn, stride_bm)
            mask = visible_mask_t(offs_n, offs_m, len_k, len_q, off, win_lo, win_hi, HAS_LO, HAS_HI)
            pt = tl.where(mask, tl.exp2(st - lse2[None, :]), 0.0)
            do = tl.load(do_base + offs_m[:, None] * stride_dos + offs_dv[None, :],
                         mask=m_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
            dv = dot_acc(operand(pt, do_ptr, EMULATE), do, dv, IS_FP32, "ieee", EMULATE)
            dpt = dot_acc(v, tl.trans(do), tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32), IS_FP32, "ieee", EMULATE)
            delta = tl.load(delta_base + offs_m, mask=m_ok, other=0.0)
            dst = tl.where(mask, pt * (dpt - delta[None, :]), 0.0)
            if SOFTCAP:
                dst = dst * (1.0 - tt * tt)
            dk = dot_acc(operand(dst, q_ptr, EMULATE), tl.trans(qt), dk, IS_FP32, "ieee", EMULATE)
    tl.store(dk_base + offs_n[:, None] * stride_dks + offs_d[None, :], to_output(dk * sm_scale, dk_ptr, EMULATE),
             mask=n_ok[:, None] & (offs_d[None, :] < D))
    tl.store(dv_base + offs_n[:, None] * stride_dvs + offs_dv[None, :], to_output(dv, dv_ptr, EMULATE),
             mask=n_ok[:, None] & (offs_dv[None, :] < DV))


@triton.jit
def attention_bwd_dq_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, cu_q_ptr, cu_k_ptr, bias_ptr,
    Sq, Sk, D, DV, G,
    sm_scale, softcap, win_lo, win_hi, align_br,
    stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
    stride_dob, stride_doh, stride_dos, stride_lb, stride_lh, stride_bb, stride_bh, stride_bm, stride_bn,
    stride_dqb, stride_dqh, stride_dqs,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    HAS_LO: tl.constexpr, HAS_HI: tl.constexpr, SOFTCAP: tl.constexpr, HAS_BIAS: tl.constexpr, VARLEN: tl.constexpr,
    IS_FP32: tl.constexpr, EMULATE: tl.constexpr,
):
    """dQ of one block of BLOCK_M queries of one head over its visible key blocks:
    P = exp2(S - lse), dP = dO V^T, dS = P (dP - delta), dQ += dS K, then dQ *= scale.
    Grid (cdiv(Sq, BLOCK_M), H * G, B).
    """
    pid_m = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    start_q, len_q = seq_span(cu_q_ptr, b, Sq, VARLEN)
    start_k, len_k = seq_span(cu_k_ptr, b, Sk, VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= len_q:
        return
    kh = kv_head(h, G)
    q_base = head_base(q_ptr, b, h, stride_qb, stride_qh, start_q, stride_qs, VARLEN)
    do_base = head_base(do_ptr, b, h, stride_dob, stride_doh, start_q, stride_dos, VARLEN)
    dq_base = head_base(dq_ptr, b, h, stride_dqb, stride_dqh, start_q, stride_dqs, VARLEN)
    lse_base = head_base(lse_ptr, b, h, stride_lb, stride_lh, start_q, 1, VARLEN)
    delta_base = head_base(delta_ptr, b, h, stride_lb, stride_lh, start_q, 1, VARLEN)
    bias_base = head_base(bias_ptr, b, h, stride_bb, stride_bh, 0, 0, False)
    k_base = head_base(k_ptr, b, kh, stride_kb, stride_kh, start_k, stride_ks, VARLEN)
    v_base = head_base(v_ptr, b, kh, stride_vb, stride_vh, start_k, stride_vs, VARLEN)

    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    offs_nb = tl.arange(0, BLOCK_N)
    m_ok = offs_m < len_q
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :], mask=m_ok[:, None] & (offs_d[None, :] < D),
                other=0.0)
    do = tl.load(do_base + offs_m[:, None] * stride_dos + offs_dv[None, :],
                 mask=m_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
    lse = tl.load(lse_base + offs_m, mask=m_ok, other=0.0)
    lse2 = tl.maximum(lse * 1.4426950408889634, -3.4028234663852886e38, propagate_nan=tl.PropagateNan.ALL)  # -inf: the row saw no finite score
    delta = tl.load(delta_base + offs_m, mask=m_ok, other=0.0)
    dq = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)

    off = align_br * (len_k - len_q)
    lo, hi = key_window(m0, off, len_k, win_lo, win_hi, BLOCK_M, BLOCK_N, HAS_LO, HAS_HI)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + offs_nb
        n_ok = offs_n < len_k
        kt = tl.load(k_base + offs_n[None, :] * stride_ks + offs_d[:, None], mask=n_ok[None, :] & (offs_d[:, None] < D),
                     other=0.0)
        vt = tl.load(v_base + offs_n[None, :] * stride_vs + offs_dv[:, None],
                     mask=n_ok[None, :] & (offs_dv[:, None] < DV), other=0.0)
        qk = dot_acc(q, kt, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), IS_FP32, "ieee", EMULATE)
        s, t = scores(qk, sm_scale, softcap, SOFTCAP)
        if HAS_BIAS:
            s += add_bias(bias_base, offs_m, offs_n, len_q, len_k, stride_bm, stride_bn)
        mask = visible_mask(offs_m, offs_n, len_q, len_k, off, win_lo, win_hi, HAS_LO, HAS_HI)
        p = tl.where(mask, tl.exp2(s - lse2[:, None]), 0.0)
        dp = dot_acc(do, vt, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), IS_FP32, "ieee", EMULATE)
        ds = tl.where(mask, p * (dp - delta[:, None]), 0.0)
        if SOFTCAP:
            ds = ds * (1.0 - t * t)
        dq = dot_acc(operand(ds, k_ptr, EMULATE), tl.trans(kt), dq, IS_FP32, "ieee", EMULATE)
    tl.store(dq_base + offs_m[:, None] * stride_dqs + offs_d[None, :], to_output(dq * sm_scale, dq_ptr, EMULATE),
             mask=m_ok[:, None] & (offs_d[None, :] < D))


@triton.jit
def merge_attention_states_kernel(
    oa_ptr, la_ptr, ob_ptr, lb_ptr, o_ptr, l_ptr,
    M, N,
    stride_am, stride_bm, stride_om,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EMULATE: tl.constexpr,
):
    """Merge two partial attentions of BLOCK_M rows (rows of N <= BLOCK_N values):
    ``lse = m + log(exp(la - m) + exp(lb - m))`` with ``m = max(la, lb)`` (0 where both are -inf),
    ``out = (exp(la - m) oa + exp(lb - m) ob) / (exp(la - m) + exp(lb - m))`` (0 where both are
    empty; ``m + log 0 = -inf``). Grid cdiv(M, BLOCK_M). Bytes: M (2 N e + 8) read, M (N e + 4) written; 8 FLOPs per value.
    """
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    la = tl.load(la_ptr + rows, mask=row_ok, other=float("-inf"))
    lb = tl.load(lb_ptr + rows, mask=row_ok, other=float("-inf"))
    m = tl.maximum(tl.maximum(la, lb), -3.4028234663852886e38)  # finite while both are -inf: weights 0, not NaN
    wa = tl.exp(la - m)
    wb = tl.exp(lb - m)
    l = wa + wb
    inv = 1.0 / tl.maximum(l, 1.0)  # l is 0 (both empty: out = 0) or in [1, 2]
    r64 = rows.to(tl.int64)
    mask = row_ok[:, None] & (cols[None, :] < N)
    oa = tl.load(oa_ptr + r64[:, None] * stride_am + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    ob = tl.load(ob_ptr + r64[:, None] * stride_bm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    out = oa * (wa * inv)[:, None] + ob * (wb * inv)[:, None]
    tl.store(o_ptr + r64[:, None] * stride_om + cols[None, :], to_output(out, o_ptr, EMULATE), mask=mask)
    tl.store(l_ptr + rows, m + tl.log(l), mask=row_ok)
