"""Rotary position embedding kernels (only ``@triton.jit`` code).

Pair i of head h of token (b, s) (i < R2): ``o1 = x1 c - x2 s``, ``o2 = x2 c + x1 s`` (BACKWARD: the
rotation by -theta, ``o1 = x1 c + x2 s``, ``o2 = x2 c - x1 s``), in fp32, rounded once to the
output dtype; LAYOUT "neox" pairs dims (i, i + R2), "gptj" pairs (2i, 2i + 1); dims 2 R2..D are
copied. q and k are handled by one launch: the head axis of the grid runs over Hq + Hk heads, the
first Hq lanes read q, the rest k (each load and store is masked to its tensor). A tile is
(BLOCK_H heads, BLOCK_S tokens, BLOCK_R pairs); its cos/sin rows are loaded once and applied to
every head of the tile. Rows of cos/sin: ``positions[b, s]`` (HAS_POS), else s; the batch stride
of cos/sin is 0 for a shared table. A position outside [0, P) is not read: its rotary dims
become NaN. All address arithmetic is int64; any strides.

Bytes moved: q and k read once and written once (2 (Hq + Hk) B S D element sizes), plus the
cos/sin rows (2 B S R2 table element sizes per head block) and the positions; FLOPs 6 per pair.
"""
from ...core._triton import tl, triton
from ..shared.kernel import to_output


@triton.jit
def _rotate(x_ptr, o_ptr, heads, hmask, s_idx, smask, r, rmask, c, sn,
            stride_xh, stride_xs, stride_xd, stride_oh, stride_os, stride_od, R2,
            LAYOUT: tl.constexpr, BACKWARD: tl.constexpr, EMULATE: tl.constexpr):
    """Rotate one (heads, tokens, pairs) tile of x (pointers already at batch b) into o."""
    if LAYOUT == "neox":
        d1 = r
        d2 = r + R2
    else:
        d1 = 2 * r
        d2 = 2 * r + 1
    mask = hmask[:, None, None] & smask[None, :, None] & rmask[None, None, :]
    x_row = x_ptr + heads[:, None, None] * stride_xh + s_idx[None, :, None] * stride_xs
    o_row = o_ptr + heads[:, None, None] * stride_oh + s_idx[None, :, None] * stride_os
    x1 = tl.load(x_row + d1[None, None, :] * stride_xd, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + d2[None, None, :] * stride_xd, mask=mask, other=0.0).to(tl.float32)
    cc = c[None, :, :]
    ss = sn[None, :, :]
    if BACKWARD:
        o1 = x1 * cc + x2 * ss
        o2 = x2 * cc - x1 * ss
    else:
        o1 = x1 * cc - x2 * ss
        o2 = x2 * cc + x1 * ss
    tl.store(o_row + d1[None, None, :] * stride_od, to_output(o1, o_ptr, EMULATE), mask=mask)
    tl.store(o_row + d2[None, None, :] * stride_od, to_output(o2, o_ptr, EMULATE), mask=mask)


@triton.jit
def _copy(x_ptr, o_ptr, heads, hmask, s_idx, smask, d, dmask,
          stride_xh, stride_xs, stride_xd, stride_oh, stride_os, stride_od):
    """Copy the dims past the rotary part (exact: no conversion)."""
    mask = hmask[:, None, None] & smask[None, :, None] & dmask[None, None, :]
    x = tl.load(x_ptr + heads[:, None, None] * stride_xh + s_idx[None, :, None] * stride_xs
                + d[None, None, :] * stride_xd, mask=mask)
    tl.store(o_ptr + heads[:, None, None] * stride_oh + s_idx[None, :, None] * stride_os
             + d[None, None, :] * stride_od, x, mask=mask)


