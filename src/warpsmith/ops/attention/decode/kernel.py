"""Attention decode kernels: split-KV (flash-decoding) partials and their merge (only ``@triton.jit`` code).

``decode_partial_kernel`` runs one program per (work item, KV head, block of query rows). A work
item (from the plan, plan.py) is a token range ``[start, end)`` of one sequence ``b``; the
program holds all the query heads of its KV head (GQA packing: ``BLOCK_H >= G`` rows, or a block
of them; with ``MULTI``, QT query tokens per sequence, row ``r`` is token ``r // G`` of head
``r % G``, and token t sees only keys ``j < L_b - QT + t + 1``) and streams the range in ``BLOCK_N``
tokens, with the online softmax::

    s = scale * q k^T  (+ q_pe k_pe^T for MLA)      m' = max(m, max s)      p = exp(s - m')
    l = l exp(m - m') + sum p                        acc = acc exp(m - m') + p V

and writes its partial ``o = acc / l`` and ``lse = m + log l`` (fp32), or with ``DIRECT`` (one item
per sequence, item w is sequence w) the final output in the output dtype. Tokens are found through
``TABLE``: ``"none"`` (contiguous: page = sequence b, slot = token), ``"block_table"``
(page ``table[b, j // PAGE]``, slot ``j % PAGE``) or ``"csr"`` (page ``indices[indptr[b] + j // PAGE]``,
masked to the sequence's own pages). The cache strides (page, slot, head, dim) express NHD, HND
and the contiguous layout alike. A row that sees no key of its item (an empty item: a zero-length
sequence or a padded grid slot; or keys all past a query token's position) writes ``o = sum 0 v``
(0 for an empty item) and ``lse = -inf``.

``decode_reduce_kernel`` merges the partials of each (sequence, query head): items
``indptr[b] .. indptr[b + 1]`` of the work list, weights ``exp(lse_i - max lse)``.

Special values: exponents are taken against ``m`` clamped to [-FLT_MAX, FLT_MAX], so masked tokens
and the empty start give ``exp(-inf) = 0``, never ``exp(-inf + inf) = NaN``, and a +inf score gives
``l = inf``: the output is NaN (inf / inf) and lse +inf, as torch's softmax and logsumexp; a NaN
score reaches ``l`` and makes both NaN.

Bytes: the KV of every token read once per head block (K and V; MLA: the latent once, used as K
and V, plus the rotary part), q read, partials written and read back (fp32: (Dv + 1) 4 bytes per
item and head). FLOPs 2 Hq L (Dqk + Dv).
"""
from ....core._triton import tl, triton
from ...shared.kernel import dot_acc, to_output

FLT_MAX = tl.constexpr(3.4028234663852886e38)


@triton.jit
def _tanh(t):
    """tanh in fp32 to a few ulp: an odd Taylor polynomial for |t| < 1/8 (next term < 1e-11 |t|),
    ``(1 - e) / (1 + e)`` with ``e = exp(-2|t|)`` beyond (no cancellation worse than 1 / (1 - e^-1/4)).
    Written without selects on data (the symbolic tracer models none): blended by a 0/1 mask."""
    a = tl.abs(t)
    e = tl.exp(-2.0 * a)
    big = (1.0 - e) / (1.0 + e)
    tc = tl.minimum(tl.maximum(t, -0.125), 0.125)
    t2 = tc * tc
    small = tc * (1.0 + t2 * (-0.3333333333333333 + t2 * (0.13333333333333333 + t2 * (-0.05396825396825397
                                                                                      + t2 * 0.021869488536155203))))
    near = (a < 0.125).to(tl.float32)
    sign = 1.0 - 2.0 * (t < 0.0).to(tl.float32)
    return near * small + (1.0 - near) * sign * big


