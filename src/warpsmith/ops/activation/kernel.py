"""Gated activation kernels (only ``@triton.jit`` code).

Forward: ``y = act(g) * u``; backward: ``dg = (dy * u) * act'(g)``, ``du = dy * act(g)``; all in
fp32, one rounding to the output dtype. ``ACT``: "silu", "gelu" (erf form) or "gelu_tanh"
(``0.5 g (1 + tanh(k (g + c g^3)))`` computed as ``g * sigmoid(2 k (g + c g^3))``, which does not
cancel for negative g). Operands are (M, H) with a row stride and unit column stride (a packed
(M, 2H) input is two such views). Rows are indexed in 64 bits, columns in 32.

Bytes moved per element: forward 2 reads + 1 write, backward 3 reads + 2 writes (element size of
the dtype); FLOPs per element about 6 (silu), 8 (gelu), 12 (gelu_tanh), twice that backward.
Tiles are (BLOCK_M rows, BLOCK_H columns); the persistent kernels stride a fixed grid over them.
"""
from ...core._triton import tl, triton
from ..shared.kernel import to_output


@triton.jit
def _sigmoid(x):
    """sigmoid(x) = exp(min(x, 0)) / (1 + exp(-|x|)): no exp overflows, so it stays accurate down to
    the subnormals (1 / (1 + exp(-x)) gives 0 once exp(-x) overflows, below x = -88.7)."""
    return tl.exp(tl.minimum(x, 0.0)) / (1.0 + tl.exp(-tl.abs(x)))


@triton.jit
def _sigmoid_pair(x):
    """(sigmoid(x), sigmoid(-x)), each accurate (1 - sigmoid(x) would cancel for large x)."""
    d = 1.0 / (1.0 + tl.exp(-tl.abs(x)))
    return tl.exp(tl.minimum(x, 0.0)) * d, tl.exp(tl.minimum(-x, 0.0)) * d


@triton.jit
def _tanh_arg(g):
    """w = 2 k (g + c g^3), k = sqrt(2 / pi), c = 0.044715: 0.5 (1 + tanh(w / 2)) = sigmoid(w)."""
    return 1.5957691216057308 * (g + 0.044715 * g * g * g)


@triton.jit
def gate_act(g, ACT: tl.constexpr):
    """act(g) in fp32."""
    if ACT == "silu":
        a = g * _sigmoid(g)
    elif ACT == "gelu":
        a = 0.5 * g * (1.0 + tl.erf(g * 0.7071067811865476))
    else:
        a = g * _sigmoid(_tanh_arg(g))
    return a


@triton.jit
def gate_act_grad(g, ACT: tl.constexpr):
    """(act(g), act'(g)) in fp32; 1 - sigmoid(w) is computed as sigmoid(-w) (no cancellation)."""
    if ACT == "silu":
        s, t = _sigmoid_pair(g)
        a = g * s
        d = s * (1.0 + g * t)
    elif ACT == "gelu":
        cdf = 0.5 * (1.0 + tl.erf(g * 0.7071067811865476))
        pdf = tl.exp(-0.5 * g * g) * 0.3989422804014327  # 1 / sqrt(2 pi)
        a = g * cdf
        d = cdf + g * pdf
    else:
        s, t = _sigmoid_pair(_tanh_arg(g))
        a = g * s
        d = s + g * s * t * (1.5957691216057308 * (1.0 + 0.134145 * g * g))  # w'(g); 0.134145 = 3 c
    return a, d


@triton.jit
def _tile(pid_m, pid_h, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    return rows, cols


@triton.jit
def gated_fwd_tile(g_ptr, u_ptr, y_ptr, rows, cols, M, H, stride_gm, stride_um, stride_ym,
                   ACT: tl.constexpr, EMULATE: tl.constexpr):
    mask = (rows[:, None] < M) & (cols[None, :] < H)
    g = tl.load(g_ptr + rows[:, None] * stride_gm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + rows[:, None] * stride_um + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    y = gate_act(g, ACT) * u
    tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :], to_output(y, y_ptr, EMULATE), mask=mask)


