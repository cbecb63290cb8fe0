"""The library ops the compiler calls, as text for a self-contained program.

For each ``library`` node this gives the ``@triton.jit`` kernels it needs (the library's own
functions, copied by :func:`jit_source`) and a minimal launcher (source text below): fixed, safe
tile sizes, except the launchers of the GEMMs, softmax, the norms, attention, conv (either kernel) and
pooling, which take the config solve chose for the call's shape (``cfg``: a tuning-DB record or one
tuned during solve, :mod:`.library_tune`, whose ``TUNABLE`` table says which knobs each takes;
:func:`launch_config`). :data:`LAUNCHERS` is the one table of which launcher each op uses and which
kernels it launches. Copied kernels, their helpers, constants and imports get names unique in the
emitted file (:mod:`.names`), so that library kernels from different modules compose.
"""
from __future__ import annotations

import inspect
import textwrap
from typing import Any

from . import lower_gather, names
from .ir import Node

MAX_WHOLE_ROW = 8192  # softmax / norms hold a row in registers up to this length, else loop

MATMUL = '''
def _ws_matmul(a, b, bias, activation, cfg=None):
    """a (M, K) or (B, M, K) @ b (K, N) or (B, K, N) [+ bias (N,)], then the activation; any strides.
    ``cfg``: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages), the config chosen for this
    call's shape (compiler.library_tune); None: the launcher's default tiles."""
    batched = a.dim() == 3
    a3 = a if batched else a.unsqueeze(0)
    b3 = b if batched else b.unsqueeze(0)
    nb, m, k = a3.shape
    n = b3.shape[2]
    c = torch.empty((nb, m, n), dtype=a.dtype, device=a.device)
    bm, bn, bk, gm, nw, ns = cfg or ((16, 16, 16, 8, 4, 3) if _EMULATE else (64, 64, 32, 8, 4, 3))
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), nb)
    bias1 = bias.reshape(-1) if bias is not None else None
    matmul_tiled_kernel[grid](
        a3, b3, c, bias1 if bias1 is not None else c, m, n, k,
        a3.stride(0), a3.stride(1), a3.stride(2), b3.stride(0), b3.stride(1), b3.stride(2),
        c.stride(0), c.stride(1), c.stride(2), bias1.stride(0) if bias1 is not None else 0,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, EVEN_K=k % bk == 0, HAS_BIAS=bias1 is not None,
        ACTIVATION=activation, IS_FP32=a.dtype == torch.float32, PRECISION="ieee", EMULATE=_EMULATE,
        num_warps=nw, num_stages=ns)
    return c if batched else c[0]


def _ws_matmul_nd(x, b, bias, activation, cfg=None):
    """x (..., K) @ b (K, N) [+ bias]: the leading dims of x flattened into rows."""
    y = _ws_matmul(x.reshape(-1, x.shape[-1]), b, bias, activation, cfg)
    return y.view(*x.shape[:-1], b.shape[1])


def _ws_linear(x, w, bias, activation, cfg=None):
    """x (..., K) @ w (N, K)^T [+ bias]: w is read transposed through its strides, never copied."""
    return _ws_matmul_nd(x, w.t(), bias, activation, cfg)
'''

SOFTMAX = '''
def _ws_softmax(x, log, cfg=None):
    """softmax or log_softmax over the last dim. ``cfg``: (ROWS, num_warps) of the whole-row kernel, the
    config chosen for this call's shape (compiler.library_tune); None: one row a program, 4 warps."""
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    m = x2.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if n <= {MAX}:
        rows, nw = cfg or (1, 4)
        softmax_single_pass_kernel[(triton.cdiv(m, rows),)](x2, y, m, n, x2.stride(0), x2.stride(1), y.stride(0),
                                         BLOCK_N=triton.next_power_of_2(n), ROWS=rows, LOG=log, EMULATE=_EMULATE,
                                         num_warps=nw)
    else:
        softmax_online_kernel[(m,)](x2, y, m, n, x2.stride(0), x2.stride(1), y.stride(0),
                                    BLOCK_N=1024, LOG=log, EMULATE=_EMULATE)
    return y.view(x.shape)
'''.replace("{MAX}", str(MAX_WHOLE_ROW))  # the kernel that holds a row whole, up to MAX_WHOLE_ROW