@triton.jit
def rope_tile(
    q_ptr, k_ptr, qo_ptr, ko_ptr, cos_ptr, sin_ptr, pos_ptr,
    b, pid_s, pid_h,
    S, HQ, HK, R2, D, P,
    stride_qb, stride_qh, stride_qs, stride_qd, stride_kb, stride_kh, stride_ks, stride_kd,
    stride_qob, stride_qoh, stride_qos, stride_qod, stride_kob, stride_koh, stride_kos, stride_kod,
    stride_cb, stride_cs, stride_cr, stride_sb, stride_ss, stride_sr, stride_pb, stride_ps,
    BLOCK_S: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
    LAYOUT: tl.constexpr, HAS_POS: tl.constexpr, BACKWARD: tl.constexpr, EMULATE: tl.constexpr,
):
    """Tile (pid_s, pid_h) of batch entry b (int64): BLOCK_S tokens x BLOCK_H of the Hq + Hk heads."""
    s_idx = (pid_s * BLOCK_S + tl.arange(0, BLOCK_S)).to(tl.int64)
    smask = s_idx < S
    hh = (pid_h * BLOCK_H + tl.arange(0, BLOCK_H)).to(tl.int64)
    is_q = hh < HQ
    is_k = (hh >= HQ) & (hh < HQ + HK)
    kh = hh - HQ
    if HAS_POS:
        row = tl.load(pos_ptr + b * stride_pb + s_idx * stride_ps, mask=smask, other=0).to(tl.int64)
        row_ok = smask & (row >= 0) & (row < P)
    else:
        row = s_idx
        row_ok = smask & (row < P)
    q_b = q_ptr + b * stride_qb
    k_b = k_ptr + b * stride_kb
    qo_b = qo_ptr + b * stride_qob
    ko_b = ko_ptr + b * stride_kob
    c_row = cos_ptr + b * stride_cb + row[:, None] * stride_cs
    s_row = sin_ptr + b * stride_sb + row[:, None] * stride_ss
    for r0 in range(0, R2, BLOCK_R):
        r = (r0 + tl.arange(0, BLOCK_R)).to(tl.int64)
        rmask = r < R2
        tmask = row_ok[:, None] & rmask[None, :]
        # a token whose position is outside the table rotates by NaN (a literal: a module-level NaN
        # constexpr fails compiled Triton's launch-time re-check of globals, since NaN != NaN)
        c = tl.load(c_row + r[None, :] * stride_cr, mask=tmask, other=float("nan")).to(tl.float32)
        sn = tl.load(s_row + r[None, :] * stride_sr, mask=tmask, other=float("nan")).to(tl.float32)
        _rotate(q_b, qo_b, hh, is_q, s_idx, smask, r, rmask, c, sn, stride_qh, stride_qs, stride_qd,
                stride_qoh, stride_qos, stride_qod, R2, LAYOUT, BACKWARD, EMULATE)
        _rotate(k_b, ko_b, kh, is_k, s_idx, smask, r, rmask, c, sn, stride_kh, stride_ks, stride_kd,
                stride_koh, stride_kos, stride_kod, R2, LAYOUT, BACKWARD, EMULATE)
    for e0 in range(2 * R2, D, 2 * BLOCK_R):
        d = (e0 + tl.arange(0, 2 * BLOCK_R)).to(tl.int64)
        dmask = d < D
        _copy(q_b, qo_b, hh, is_q, s_idx, smask, d, dmask, stride_qh, stride_qs, stride_qd,
              stride_qoh, stride_qos, stride_qod)
        _copy(k_b, ko_b, kh, is_k, s_idx, smask, d, dmask, stride_kh, stride_ks, stride_kd,
              stride_koh, stride_kos, stride_kod)


@triton.jit
def rope_kernel(
    q_ptr, k_ptr, qo_ptr, ko_ptr, cos_ptr, sin_ptr, pos_ptr,
    S, HQ, HK, R2, D, P,
    stride_qb, stride_qh, stride_qs, stride_qd, stride_kb, stride_kh, stride_ks, stride_kd,
    stride_qob, stride_qoh, stride_qos, stride_qod, stride_kob, stride_koh, stride_kos, stride_kod,
    stride_cb, stride_cs, stride_cr, stride_sb, stride_ss, stride_sr, stride_pb, stride_ps,
    BLOCK_S: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
    LAYOUT: tl.constexpr, HAS_POS: tl.constexpr, BACKWARD: tl.constexpr, EMULATE: tl.constexpr,
):
    """One program per tile; grid (cdiv(S, BLOCK_S), cdiv(Hq + Hk, BLOCK_H), B)."""
    rope_tile(q_ptr, k_ptr, qo_ptr, ko_ptr, cos_ptr, sin_ptr, pos_ptr,
              tl.program_id(2).to(tl.int64), tl.program_id(0), tl.program_id(1),
              S, HQ, HK, R2, D, P,
              stride_qb, stride_qh, stride_qs, stride_qd, stride_kb, stride_kh, stride_ks, stride_kd,
              stride_qob, stride_qoh, stride_qos, stride_qod, stride_kob, stride_koh, stride_kos, stride_kod,
              stride_cb, stride_cs, stride_cr, stride_sb, stride_ss, stride_sr, stride_pb, stride_ps,
              BLOCK_S, BLOCK_H, BLOCK_R, LAYOUT, HAS_POS, BACKWARD, EMULATE)


@triton.jit
def rope_persistent_kernel(
    q_ptr, k_ptr, qo_ptr, ko_ptr, cos_ptr, sin_ptr, pos_ptr,
    S, HQ, HK, R2, D, P,
    stride_qb, stride_qh, stride_qs, stride_qd, stride_kb, stride_kh, stride_ks, stride_kd,
    stride_qob, stride_qoh, stride_qos, stride_qod, stride_kob, stride_koh, stride_kos, stride_kod,
    stride_cb, stride_cs, stride_cr, stride_sb, stride_ss, stride_sr, stride_pb, stride_ps,
    BLOCK_S: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
    LAYOUT: tl.constexpr, HAS_POS: tl.constexpr, BACKWARD: tl.constexpr, EMULATE: tl.constexpr,
):
    """Grid (programs per batch entry, B): each program strides over the tiles of its batch entry,
    head blocks fastest (neighbouring tiles share cos/sin rows)."""
    tiles_h = tl.cdiv(HQ + HK, BLOCK_H)
    for tile in range(tl.program_id(0), tl.cdiv(S, BLOCK_S) * tiles_h, tl.num_programs(0)):
        rope_tile(q_ptr, k_ptr, qo_ptr, ko_ptr, cos_ptr, sin_ptr, pos_ptr,
                  tl.program_id(1).to(tl.int64), tile // tiles_h, tile % tiles_h,
                  S, HQ, HK, R2, D, P,
                  stride_qb, stride_qh, stride_qs, stride_qd, stride_kb, stride_kh, stride_ks, stride_kd,
                  stride_qob, stride_qoh, stride_qos, stride_qod, stride_kob, stride_koh, stride_kos, stride_kod,
                  stride_cb, stride_cs, stride_cr, stride_sb, stride_ss, stride_sr, stride_pb, stride_ps,
                  BLOCK_S, BLOCK_H, BLOCK_R, LAYOUT, HAS_POS, BACKWARD, EMULATE)