@triton.jit
def gated_bwd_tile(dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, rows, cols, M, H,
                   stride_dym, stride_gm, stride_um, stride_dgm, stride_dum,
                   ACT: tl.constexpr, EMULATE: tl.constexpr):
    mask = (rows[:, None] < M) & (cols[None, :] < H)
    dy = tl.load(dy_ptr + rows[:, None] * stride_dym + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + rows[:, None] * stride_gm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + rows[:, None] * stride_um + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    a, d = gate_act_grad(g, ACT)
    dg = (dy * u) * d
    du = dy * a
    tl.store(dg_ptr + rows[:, None] * stride_dgm + cols[None, :], to_output(dg, dg_ptr, EMULATE), mask=mask)
    tl.store(du_ptr + rows[:, None] * stride_dum + cols[None, :], to_output(du, du_ptr, EMULATE), mask=mask)


@triton.jit
def gated_fwd_kernel(
    g_ptr, u_ptr, y_ptr,
    M, H,
    stride_gm, stride_um, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, ACT: tl.constexpr, EMULATE: tl.constexpr,
):
    """y = act(g) * u; one program per (BLOCK_M, BLOCK_H) tile, grid (cdiv(M, BLOCK_M), cdiv(H, BLOCK_H))."""
    rows, cols = _tile(tl.program_id(0), tl.program_id(1), BLOCK_M, BLOCK_H)
    gated_fwd_tile(g_ptr, u_ptr, y_ptr, rows, cols, M, H, stride_gm, stride_um, stride_ym, ACT, EMULATE)


@triton.jit
def gated_fwd_persistent_kernel(
    g_ptr, u_ptr, y_ptr,
    M, H,
    stride_gm, stride_um, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, ACT: tl.constexpr, EMULATE: tl.constexpr,
):
    """As gated_fwd_kernel; a fixed grid strides over the tiles (row-major tile order)."""
    tiles_h = tl.cdiv(H, BLOCK_H)
    for tile in range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * tiles_h, tl.num_programs(0)):
        rows, cols = _tile(tile // tiles_h, tile % tiles_h, BLOCK_M, BLOCK_H)
        gated_fwd_tile(g_ptr, u_ptr, y_ptr, rows, cols, M, H, stride_gm, stride_um, stride_ym, ACT, EMULATE)


@triton.jit
def gated_bwd_kernel(
    dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr,
    M, H,
    stride_dym, stride_gm, stride_um, stride_dgm, stride_dum,
    BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, ACT: tl.constexpr, EMULATE: tl.constexpr,
):
    """dg = (dy * u) * act'(g), du = dy * act(g); grid (cdiv(M, BLOCK_M), cdiv(H, BLOCK_H))."""
    rows, cols = _tile(tl.program_id(0), tl.program_id(1), BLOCK_M, BLOCK_H)
    gated_bwd_tile(dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, rows, cols, M, H,
                   stride_dym, stride_gm, stride_um, stride_dgm, stride_dum, ACT, EMULATE)


@triton.jit
def gated_bwd_persistent_kernel(
    dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr,
    M, H,
    stride_dym, stride_gm, stride_um, stride_dgm, stride_dum,
    BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, ACT: tl.constexpr, EMULATE: tl.constexpr,
):
    """As gated_bwd_kernel; a fixed grid strides over the tiles."""
    tiles_h = tl.cdiv(H, BLOCK_H)
    for tile in range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * tiles_h, tl.num_programs(0)):
        rows, cols = _tile(tile // tiles_h, tile % tiles_h, BLOCK_M, BLOCK_H)
        gated_bwd_tile(dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, rows, cols, M, H,
                       stride_dym, stride_gm, stride_um, stride_dgm, stride_dum, ACT, EMULATE)