NORM = '''
def _ws_norm(x, w, b, eps, is_rms, cfg=None):
    """RMSNorm (is_rms) or LayerNorm over the last dim, statistics in fp32. ``cfg``: (ROWS_PER_PROGRAM,
    num_warps) of the whole-row kernel, the config chosen for this call's shape (compiler.library_tune);
    None: one row a program, 4 warps."""
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    m = x2.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    mean = torch.empty((m,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((m,), dtype=torch.float32, device=x.device)
    wp = w if w is not None else x2
    bp = b if b is not None else x2
    if n <= {MAX}:
        rows, nw = cfg or (1, 4)
        norm_fwd_row_kernel[(triton.cdiv(m, rows),)](x2, x2, wp, bp, y, y, mean, rstd, m, n, eps,
                                  x2.stride(0), x2.stride(0), y.stride(0), y.stride(0),
                                  ROWS=rows, BLOCK_N=triton.next_power_of_2(n), IS_RMS=is_rms, HAS_W=w is not None,
                                  HAS_B=b is not None, HAS_RES=False, EMULATE=_EMULATE, num_warps=nw)
    else:
        norm_fwd_looped_kernel[(m,)](x2, x2, wp, bp, y, y, mean, rstd, m, n, eps,
                                     x2.stride(0), x2.stride(0), y.stride(0), y.stride(0),
                                     BLOCK_N=1024, IS_RMS=is_rms, HAS_W=w is not None, HAS_B=b is not None,
                                     HAS_RES=False, EMULATE=_EMULATE)
    return y.view(x.shape)
'''.replace("{MAX}", str(MAX_WHOLE_ROW))

# the implicit-GEMM conv launcher's default (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): on a GPU, and
# under the interpreter (whose cost is per program and reduction step: big tiles); 4 warps, 3 stages: Triton's own
CONV_TILES = {"gpu": (64, 64, 32, 4, 3), "interpreter": (64, 32, 16, 4, 3)}
# ... and the depthwise kernel's (BLOCK_P, BLOCK_C, num_warps)
DEPTHWISE_TILES = {"gpu": (64, 32, 4), "interpreter": (64, 16, 4)}

