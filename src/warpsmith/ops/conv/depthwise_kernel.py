"""Depthwise convolution as a direct convolution (only ``@triton.jit`` code; no ``tl.dot``).

Forward, non-transposed, one input channel per group (``groups == C_in``), channel multiplier
``KG = C_out / groups >= 1``: output channel ``co`` reads input channel ``co // KG``::

    y[n, co, o] = sum_t x[n, co // KG, o s - p + t d] w[co, 0, t]

3-D throughout (1-D and 2-D calls pass singleton depth/height). One program computes a tile of
BLOCK_P output pixels (n x OD x OH x OW flattened) by BLOCK_C output channels in fp32, walking the
window's taps (KD x KH x KW, each axis its own loop): at each tap it loads the x tile at the tap's
input coordinates (``input_coord``: padding, stride and dilation masked as in the implicit GEMM)
and the taps' per-channel weights, and accumulates their products. Channels are the vectorized
(inner) axis of every tile: a channels-last input is read in contiguous runs of channels, an NCHW
one through its strides. The epilogue is the implicit GEMM's (``conv_epilogue``: scale, bias,
residual, activation, output strides).

ORDER names how the 1-D grid's program id splits into (pixel tile, channel tile): "pixels" keeps
the channel tiles of one pixel tile adjacent (pid = tile_p * tiles_c + tile_c), "channels" the
pixel tiles of one channel tile (pid = tile_c * tiles_p + tile_p).
"""
from ...core._triton import tl, triton
from .kernel import conv_epilogue, input_coord, split_pixels


@triton.jit
def tile_of(pid, tiles_p, tiles_c, ORDER: tl.constexpr):
    """Program id -> (pixel tile, channel tile) in the order ORDER names."""
    if ORDER == "pixels":
        tp = pid // tiles_c
        tc = pid % tiles_c
    else:
        tc = pid // tiles_p
        tp = pid % tiles_p
    return tp, tc


@triton.jit
def conv_depthwise_kernel(
    x_ptr, w_ptr, y_ptr, bias_ptr, res_ptr,
    BATCH, KG, CO, D, H, W, OD, OH, OW, KD, KH, KW,
    stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w, scale,
    sxn, sxc, sxd, sxh, sxw, swo, swd, swh, sww,
    syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, ORDER: tl.constexpr,
    HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACTIVATION: tl.constexpr, EMULATE: tl.constexpr,
):
    """One (BLOCK_P pixels, BLOCK_C output channels) tile; grid (cdiv(pixels, BLOCK_P) x cdiv(CO, BLOCK_C),).

    ``w`` is addressed as ``w[co, 0, kd, kh, kw]`` through (swo, swd, swh, sww)."""
    M = BATCH * OD * OH * OW
    tp, tc = tile_of(tl.program_id(0), tl.cdiv(M, BLOCK_P), tl.cdiv(CO, BLOCK_C), ORDER)
    rp = tp * BLOCK_P + tl.arange(0, BLOCK_P)
    rc = tc * BLOCK_C + tl.arange(0, BLOCK_C)
    n, od, oh, ow = split_pixels(rp, OD, OH, OW)
    p_ok = rp < M
    c_ok = rc < CO
    x_tile = x_ptr + (n.to(tl.int64) * sxn)[:, None] + ((rc // KG) * sxc)[None, :]
    w_col = w_ptr + rc * swo
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for kd in range(0, KD):
        id_, okd = input_coord(od, kd, D, stride_d, pad_d, dil_d, False)
        for kh in range(0, KH):
            ih, okh = input_coord(oh, kh, H, stride_h, pad_h, dil_h, False)
            for kw in range(0, KW):
                iw, okw = input_coord(ow, kw, W, stride_w, pad_w, dil_w, False)
                ok = p_ok & okd & okh & okw
                a = tl.load(x_tile + (id_ * sxd + ih * sxh + iw * sxw)[:, None], mask=ok[:, None] & c_ok[None, :],
                            other=0.0)
                b = tl.load(w_col + (kd * swd + kh * swh + kw * sww), mask=c_ok, other=0.0)
                acc += a.to(tl.float32) * b.to(tl.float32)[None, :]
    conv_epilogue(acc, y_ptr, bias_ptr, res_ptr, rp, rc, M, CO, OD, OH, OW, scale,
                  syn, syc, syd, syh, syw, srn, src, srd, srh, srw, stride_bias,
                  HAS_BIAS, HAS_RES, ACTIVATION, EMULATE)