@triton.jit
def _token_pages(table_ptr, indptr_ptr, b, n, nmask, stride_tb, stride_tn,
                 PAGE: tl.constexpr, TABLE: tl.constexpr):
    """(page, slot, mask) of token positions ``n`` (int64) of sequence ``b`` (int64)."""
    if TABLE == "none":
        page = b + 0 * n
        slot = n
        ok = nmask
    elif TABLE == "block_table":
        j = n // PAGE
        page = tl.load(table_ptr + b * stride_tb + j * stride_tn, mask=nmask, other=0).to(tl.int64)
        slot = n % PAGE
        ok = nmask
    else:
        first = tl.load(indptr_ptr + b).to(tl.int64)
        count = tl.load(indptr_ptr + b + 1).to(tl.int64) - first
        j = n // PAGE
        ok = nmask & (j < count)  # only the sequence's own pages (the plan keeps end within them)
        page = tl.load(table_ptr + (first + j) * stride_tn, mask=ok, other=0).to(tl.int64)
        slot = n % PAGE
    return page, slot, ok


@triton.jit
def decode_partial_kernel(
    q_ptr, k_ptr, v_ptr, qpe_ptr, kpe_ptr, table_ptr, indptr_ptr, lens_ptr,
    work_batch_ptr, work_start_ptr, work_end_ptr, o_ptr, lse_ptr,
    G, QT, D, DV, DPE, sm_scale, softcap,
    stride_qb, stride_qt, stride_qh, stride_qd,
    stride_kp, stride_ks, stride_kh, stride_kd,
    stride_vp, stride_vs, stride_vh, stride_vd,
    stride_qpb, stride_qpt, stride_qph, stride_qpd,
    stride_kpp, stride_kps, stride_kpd,
    stride_tb, stride_tn,
    stride_ow, stride_ot, stride_oh, stride_od, stride_lw, stride_lt, stride_lh,
    PAGE: tl.constexpr, TABLE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_DPE: tl.constexpr, HAS_PE: tl.constexpr, SAME_KV: tl.constexpr, SOFTCAP: tl.constexpr,
    DIRECT: tl.constexpr, MULTI: tl.constexpr, IS_FP32: tl.constexpr, EMULATE: tl.constexpr,
):
    """Grid (work items, Hk, cdiv(QT G, BLOCK_H)). See the module docstring."""
    w = tl.program_id(0).to(tl.int64)
    hk = tl.program_id(1).to(tl.int64)
    r = tl.program_id(2) * BLOCK_H + tl.arange(0, BLOCK_H)  # row r: query token r // G, head hk G + r % G
    b = tl.load(work_batch_ptr + w).to(tl.int64)
    start = tl.load(work_start_ptr + w).to(tl.int64)
    end = tl.load(work_end_ptr + w).to(tl.int64)
    if MULTI:
        g = r % G
        t = (r // G).to(tl.int64)
        hmask = r < QT * G
        # query token t sits at position L_b - QT + t: it sees keys j < L_b - QT + t + 1
        lim = tl.load(lens_ptr + b).to(tl.int64) - QT + t + 1
    else:
        g = r
        t = tl.zeros((BLOCK_H,), tl.int64)
        hmask = r < G
        lim = end + t
    h = hk * G + g.to(tl.int64)

    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    q = tl.load(q_ptr + b * stride_qb + (t * stride_qt + h * stride_qh)[:, None] + d[None, :] * stride_qd,
                mask=hmask[:, None] & dmask[None, :], other=0.0)
    if HAS_PE:
        e = tl.arange(0, BLOCK_DPE)
        emask = e < DPE
        qpe = tl.load(qpe_ptr + b * stride_qpb + (t * stride_qpt + h * stride_qph)[:, None] + e[None, :] * stride_qpd,
                      mask=hmask[:, None] & emask[None, :], other=0.0)
    dv = tl.arange(0, BLOCK_DV)
    dvmask = dv < DV

    m = tl.full((BLOCK_H,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK_H,), tl.float32)
    acc = tl.zeros((BLOCK_H, BLOCK_DV), tl.float32)
    for n0 in range(start, end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        page, slot, ok = _token_pages(table_ptr, indptr_ptr, b, n, n < end, stride_tb, stride_tn, PAGE, TABLE)
        k_row = k_ptr + page * stride_kp + slot * stride_ks + hk * stride_kh
        k = tl.load(k_row[:, None] + d[None, :] * stride_kd, mask=ok[:, None] & dmask[None, :], other=0.0)
        s = dot_acc(q, tl.trans(k), tl.zeros((BLOCK_H, BLOCK_N), tl.float32), IS_FP32, "ieee", EMULATE)
        if HAS_PE:
            kpe = tl.load(kpe_ptr + (page * stride_kpp + slot * stride_kps)[:, None] + e[None, :] * stride_kpd,
                          mask=ok[:, None] & emask[None, :], other=0.0)
            s = dot_acc(qpe, tl.trans(kpe), s, IS_FP32, "ieee", EMULATE)
        s = s * sm_scale
        if SOFTCAP:
            s = softcap * _tanh(s / softcap)
        if MULTI:
            s = tl.where(ok[None, :] & (n[None, :] < lim[:, None]), s, float("-inf"))
        else:
            s = tl.where(ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        base = tl.minimum(tl.maximum(m_new, -FLT_MAX), FLT_MAX)
        alpha = tl.exp(m - base)
        p = tl.exp(s - base[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        if SAME_KV:
            v = k
        else:
            v_row = v_ptr + page * stride_vp + slot * stride_vs + hk * stride_vh
            v = tl.load(v_row[:, None] + dv[None, :] * stride_vd, mask=ok[:, None] & dvmask[None, :], other=0.0)
        acc = dot_acc(p.to(v.dtype), v, acc * alpha[:, None], IS_FP32, "ieee", EMULATE)
        m = m_new
    # a row that saw no key here: o = acc (0, or NaN from 0 x a NaN v), lse -inf; the merge weighs it 0
    seen = tl.minimum(end, lim) > start
    o = tl.where(seen[:, None], acc / l[:, None], acc)
    lse = tl.where(seen, m + tl.log(l), float("-inf"))
    omask = hmask[:, None] & dvmask[None, :]
    o_off = w * stride_ow + (t * stride_ot + h * stride_oh)[:, None] + dv[None, :] * stride_od
    if DIRECT:
        tl.store(o_ptr + o_off, to_output(o, o_ptr, EMULATE), mask=omask)
    else:
        tl.store(o_ptr + o_off, o, mask=omask)
    tl.store(lse_ptr + w * stride_lw + t * stride_lt + h * stride_lh, lse, mask=hmask)


@triton.jit
def decode_reduce_kernel(
    o_part_ptr, lse_part_ptr, indptr_ptr, out_ptr, lse_ptr,
    DV,
    stride_pw, stride_ph, stride_pd, stride_lpw, stride_lph,
    stride_ob, stride_oh, stride_od, stride_lb, stride_lh,
    BLOCK_DV: tl.constexpr, EMULATE: tl.constexpr,
):
    """Grid (B, Hq): merge the partials of items indptr[b] .. indptr[b + 1] of sequence b, head h.

    ``o = sum_i w_i o_i / sum_i w_i``, ``w_i = exp(lse_i - M)``, ``M = max_i lse_i``;
    ``lse = M + log sum_i w_i``. No item, or only empty ones: ``o = 0`` (sum 0 of zeros), ``lse = -inf``.
    """
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    lo = tl.load(indptr_ptr + b).to(tl.int64)
    hi = tl.load(indptr_ptr + b + 1).to(tl.int64)
    dv = tl.arange(0, BLOCK_DV)
    dvmask = dv < DV
    mx = float("-inf")
    for i in range(lo, hi):
        item = lo + (i - lo)  # int64 (the interpreter's loop index is a Python int, compiled Triton's a tensor)
        mx = tl.maximum(mx, tl.load(lse_part_ptr + item * stride_lpw + h * stride_lph))
    base = tl.minimum(tl.maximum(mx, -FLT_MAX), FLT_MAX)
    acc = tl.zeros((BLOCK_DV,), tl.float32)
    l = 0.0
    for i in range(lo, hi):
        item = lo + (i - lo)
        wt = tl.exp(tl.load(lse_part_ptr + item * stride_lpw + h * stride_lph) - base)
        l += wt
        acc += wt * tl.load(o_part_ptr + item * stride_pw + h * stride_ph + dv * stride_pd, mask=dvmask, other=0.0)
    # l = 0: every item empty (o_i = 0) or all scores -inf (o_i NaN): o = acc, which is 0 or NaN
    o = acc / (l + (l == 0.0).to(tl.float32))
    tl.store(out_ptr + b * stride_ob + h * stride_oh + dv * stride_od, to_output(o, out_ptr, EMULATE), mask=dvmask)
    tl.store(lse_ptr + b * stride_lb + h * stride_lh, base + tl.log(l))