CONV = '''
def _ws_conv(x, w, bias, stride, padding, dilation, transposed, output_padding, groups, activation, cfg=None):
    """aten.convolution (1-D/2-D/3-D, direct or transposed), one launch, the activation fused: the direct
    depthwise kernel for one input channel per group, else the implicit GEMM (an inference batch norm
    arrives folded into w and bias: compiler.lower_conv). ``cfg``: the config chosen for this call's shape
    (compiler.library_tune), the depthwise kernel's (BLOCK_P, BLOCK_C, num_warps) or the implicit GEMM's
    (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); None: the launcher's default tiles."""
    nd = x.dim() - 2
    ks = list(w.shape[2:])
    if transposed:
        co = w.shape[1] * groups
        out = [(x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ks[i] - 1) + output_padding[i] + 1
               for i in range(nd)]
    else:
        co = w.shape[0]
        out = [(x.shape[2 + i] + 2 * padding[i] - dilation[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    y = torch.empty((x.shape[0], co, *out), dtype=x.dtype, device=x.device)
    x5, y5, w5 = x, y, w
    while x5.dim() < 5:
        x5, y5, w5 = x5.unsqueeze(2), y5.unsqueeze(2), w5.unsqueeze(2)
    fill = [1] * (3 - nd)
    n_, c_, d_, h_, w_ = x5.shape
    od, oh, ow = y5.shape[2:]
    kd, kh, kw = w5.shape[2:]
    if not transposed and groups == c_ and w5.shape[1] == 1:  # depthwise: the direct kernel, no GEMM
        bp, bc, nw = cfg or ({DW_INTERPRETER} if _EMULATE else {DW_GPU})
        conv_depthwise_kernel[(triton.cdiv(n_ * od * oh * ow, bp) * triton.cdiv(co, bc),)](
            x5, w5, y, bias if bias is not None else y, y, n_, co // c_, co, d_, h_, w_, od, oh, ow, kd, kh, kw,
            *(fill + list(stride)), *([0] * (3 - nd) + list(padding)), *(fill + list(dilation)), 1.0,
            *x5.stride(), w5.stride(0), *w5.stride()[2:], *y5.stride(), *y5.stride(),
            bias.stride(0) if bias is not None else 0,
            BLOCK_P=bp, BLOCK_C=bc, ORDER="pixels", HAS_BIAS=bias is not None, HAS_RES=False, ACTIVATION=activation,
            EMULATE=_EMULATE and x.dtype == torch.bfloat16, num_warps=nw)
        return y
    cg, kg = c_ // groups, co // groups
    if transposed:
        ws = (cg * w5.stride(0), w5.stride(1), w5.stride(0), *w5.stride()[2:])
    else:
        ws = (kg * w5.stride(0), w5.stride(0), w5.stride(1), *w5.stride()[2:])
    bm, bn_, bk, nw, ns = cfg or ({INTERPRETER} if _EMULATE else {GPU})  # the interpreter's cost is per program
    total = kd * kh * kw * triton.cdiv(cg, bk)
    grid = (triton.cdiv(n_ * od * oh * ow, bm) * triton.cdiv(kg, bn_), groups, 1)
    conv_fwd_kernel[grid](
        x5, w5, y, bias if bias is not None else y, y, y, n_, cg, kg, d_, h_, w_, od, oh, ow, kd, kh, kw,
        *(fill + list(stride)), *([0] * (3 - nd) + list(padding)), *(fill + list(dilation)), total, 1.0,
        *x5.stride(), *ws, *y5.stride(), *y5.stride(), bias.stride(0) if bias is not None else 0,
        BLOCK_M=bm, BLOCK_N=bn_, BLOCK_K=bk, LOOP="nested", TRANSPOSED=transposed, SPLIT=False,
        HAS_BIAS=bias is not None, HAS_RES=False, ACTIVATION=activation, IS_FP32=x.dtype == torch.float32,
        PRECISION="ieee", EMULATE=_EMULATE and x.dtype == torch.bfloat16, num_warps=nw, num_stages=ns)
    return y
'''.replace("{INTERPRETER}", repr(CONV_TILES["interpreter"])).replace("{GPU}", repr(CONV_TILES["gpu"])) \
    .replace("{DW_INTERPRETER}", repr(DEPTHWISE_TILES["interpreter"])).replace("{DW_GPU}", repr(DEPTHWISE_TILES["gpu"]))


GEMM_EPILOGUE = '''
def _ws_gemm_epilogue(kernel, form, x, w, bias, extra, shape, dtype, cfg=None):
    """A GEMM with a generated epilogue (compiler.gemm_epilogue): ``kernel`` computes x @ w (``form``: linear,
    x (..., K) @ w (N, K)^T; nd, x (..., K) @ w (K, N); mm; bmm) [+ bias (N,)] on fp32 tiles, then its
    pointwise chain, reading each tensor of ``extra`` at the tile's offsets (broadcast to ``shape`` through
    stride 0), and stores the result once, as ``dtype``. The GEMM's own output is never written. ``cfg``: the
    call's tiles (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages), None: the default ones."""
    if form in ("linear", "nd"):
        a3 = x.reshape(-1, x.shape[-1]).unsqueeze(0)
        b3 = (w.t() if form == "linear" else w).unsqueeze(0)
    elif form == "mm":
        a3, b3 = x.unsqueeze(0), w.unsqueeze(0)
    else:
        a3, b3 = x, w
    nb, m, k = a3.shape
    n = b3.shape[2]
    c = torch.empty(shape, dtype=dtype, device=x.device)
    c3 = c.view(nb, m, n)
    ops, strides = [], []
    for e in extra:
        e3 = e.expand(shape)
        try:
            e3 = e3.view(nb, m, n)
        except RuntimeError:  # rows that do not flatten to one stride: a copy kernel first
            e3 = _ws_clone(e3).view(nb, m, n)
        ops.append(e3)
        strides += list(e3.stride())
    bm, bn, bk, gm, nw, ns = cfg or ((16, 16, 16, 8, 4, 3) if _EMULATE else (64, 64, 32, 8, 4, 3))
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), nb)
    bias1 = bias.reshape(-1) if bias is not None else None
    kernel[grid](
        a3, b3, c3, bias1 if bias1 is not None else c3, *ops, m, n, k,
        a3.stride(0), a3.stride(1), a3.stride(2), b3.stride(0), b3.stride(1), b3.stride(2),
        c3.stride(0), c3.stride(1), c3.stride(2), bias1.stride(0) if bias1 is not None else 0, *strides,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, EVEN_K=k % bk == 0, HAS_BIAS=bias1 is not None,
        IS_FP32=a3.dtype == torch.float32, PRECISION="ieee", EMULATE=_EMULATE, num_warps=nw, num_stages=ns)
    return c
'''


def depthwise(n: Node) -> bool:
    """A library conv that ``_ws_conv`` runs with the direct depthwise kernel: forward, one input channel
    per group (the same condition as its branch)."""
    x, w = n.args[0], n.args[1]
    return n.op == "conv" and not n.attrs["transposed"] and n.attrs["groups"] == x.shape[1] and w.shape[1] == 1


def _ws_pool_tiles(positions, planes, cfg, emulate):  # noqa: ANN001, ANN201 - emitted as text too
    """(BLOCK, ROWS) of a pool launch over ``positions`` output positions of ``planes`` (n c) planes:
    ``cfg``, else under the interpreter (``emulate``) one tile of up to 2^16 elements a program (its cost
    is per program), else 128 x 1; ROWS then raised to keep grid axis 1 at most 65535 programs. Emitted
    as it is beside ``_ws_pool`` (its text) and read by compiler.library_tune: one definition."""
    if cfg:
        block, rows = cfg
    elif emulate:
        block = min(1024, 1 << (positions - 1).bit_length())
        rows = min(1 << (planes - 1).bit_length(), max(1, 65536 // block))
    else:
        block, rows = 128, 1
    return block, max(rows, 1 << (-(-planes // 65535) - 1).bit_length())


POOL = inspect.getsource(_ws_pool_tiles) + '''

def _ws_pool_out(L, k, s, p, d, ceil_mode):
    span = L + 2 * p - d * (k - 1) - 1
    o = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= L + p:
        o -= 1
    return o


def _ws_pool(x, nd, kernel, stride, padding, dilation, ceil_mode, is_max, count_include_pad, divisor, cfg=None):
    """max or avg pooling of x (N, C, *spatial) over its nd spatial dims, one launch (torch's output sizes).
    Programs take (ROWS planes, BLOCK output positions) tiles; ``cfg``: (BLOCK, ROWS), None: the defaults
    (the interpreter: one tile of up to 2^16 elements a program, its cost being per program; a GPU: 128 x 1)."""
    lead = 3 - nd
    k3 = [1] * lead + list(kernel)
    s3 = [1] * lead + list(stride)
    p3 = [0] * lead + list(padding)
    d3 = [1] * lead + list(dilation)
    l3 = [1] * lead + list(x.shape[2:])
    o3 = [_ws_pool_out(*a, ceil_mode) for a in zip(l3, k3, s3, p3, d3)]
    n, c = x.shape[0], x.shape[1]
    y = torch.empty((n, c, *o3[lead:]), dtype=x.dtype, device=x.device)
    xs = list(x.stride()[:2]) + [0] * lead + list(x.stride()[2:])
    ys = list(y.stride()[:2]) + [0] * lead + list(y.stride()[2:])
    if y.numel() == 0:
        return y
    block, rows = _ws_pool_tiles(o3[0] * o3[1] * o3[2], n * c, cfg, _EMULATE)
    grid = (triton.cdiv(o3[0] * o3[1] * o3[2], block), triton.cdiv(n * c, rows))
    pool_fwd_kernel[grid](x, y, y, n, c, *l3, *o3, *k3, *s3, *p3, *d3, divisor or 0, *xs, *ys, BLOCK=block, ROWS=rows,
                          IS_MAX=is_max, COUNT_PAD=count_include_pad, HAS_DIVISOR=bool(divisor), RETURN_INDICES=False,
                          EMULATE=_EMULATE)
    return y
'''

XENT = '''
def _ws_cross_entropy(x, t, reduction, ignore_index, smoothing):
    """cross-entropy of logits x (M, V) against class indices t (M,): per row, then summed or averaged."""
    m, v = x.shape
    stats = torch.empty((m, 2), dtype=torch.float32, device=x.device)
    rows = torch.empty((m,), dtype=x.dtype if reduction == 0 else torch.float32, device=x.device)
    single = v <= 8192
    xent_fwd_kernel[(m,)](x, t, rows, stats, x, stats, m, v, ignore_index, smoothing, x.stride(0), x.stride(1),
                          t.stride(0), rows.stride(0), 0, 0, 0, ROWS=1,
                          BLOCK_V=triton.next_power_of_2(v) if single else 2048, SINGLE=single, SMOOTH=smoothing > 0,
                          WRITE_LOSS=True, WRITE_STATS=True, WRITE_GRAD=False, SCALE=0, EMULATE=_EMULATE, num_warps=4)
    if reduction == 0:
        return rows
    loss = torch.empty((), dtype=x.dtype, device=x.device)
    xent_reduce_kernel[(1,)](rows, t, loss, m, ignore_index, t.stride(0), MEAN=reduction == 1, BLOCK=1024,
                             EMULATE=_EMULATE, num_warps=4)
    return loss
'''


ATTENTION = '''
def _ws_attention(q, k, v, causal, scale, bias=None, window=(None, None), cfg=None):
    """softmax(q k^T * scale [+ bias] [causal, top-left as SDPA's is_causal] [band i - lo <= j <= i + hi])
    v over (B, H, S, D); GQA when H_q > H_k. The bias (an additive mask) broadcasts to (B, H_q, S_q, S_k).
    ``cfg``: (BLOCK_M, BLOCK_N, num_warps, num_stages), the config chosen for this call's shape
    (compiler.library_tune); None: the launcher's default tiles."""
    q, k, v = (t if t.stride(-1) == 1 else _ws_clone(t) for t in (q, k, v))
    b, hq, sq, d = q.shape
    hk, sk, dv = k.shape[1], k.shape[2], v.shape[3]
    for t, s_ in ((q, sq), (k, sk), (v, sk)):
        if (s_ + 256) * t.stride(2) + 256 >= 2**31:
            raise ValueError("attention: offsets within one sequence must stay below 2^31")
    o = torch.empty((b, hq, sq, dv), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
    bm, bn, nw, ns = cfg or ((16, 16, 4, 3) if _EMULATE else (64, 64, 4, 3))
    grid = (triton.cdiv(sq, bm), hq, b)
    lo, hi = window
    has_lo, has_hi = lo is not None, causal or hi is not None
    sb = (0, 0, 0, 0)
    if bias is not None:
        while bias.dim() < 4:
            bias = bias.unsqueeze(0)
        bias = bias.expand(b, hq, sq, sk)
        sb = bias.stride()
        if (sq + 256) * sb[2] + (sk + 256) * sb[3] >= 2**31:
            raise ValueError("attention: offsets within one (batch, head) of the mask must stay below 2^31")
    attention_fwd_kernel[grid](
        q, k, v, o, lse, lse, lse, bias if bias is not None else lse, sq, sk, d, dv, hq // hk,
        scale if scale is not None else d ** -0.5, 1.0, lo or 0, 0 if causal or hi is None else hi,
        0, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], lse.stride(0), lse.stride(1),
        *sb, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=max(16, triton.next_power_of_2(d)),
        BLOCK_DV=max(16, triton.next_power_of_2(dv)), HAS_LO=has_lo, HAS_HI=has_hi, SOFTCAP=False,
        HAS_BIAS=bias is not None, VARLEN=False, IS_FP32=q.dtype == torch.float32,
        EMULATE=_EMULATE and q.dtype == torch.bfloat16, num_warps=nw, num_stages=ns)
    return o
'''


TOPK = '''
def _ws_topk(x, k, largest):
    """(values, indices) of the k largest (or smallest) of each row over the last dim, best first;
    ties to the lowest index (a stable sort's order)."""
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    m = x2.shape[0]
    vals = torch.empty((m, k), dtype=x.dtype, device=x.device)
    idx = torch.empty((m, k), dtype=torch.int64, device=x.device)
    if m > 0:
        topk_rows_kernel[(m,)](x2, vals, idx, m, n, k, x2.stride(0), x2.stride(1), vals.stride(0), idx.stride(0),
                               BLOCK_N=triton.next_power_of_2(n), BLOCK_K=max(2, triton.next_power_of_2(k)),
                               LARGEST=largest, num_warps=4)
    return vals.view(*x.shape[:-1], k), idx.view(*x.shape[:-1], k)
'''


# the launcher each library op uses: op -> (launcher text, the @triton.jit kernels it launches, as
# "module under warpsmith.ops:name"). Every kernel a launcher's text names is listed (and copied), so an
# emitted file defines every name its launchers use; the one table the composition test walks.
LAUNCHERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "matmul": (MATMUL, ("matmul.kernel:matmul_tiled_kernel",)),
    "conv": (CONV, ("conv.kernel:conv_fwd_kernel", "conv.depthwise_kernel:conv_depthwise_kernel")),
    "attention": (ATTENTION, ("attention.kernel:attention_fwd_kernel",)),
    "pool": (POOL, ("pool.kernel:pool_fwd_kernel",)),
    "cross_entropy": (XENT, ("cross_entropy.kernel:xent_fwd_kernel", "cross_entropy.kernel:xent_reduce_kernel")),
    "softmax": (SOFTMAX, ("softmax.kernel:softmax_single_pass_kernel", "softmax.kernel:softmax_online_kernel")),
    "rms_norm": (NORM, ("norm.kernel:norm_fwd_row_kernel", "norm.kernel:norm_fwd_looped_kernel")),
    "layer_norm": (NORM, ("norm.kernel:norm_fwd_row_kernel", "norm.kernel:norm_fwd_looped_kernel")),
    "gather": (lower_gather.LAUNCHER, ("gather.kernel:gather_kernel", "gather.kernel:scatter_kernel")),
    "scatter": (lower_gather.LAUNCHER, ("gather.kernel:gather_kernel", "gather.kernel:scatter_kernel")),
    "topk": (TOPK, ("topk.kernel:topk_rows_kernel",)),
    # a matmul with a generated epilogue (attrs["epilogue"], compiler.gemm_epilogue): the launcher of its
    # specialized kernel, whose text (one per node: gemm_epilogue.kernel_source) calls these library functions
    "gemm_epilogue": (GEMM_EPILOGUE, ("matmul.kernel:tile_coords", "matmul.kernel:tile_dot",
                                      "shared.kernel:to_output")),
}


def kernel(ref: str) -> Any:
    """The ``@triton.jit`` kernel named ``"module:name"`` (module under ``warpsmith.ops``)."""
    import importlib

    mod, name = ref.split(":")
    return getattr(importlib.import_module(f"warpsmith.ops.{mod}"), name)


def needs(n: Node) -> tuple[list[Any], str]:
    """The jit kernels and the launcher text of one library node (its row of :data:`LAUNCHERS`; a matmul
    with a generated epilogue: the row ``gemm_epilogue``)."""
    text, refs = LAUNCHERS["gemm_epilogue" if epilogue(n) else n.op]
    return [kernel(r) for r in refs], text


def epilogue(n: Node) -> bool:
    """Whether library node ``n`` is a GEMM with a generated epilogue (compiler.gemm_epilogue)."""
    return n.op == "matmul" and bool(n.attrs.get("epilogue"))


def generated(n: Node) -> list[str]:
    """The text of the kernels generated for library node ``n`` alone (a GEMM's epilogue), emitted beside
    the launchers; their calls of the row's library functions are renamed as the launchers' are."""
    if not epilogue(n):
        return []
    from . import gemm_epilogue

    return [gemm_epilogue.kernel_source(n)]


def launch_config(n: Node) -> str:
    """The launcher's ``cfg`` argument of library call ``n`` (``attrs["launch_config"]``, set by solve from
    :mod:`.library_tune`), as ``", (...)"``; empty (the launcher's default tiles) where none was chosen."""
    cfg = n.attrs.get("launch_config")
    return f", {tuple(cfg)!r}" if cfg else ""


def call(n: Node, v) -> str:  # noqa: ANN001 - v renders an argument
    """The emitted expression computing library node ``n``."""
    if epilogue(n):
        from . import gemm_epilogue

        return gemm_epilogue.call(n, v)
    if n.op in lower_gather.OPS:
        return lower_gather.call(n, v)
    a = n.args
    if n.op == "matmul":
        fn = {"linear": "_ws_linear", "nd": "_ws_matmul_nd"}.get(n.attrs["form"], "_ws_matmul")
        return f"{fn}({v(a[0])}, {v(a[1])}, {v(a[2])}, {n.attrs['activation']!r}{launch_config(n)})"
    if n.op == "softmax":
        return f"_ws_softmax({v(a[0])}, {n.attrs['log']}{launch_config(n)})"
    if n.op == "conv":
        t = n.attrs
        return (f"_ws_conv({v(a[0])}, {v(a[1])}, {v(a[2])}, {t['stride']}, {t['padding']}, {t['dilation']}, "
                f"{t['transposed']}, {t['output_padding']}, {t['groups']}, {t['activation']!r}{launch_config(n)})")
    if n.op == "pool":
        t = n.attrs
        return (f"_ws_pool({v(a[0])}, {t['nd']}, {t['kernel']}, {t['stride']}, {t['padding']}, {t['dilation']}, "
                f"{t['ceil_mode']}, {t['is_max']}, {t['count_include_pad']}, {t['divisor']}{launch_config(n)})")
    if n.op == "attention":
        extra = (f", {v(a[3])}" if len(a) > 3 else ", None") + (f", {n.attrs['window']!r}" if n.attrs.get("window") else "")
        cfg = f", cfg={tuple(n.attrs['launch_config'])!r}" if n.attrs.get("launch_config") else ""
        return f"_ws_attention({v(a[0])}, {v(a[1])}, {v(a[2])}, {n.attrs['causal']}, {n.attrs['scale']!r}{extra}{cfg})"
    if n.op == "topk":
        return f"_ws_topk({v(a[0])}, {n.attrs['k']}, {n.attrs['largest']})"
    if n.op == "cross_entropy":
        t = n.attrs
        return f"_ws_cross_entropy({v(a[0])}, {v(a[1])}, {t['reduction']}, {t['ignore_index']}, {t['smoothing']!r})"
    return f"_ws_norm({v(a[0])}, {v(a[1])}, {v(a[2])}, {n.attrs['eps']!r}, {n.op == 'rms_norm'}{launch_config(n)})"


def _is_jit(obj: Any) -> bool:
    """A ``@triton.jit`` function, compiled (JITFunction) or under the interpreter (InterpretedFunction)."""
    import triton

    if not inspect.isfunction(getattr(obj, "fn", None)):
        return False
    # InterpretedFunction subclasses KernelInterface in Triton 3.9 but not in every 3.x: match by name too
    return isinstance(obj, triton.runtime.jit.KernelInterface) or \
        type(obj).__name__ in ("JITFunction", "InterpretedFunction")


def jit_source(kernels: list[Any], ns: names.Namespace | None = None) -> str:
    """The source text of ``kernels`` and of every ``@triton.jit`` function, ``tl.constexpr`` (or plain
    value) global and module they use, resolved in each function's own module, dependencies first,
    each function once (one copy per function object), every global renamed to its name in ``ns``
    (the emitted file's namespace: :mod:`.names`). A module the file already imports under some name
    is ``ns``'s binding of ``("module", <its name>)``; others get an import line."""
    import triton.language as tl

    ns = ns if ns is not None else names.Namespace()
    imports: list[str] = []
    consts: list[str] = []
    done: dict[Any, str] = {}  # function -> its renamed source, dependencies first

    def module_name(mod: Any) -> str:
        key = ("module", mod.__name__)
        if ns.get(key) is None:
            local = ns.name(key, mod.__name__.rsplit(".", 1)[-1])
            imports.append(f"import {mod.__name__}" if local == mod.__name__ else f"import {mod.__name__} as {local}")
        return ns.get(key)

    def resolve(name: str, obj: Any, where: str) -> str:
        """The file's name for global ``name`` (bound to ``obj``) of module ``where``."""
        if _is_jit(obj):
            visit(obj)
            return ns.get(("fn", obj.fn))
        if inspect.ismodule(obj):
            return module_name(obj)
        if isinstance(obj, tl.constexpr) or names.is_constant(obj):
            key = ("const", where, name)
            if ns.get(key) is None:
                new = ns.name(key, name)
                value = obj.value if isinstance(obj, tl.constexpr) else obj
                consts.append(f"{new} = {module_name(tl)}.constexpr({value!r})" if isinstance(obj, tl.constexpr)
                              else f"{new} = {value!r}")
            return ns.get(key)
        raise TypeError(f"{where}.{name} ({type(obj).__name__}) is used by a copied @triton.jit function, "
                        "but only @triton.jit functions, constexpr or plain values and modules are copied")

    def visit(k: Any) -> None:
        fn = k.fn
        if fn in done:
            return
        done[fn] = ""  # mark before recursing
        own = ns.name(("fn", fn), fn.__name__)
        src = textwrap.dedent(inspect.getsource(fn))
        g = fn.__globals__
        mapping = {fn.__name__: own}
        for name in sorted(names.global_names(src)):
            if name != fn.__name__ and name in g:
                mapping[name] = resolve(name, g[name], fn.__module__)
        del done[fn]  # after its dependencies
        done[fn] = names.rename_globals(src, mapping)

    for k in kernels:
        visit(k)
    head = "\n".join(imports + consts)
    return (head + "\n\n\n" if head else "") + "\n\n".join(done.values())


def name_of(k: Any, ns: names.Namespace) -> str:
    """The name a copied ``@triton.jit`` function has in the file of ``ns``."""
    return ns.get(("fn", k.fn))


def launcher_source(text: str, kernels: list[Any], ns: names.Namespace) -> str:
    """A launcher's text, the kernels it launches (copied by :func:`jit_source`) called by their names
    in the file of ``ns``."""
    return names.rename_globals(text, {k.fn.__name__: name_of(k, ns) for k in kernels if name_of(k, ns)})
