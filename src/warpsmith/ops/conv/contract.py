"""Launch contracts of the conv kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

Kernels: ``conv_fwd_kernel`` (direct and transposed, both reduction orders, with and without bias,
residual and activation; with SPLIT, its fp32 partial store), ``conv_splitk_reduce_kernel``,
``conv_wgrad_kernel``, ``conv_transpose_phase_kernel`` (``phased``: its domain adds the launcher's phase
constants) and ``conv_depthwise_kernel`` (both program orders, with and without the
epilogue; its domain ``depthwise.depthwise_limits`` at the contract's tile). The domain is any
geometry: sizes >= 1 (batch, groups, channels per group, input, output and window extents, with no
relation between them: input coordinates are masked, padding and stride holes included, so memory
safety needs none), strides, dilations and padding (>= 0, declared one above its value,
``pad_d_plus_1``) within the spec's ranges; operands read in place with *any* strides >= 1 (NCDHW,
channels-last, views: the launcher copies out a broadcast dimension of stride 0 and gives a size-1
dimension stride 1, ``variant.readable``); the output (and the weight gradient) in a layout whose
strides nest (``limits.OUTPUT_ORDERS``: NCDHW or channels-last, padded or not; the launcher writes
a temporary otherwise); and the kernels' 32-bit preconditions, ``limits.fwd_limits`` /
``wgrad_limits``: one definition that the launchers check on their integers and that this domain
states over symbols (pixels, channels and every within-sample offset any lane computes, masked or
not, below 2^31; the batch offset is int64).

STATUS (``CONTRACTS``: 132 of 134 obligations proved; README, "Convolution", has the table and the
time). For every kernel but the phased one, ``in_bounds`` of every load and store and
``int32_no_overflow`` are **proved** over the whole domain, by the prover's stride-term rules
(verify/symbolic/termwise.py) on the traced index math; ``race_free`` and ``coverage`` of the output,
the split-K workspace and the weight gradient are proved by writer witnesses below (element -> the
program and lane that stores it, and back), in the layout each contract names. The phased kernel:
in_bounds and race_free proved; coverage bounded, int32 unknown (the nonlinear phase arithmetic; the
exact redo's data-dependent trip count). Split coverage is not declared (the reduction runs over the
weight's (c, window) dimensions, not one dimension of one tensor); the interpreter tests and the
verifier check the sums.
"""
from __future__ import annotations

from typing import Any, Mapping


from ...verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv, sizes
from . import depthwise_kernel as DK_
from . import kernel as K_
from .depthwise import depthwise_limits
from .limits import OUTPUT_ORDERS, WGRAD_REDUCE_BLOCK, fwd_limits, phase_constants, wgrad_limits

BATCH, G, CG, KG, D, H, W, OD, OH, OW, KD, KH, KW = sizes("BATCH G CG KG D H W OD OH OW KD KH KW")
STRIDE = tuple(sizes("stride_d stride_h stride_w"))
DIL = tuple(sizes("dil_d dil_h dil_w"))
PAD1 = tuple(sizes("pad_d_plus_1 pad_h_plus_1 pad_w_plus_1"))  # sizes are >= 1: padding is declared one above
PAD = tuple(p - 1 for p in PAD1)
SX, SW, SY, SR = (tuple(sizes(" ".join(f"{p}{a}" for a in axes))) for p, axes in
                  (("sx", "ncdhw"), ("sw", "gncdhw"), ("sy", "ncdhw"), ("sr", "ncdhw")))
SA, SB = (tuple(sizes(" ".join(f"{p}{a}" for a in "ncdhw"))) for p in ("sa", "sb"))
SBIAS, S, IPS = sizes("stride_bias SPLITS ITERS_PER_SPLIT")
SWDW = tuple(sizes("swo swkd swkh swkw"))  # the depthwise weight w[co, 0, kd, kh, kw]
I3, O3, K3 = (D, H, W), (OD, OH, OW), (KD, KH, KW)
M = BATCH * OD * OH * OW  # output pixels (GEMM rows)
CO = G * KG  # output channels
KVOL = KD * KH * KW


def nests(strides: tuple, shape: tuple, order: tuple) -> list[Any]:
    """Strides that nest in ``order`` (dimensions, innermost first): each at least the extent times the
    stride inside it (variant.nesting_strides, weight_nests)."""
    return [strides[o] >= shape[i] * strides[i] for i, o in zip(order, order[1:])]


def _domain(layout: str, splits: Any = 1) -> list[Any]:
    lim = fwd_limits(BATCH, G, CG, KG, I3, O3, K3, STRIDE, PAD, DIL, SX, SW, SY, SR, SBIAS, splits)
    return [v < b for _, v, b in lim] + nests(SY, (BATCH, CO, OD, OH, OW), OUTPUT_ORDERS[layout])


def _in_memory_order(layout: str, index: tuple) -> tuple:
    """An (n, c, d, h, w) tuple in the order the output's dimensions are declared: outermost first
    (channels-last: (n, d, h, w, c)), so that the prover's layout check finds the strides nest."""
    return index if layout == "ncdhw" else (index[0], *index[2:], index[1])


def _from_memory_order(layout: str, index: tuple) -> tuple:
    return index if layout == "ncdhw" else (index[0], index[4], *index[1:4])


def _output(layout: str) -> Tensor:
    return Tensor(_in_memory_order(layout, (BATCH, CO, OD, OH, OW)), _in_memory_order(layout, SY), output=True)


def _contiguous(shape: tuple) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _layout(layout: str, shape5: tuple) -> tuple:
    """Integer strides of an (N, C, D, H, W) tensor in ``layout`` (for the bounded shapes)."""
    n, c, d, h, w = shape5
    return _contiguous(shape5) if layout == "ncdhw" else (d * h * w * c, 1, h * w * c, w * c, c)


def _bounded(layout: str, transposed: bool) -> list[dict]:
    """Two small shapes in the domain (a consistent geometry, and one with padding, dilation and groups)."""
    out = []
    for g in ((1, 1, 2, 3, 1, 4, 5, 1, 3, 4, 1, 3, 2, (1, 1, 1), (0, 1, 0), (1, 1, 1)),
              (2, 2, 3, 2, 2, 3, 4, 3, 3, 2, 2, 2, 3, (1, 2, 1), (1, 0, 2), (2, 1, 1))):
        b, gg, cg, kg, d, h, w, od, oh, ow, kd, kh, kw, st, pd, dl = g
        sh = {"BATCH": b, "G": gg, "CG": cg, "KG": kg, "D": d, "H": h, "W": w, "OD": od, "OH": oh, "OW": ow,
              "KD": kd, "KH": kh, "KW": kw, "stride_bias": 1, "SPLITS": 1, "ITERS_PER_SPLIT": 1}
        for i, a in enumerate("dhw"):
            sh.update({f"stride_{a}": st[i], f"pad_{a}_plus_1": pd[i] + 1, f"dil_{a}": dl[i]})
        for prefix, shape5 in (("sx", (b, gg * cg, d, h, w)), ("sy", (b, gg * kg, od, oh, ow)),
                               ("sr", (b, gg * kg, od, oh, ow)), ("sa", (b, gg * kg, od, oh, ow)),
                               ("sb", (b, gg * cg, d, h, w))):
            sh.update(zip((prefix + a for a in "ncdhw"), _layout(layout, shape5)))
        wshape = (gg * cg, kg, kd, kh, kw) if transposed else (gg * kg, cg, kd, kh, kw)
        w5 = _contiguous(wshape)
        sw = (cg * w5[0], w5[1], w5[0], *w5[2:]) if transposed else (kg * w5[0], w5[0], w5[1], *w5[2:])
        sh.update(zip(("sw" + a for a in "gncdhw"), sw))
        out.append(sh)
    return out


def _split_pixels(rm: Any) -> tuple:
    """The kernel's split_pixels: output-pixel index -> (n, od, oh, ow)."""
    t = rm / OW
    return (t / OH) / OD, (t / OH) % OD, t % OH, rm % OW


def _pixel(n: Any, od: Any, oh: Any, ow: Any) -> Any:
    return ((n * OD + od) * OH + oh) * OW + ow


def _y_witness(c: Mapping[str, Any], layout: str) -> Witness:
    """y[n, co, od, oh, ow] of the forward: tile (pixel // BLOCK_M, (co % KG) // BLOCK_N) of group co // KG."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]
    tn = cdiv(KG, bn)

    def writer(*index):
        n, co, od, oh, ow = _from_memory_order(layout, index)
        m, k = _pixel(n, od, oh, ow), co % KG
        return Writer(pid=((m / bm) * tn + k / bn, co / KG, 0), lanes=(m % bm, k % bn))

    def element(store, pid, iters, lanes):
        n, od, oh, ow = _split_pixels((pid[0] / tn) * bm + lanes[0])
        return _in_memory_order(layout, (n, pid[1] * KG + (pid[0] % tn) * bn + lanes[1], od, oh, ow))

    return Witness(writer=writer, element=element)


def _partial_witness(c: Mapping[str, Any]) -> Witness:
    """The split-K workspace p[s, m, co]: split s's program for tile (m // BLOCK_M, (co % KG) // BLOCK_N)."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]
    tn = cdiv(KG, bn)
    return Witness(
        writer=lambda s, m, co: Writer(pid=((m / bm) * tn + (co % KG) / bn, co / KG, s), lanes=(m % bm, (co % KG) % bn)),
        element=lambda store, pid, iters, lanes: (pid[2], (pid[0] / tn) * bm + lanes[0],
                                                  pid[1] * KG + (pid[0] % tn) * bn + lanes[1]))


def _reduce_witness(c: Mapping[str, Any], layout: str) -> Witness:
    """y[n, co, od, oh, ow] of the split-K reduction: tile (pixel // BLOCK_M, co // BLOCK_N)."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]

    def writer(*index):
        n, co, od, oh, ow = _from_memory_order(layout, index)
        m = _pixel(n, od, oh, ow)
        return Writer(pid=(m / bm, co / bn), lanes=(m % bm, co % bn))

    def element(store, pid, iters, lanes):
        n, od, oh, ow = _split_pixels(pid[0] * bm + lanes[0])
        return _in_memory_order(layout, (n, pid[1] * bn + lanes[1], od, oh, ow))

    return Witness(writer=writer, element=element)


def _dw_witness(c: Mapping[str, Any]) -> Witness:
    """dw[g, k, c, kd, kh, kw]: tile (k // BLOCK_M, j // BLOCK_N) of group g, j = c KVOL + tap."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]
    tn = cdiv(CG * KVOL, bn)

    def writer(g, k, ch, kd, kh, kw):
        j = ch * KVOL + (kd * KH + kh) * KW + kw
        return Writer(pid=((k / bm) * tn + j / bn, g, 0), lanes=(k % bm, j % bn))  # one split (grid axis 2)

    def element(store, pid, iters, lanes):
        rj = (pid[0] % tn) * bn + lanes[1]
        tap = rj % KVOL
        return pid[1], (pid[0] / tn) * bm + lanes[0], rj / KVOL, tap / (KW * KH), (tap / KW) % KH, tap % KW

    return Witness(writer=writer, element=element)


_GEOMETRY = {"BATCH": BATCH, "CG": CG, "KG": KG, "D": D, "H": H, "W": W, "OD": OD, "OH": OH, "OW": OW,
             "KD": KD, "KH": KH, "KW": KW, **{f"stride_{a}": v for a, v in zip("dhw", STRIDE)},
             **{f"pad_{a}": v for a, v in zip("dhw", PAD)}, **{f"dil_{a}": v for a, v in zip("dhw", DIL)}}
_EPILOGUE = {"bias_ptr": Tensor((CO,), (SBIAS,)), "res_ptr": Tensor((BATCH, CO, OD, OH, OW), SR),
             "scale": 1.0, "stride_bias": SBIAS,
             **{f"sy{a}": v for a, v in zip("ncdhw", SY)}, **{f"sr{a}": v for a, v in zip("ncdhw", SR)}}


def _total(c: Mapping[str, Any]) -> Any:
    """Reduction iterations in the kernel's order (nested: window x channel blocks; flat: blocks of both)."""
    return KVOL * cdiv(CG, c["BLOCK_K"]) if c["LOOP"] == "nested" else cdiv(CG * KVOL, c["BLOCK_K"])


def forward(constexprs: list[dict], layout: str = "ncdhw") -> LaunchContract:
    """``conv_fwd_kernel`` without split-K, output in ``layout`` (every combination in ``constexprs``)."""
    args = {
        "x_ptr": Tensor((BATCH, G * CG, D, H, W), SX), "w_ptr": Tensor((G, KG, CG, KD, KH, KW), SW), "y_ptr": _output(layout), **_EPILOGUE,
        "p_ptr": Tensor((1,), (1,)), **_GEOMETRY, "ITERS_PER_SPLIT": KVOL * CG,
        **{f"sx{a}": v for a, v in zip("ncdhw", SX)}, **{f"sw{a}": v for a, v in zip("gncdhw", SW)},
    }
    return LaunchContract(
        kernel=K_.conv_fwd_kernel, name=f"conv_fwd_kernel[{layout}]", args=args, constexprs=constexprs,
        grid=lambda c: (cdiv(M, c["BLOCK_M"]) * cdiv(KG, c["BLOCK_N"]), G, 1),
        domain=_domain(layout), bounded_shapes=_bounded(layout, constexprs[0]["TRANSPOSED"]),
        witnesses={"y_ptr": lambda c: _y_witness(c, layout)})


GCD = tuple(sizes("gcd_d gcd_h gcd_w"))
INV1 = tuple(sizes("inv_d_plus_1 inv_h_plus_1 inv_w_plus_1"))  # the inverse may be 0: declared one above
INV = tuple(i - 1 for i in INV1)
Q3 = tuple(cdiv(o, st) for o, st in zip(O3, STRIDE))  # rows per axis of one phase


def _phase_writer_witness(c: Mapping[str, Any], layout: str) -> Witness:
    """y[n, co, od, oh, ow] of the phased kernel: phase (od % stride_d, oh % stride_h, ow % stride_w), row
    ((n QD + od // stride_d) QH + oh // stride_h) QW + ow // stride_w of that phase's grid slice."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]
    tn = cdiv(KG, bn)
    (sd, sh, sw), (qd, qh, qw) = STRIDE, Q3

    def writer(*index):
        n, co, od, oh, ow = _from_memory_order(layout, index)
        m, k = ((n * qd + od / sd) * qh + oh / sh) * qw + ow / sw, co % KG
        phase = ((od % sd) * sh + oh % sh) * sw + ow % sw
        return Writer(pid=((m / bm) * tn + k / bn, co / KG, phase), lanes=(m % bm, k % bn))

    def element(store, pid, iters, lanes):
        rm = (pid[0] / tn) * bm + lanes[0]
        jw, t = rm % qw, rm / qw
        jh, t = t % qh, t / qh
        jd, n = t % qd, t / qd
        rw, rh, rd = pid[2] % sw, (pid[2] / sw) % sh, pid[2] / (sw * sh)
        co = pid[1] * KG + (pid[0] % tn) * bn + lanes[1]
        return _in_memory_order(layout, (n, co, rd + sd * jd, rh + sh * jh, rw + sw * jw))

    return Witness(writer=writer, element=element)


def phased(constexprs: list[dict], layout: str = "ncdhw") -> LaunchContract:
    """``conv_transpose_phase_kernel``, output in ``layout``: the forward's domain (``fwd_limits``, any
    strides, a nesting output) and the launcher's phase constants, ``1 <= gcd <= stride`` and
    ``0 <= inv < stride`` per axis (``limits.phase_constants``; memory safety needs nothing more:
    every gathered coordinate is masked)."""
    args = {
        "x_ptr": Tensor((BATCH, G * CG, D, H, W), SX), "w_ptr": Tensor((G, KG, CG, KD, KH, KW), SW),
        "y_ptr": _output(layout), **_EPILOGUE, **_GEOMETRY,
        **{f"gcd_{a}": v for a, v in zip("dhw", GCD)}, **{f"inv_{a}": v for a, v in zip("dhw", INV)},
        **{f"sx{a}": v for a, v in zip("ncdhw", SX)}, **{f"sw{a}": v for a, v in zip("gncdhw", SW)},
    }
    domain = _domain(layout) + [x for i in range(3) for x in (GCD[i] <= STRIDE[i], INV1[i] <= STRIDE[i])]
    shapes = []
    for sh in _bounded(layout, True):
        sh = dict(sh)
        for a in "dhw":
            g_, inv = phase_constants(sh[f"stride_{a}"], sh[f"dil_{a}"])
            sh.update({f"gcd_{a}": g_, f"inv_{a}_plus_1": inv + 1})
        shapes.append(sh)
    return LaunchContract(
        kernel=K_.conv_transpose_phase_kernel, name=f"conv_transpose_phase_kernel[{layout}]", args=args,
        constexprs=constexprs,
        grid=lambda c: (cdiv(BATCH * Q3[0] * Q3[1] * Q3[2], c["BLOCK_M"]) * cdiv(KG, c["BLOCK_N"]), G,
                        STRIDE[0] * STRIDE[1] * STRIDE[2]),
        domain=domain, bounded_shapes=shapes, witnesses={"y_ptr": lambda c: _phase_writer_witness(c, layout)})


def split(constexprs: list[dict]) -> LaunchContract:
    """``conv_fwd_kernel`` with SPLIT: split ``s`` (grid axis 2) sums iterations ``[s IPS, (s + 1) IPS)`` of
    the reduction into ``p[s, m, co]`` (contiguous fp32, as the launcher allocates it); the launcher's
    ``IPS = cdiv(total, SPLIT_K)``, ``SPLITS = cdiv(total, IPS)``: every split non-empty. One contract per
    (LOOP, BLOCK_K), which fix the iteration count: pass constexprs sharing both."""
    c0 = constexprs[0]
    total = _total(c0)
    args = {
        "x_ptr": Tensor((BATCH, G * CG, D, H, W), SX), "w_ptr": Tensor((G, KG, CG, KD, KH, KW), SW),
        "y_ptr": Tensor((1,), (1,)), "bias_ptr": Tensor((1,), (1,)), "res_ptr": Tensor((1,), (1,)),
        "p_ptr": Tensor((S, M, CO), (M * CO, CO, 1), output=True), **_GEOMETRY, "ITERS_PER_SPLIT": IPS,
        "scale": 1.0, "stride_bias": 1, **{f"s{t}{a}": 1 for t in "yr" for a in "ncdhw"},
        **{f"sx{a}": v for a, v in zip("ncdhw", SX)}, **{f"sw{a}": v for a, v in zip("gncdhw", SW)},
    }
    lim = fwd_limits(BATCH, G, CG, KG, I3, O3, K3, STRIDE, PAD, DIL, SX, SW, (1,) * 5, (1,) * 5, 1, S)
    # the launcher's IPS = cdiv(total, SPLIT_K) <= total and SPLITS = cdiv(total, IPS) <= 16: no split is empty
    domain = [v < b for _, v, b in lim] + [S <= 16, IPS <= total, (S - 1) * IPS < total, total <= S * IPS]
    shapes = [{**sh, "SPLITS": s, "ITERS_PER_SPLIT": ips} for sh in _bounded("ncdhw", c0["TRANSPOSED"])
              for s, ips in ((1, 64), (2, 1), (3, 1))]
    return LaunchContract(
        kernel=K_.conv_fwd_kernel, name=f"conv_fwd_kernel[split, {c0['LOOP']}, BLOCK_K={c0['BLOCK_K']}]",
        args=args, constexprs=constexprs,
        grid=lambda c: (cdiv(M, c["BLOCK_M"]) * cdiv(KG, c["BLOCK_N"]), G, S),
        domain=domain, bounded_shapes=shapes, witnesses={"p_ptr": _partial_witness})


def reduce(constexprs: list[dict], layout: str = "ncdhw") -> LaunchContract:
    """``conv_splitk_reduce_kernel``: the SPLITS partials summed in order, then the epilogue, into y."""
    args = {"p_ptr": Tensor((S, M, CO), (M * CO, CO, 1)), "y_ptr": _output(layout), **_EPILOGUE,
            "M": M, "CO": CO, "OD": OD, "OH": OH, "OW": OW, "SPLITS": S}
    return LaunchContract(
        kernel=K_.conv_splitk_reduce_kernel, name=f"conv_splitk_reduce_kernel[{layout}]", args=args,
        constexprs=constexprs, grid=lambda c: (cdiv(M, c["BLOCK_M"]), cdiv(CO, c["BLOCK_N"])),
        domain=_domain(layout, S) + [S <= 16],
        bounded_shapes=[{**sh, "SPLITS": 2} for sh in _bounded(layout, False)],
        witnesses={"y_ptr": lambda c: _reduce_witness(c, layout)})


def _wgrad_partial_witness(c: Mapping[str, Any]) -> Witness:
    """The split weight gradient's workspace p[s, g, k, j]: split s's program for tile (k // BLOCK_M, j // BLOCK_N)."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]
    tn = cdiv(CG * KVOL, bn)
    return Witness(
        writer=lambda s, g, k, j: Writer(pid=((k / bm) * tn + j / bn, g, s), lanes=(k % bm, j % bn)),
        element=lambda store, pid, iters, lanes: (pid[2], pid[1], (pid[0] / tn) * bm + lanes[0],
                                                  (pid[0] % tn) * bn + lanes[1]))


def wgrad(constexprs: list[dict], layout: str = "ncdhw") -> LaunchContract:
    """``conv_wgrad_kernel``: ``a`` (KG channels per group at output pixels) and ``b`` (CG per group,
    gathered) with any strides, in ``layout`` for the bounded shapes; the gradient's weight strides nest.
    With SPLIT (every entry of ``constexprs`` alike): split ``s`` (grid axis 2) sums pixel blocks
    ``[s IPS, (s + 1) IPS)`` into the contiguous fp32 workspace p[s, g, k, j]; the launcher's
    ``IPS = cdiv(iters, SPLIT_K)``, ``SPLITS = cdiv(iters, IPS)`` (iters = cdiv(pixels, BLOCK_K)): every
    split non-empty; without SPLIT one split (``SPLITS`` = 1, IPS unused)."""
    c0 = constexprs[0]
    split = bool(c0["SPLIT"])
    ncol = CG * KVOL
    args = {"a_ptr": Tensor((BATCH, CO, OD, OH, OW), SA), "b_ptr": Tensor((BATCH, G * CG, D, H, W), SB),
            "dw_ptr": Tensor((G, KG, CG, KD, KH, KW), SW, output=not split),
            "p_ptr": Tensor((S, G, KG, ncol), (G * KG * ncol, KG * ncol, ncol, 1), output=split), **_GEOMETRY,
            **{f"s{t}{a}": v for t, st in (("a", SA), ("b", SB)) for a, v in zip("ncdhw", st)},
            **{f"sw{a}": v for a, v in zip("gncdhw", SW)}, "ITERS_PER_SPLIT": IPS}
    lim = wgrad_limits(BATCH, G, CG, KG, I3, O3, K3, STRIDE, PAD, DIL, SA, SB, SW)
    domain = [v < b for _, v, b in lim] + nests(SW, (G, KG, CG, KD, KH, KW), (5, 4, 3, 2, 1, 0))
    iters = cdiv(BATCH * OD * OH * OW, c0["BLOCK_K"])
    if split:
        domain += [S <= 16, IPS <= iters, (S - 1) * IPS < iters, iters <= S * IPS]
        shapes = [{**sh, "SPLITS": s, "ITERS_PER_SPLIT": ips} for sh in _bounded(layout, False)
                  for s, ips in ((2, 1), (3, 1))]
    else:
        domain += [S == 1]
        shapes = [{**sh, "SPLITS": 1, "ITERS_PER_SPLIT": 1} for sh in _bounded(layout, False)]
    return LaunchContract(
        kernel=K_.conv_wgrad_kernel, name=f"conv_wgrad_kernel[{'split, ' if split else ''}BLOCK_K={c0['BLOCK_K']}]",
        args=args, constexprs=constexprs,
        grid=lambda c: (cdiv(KG, c["BLOCK_M"]) * cdiv(CG * KVOL, c["BLOCK_N"]), G, S),
        domain=domain, bounded_shapes=shapes,
        witnesses={"p_ptr": _wgrad_partial_witness} if split else {"dw_ptr": _dw_witness})


def wgrad_for_config(config: Mapping[str, Any], problem: Any) -> list[LaunchContract]:
    """The kernels a ``conv_weight_grad`` config launches: the weight-gradient kernel, and with split-K
    its split form and the matmul family's ordered reduction (into the contiguous gradient)."""
    layout = "ndhwc" if problem.attrs.get("channels_last") else "ncdhw"
    split = config["SPLIT_K"] > 1
    meta = _wgrad_meta(BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"],
                       PRECISION=config["PRECISION"], SPLIT=split)
    return [wgrad([meta], layout)] + ([wgrad_reduce()] if split else [])


def wgrad_reduce() -> LaunchContract:
    """The matmul family's ordered reduction as the split weight gradient launches it (no epilogue)."""
    from ..matmul import contract as MC

    return MC.reduce([{"BLOCK": WGRAD_REDUCE_BLOCK, "EMULATE": False, "HAS_BIAS": False, "ACTIVATION": "none"}])


def _meta(loop: str, transposed: bool, epilogue: bool = True, split: bool = False, **extra: Any) -> dict:
    return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, LOOP=loop, TRANSPOSED=transposed, SPLIT=split,
                HAS_BIAS=epilogue, HAS_RES=epilogue, ACTIVATION="gelu" if epilogue else "none", IS_FP32=False,
                PRECISION="ieee", EMULATE=False, **extra)


def _epilogue_meta(epilogue: bool) -> dict:
    return dict(BLOCK_M=32, BLOCK_N=32, HAS_BIAS=epilogue, HAS_RES=epilogue,
                ACTIVATION="gelu" if epilogue else "none", EMULATE=False)


def _wgrad_meta(**extra: Any) -> dict:
    return {**dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, IS_FP32=False, PRECISION="ieee", EMULATE=False, SPLIT=False),
            **extra}


def for_config(config: Mapping[str, Any], problem: Any) -> list[LaunchContract]:
    """The kernels one tuned config launches, at its tile and order: the forward kernel, or with split-K
    the split kernel and its reduction; the output in the layout the op allocates (channels-last where
    the problem is; the verifier's harness writes contiguous outputs, the NCDHW layout of ``CONTRACTS``)."""
    a = problem.attrs
    layout = "ndhwc" if a.get("channels_last") else "ncdhw"
    meta = dict(BLOCK_M=config.BLOCK_M, BLOCK_N=config.BLOCK_N, BLOCK_K=config.BLOCK_K, LOOP=config.LOOP,
                TRANSPOSED=bool(a["transposed"]), SPLIT=config.SPLIT_K > 1, HAS_BIAS=bool(a["bias"]),
                HAS_RES=bool(a["residual"]), ACTIVATION=a["activation"], IS_FP32=False,
                PRECISION=config.PRECISION, EMULATE=False)
    if config.SPLIT_K == 1:
        return [forward([meta], layout)]
    epi = {**_epilogue_meta(meta["HAS_BIAS"]), "HAS_RES": meta["HAS_RES"], "ACTIVATION": meta["ACTIVATION"]}
    return [split([meta]), reduce([epi], layout)]


def _phase_meta(loop: str, epilogue: bool = True, **extra: Any) -> dict:
    meta = _meta(loop, True, epilogue, **extra)
    return {k: v for k, v in meta.items() if k not in ("TRANSPOSED", "SPLIT")}


def phased_for_config(config: Mapping[str, Any], problem: Any) -> list[LaunchContract]:
    """The phased kernel one tuned config launches, its output in the layout the op allocates."""
    a = problem.attrs
    layout = "ndhwc" if a.get("channels_last") else "ncdhw"
    meta = dict(BLOCK_M=config.BLOCK_M, BLOCK_N=config.BLOCK_N, BLOCK_K=config.BLOCK_K, LOOP=config.LOOP,
                HAS_BIAS=bool(a["bias"]), HAS_RES=bool(a["residual"]), ACTIVATION=a["activation"], IS_FP32=False,
                PRECISION=config.PRECISION, EMULATE=False)
    return [phased([meta], layout)]


def _dw_y_witness(c: Mapping[str, Any], layout: str) -> Witness:
    """y[n, co, od, oh, ow] of the depthwise kernel: pixel tile m // BLOCK_P, channel tile co // BLOCK_C,
    combined into the program id in the kernel's ORDER (``tile_of``)."""
    bp, bc = c["BLOCK_P"], c["BLOCK_C"]
    tp, tc = cdiv(M, bp), cdiv(CO, bc)
    pixels_first = c["ORDER"] == "pixels"

    def writer(*index):
        n, co, od, oh, ow = _from_memory_order(layout, index)
        m = _pixel(n, od, oh, ow)
        pid = (m / bp) * tc + co / bc if pixels_first else (co / bc) * tp + m / bp
        return Writer(pid=(pid,), lanes=(m % bp, co % bc))

    def element(store, pid, iters, lanes):
        tile_p, tile_c = (pid[0] / tc, pid[0] % tc) if pixels_first else (pid[0] % tp, pid[0] / tp)
        n, od, oh, ow = _split_pixels(tile_p * bp + lanes[0])
        return _in_memory_order(layout, (n, tile_c * bc + lanes[1], od, oh, ow))

    return Witness(writer=writer, element=element)


def _dw_bounded(layout: str) -> list[dict]:
    """The forward's small shapes with one input channel per group (x has G channels), its weight
    (C_out, 1, window) contiguous."""
    out = []
    for sh in _bounded(layout, False):
        b, gg, kg = sh["BATCH"], sh["G"], sh["KG"]
        sh = {k: v for k, v in sh.items() if not k.startswith(("sw", "sa", "sb")) and k not in
              ("CG", "SPLITS", "ITERS_PER_SPLIT")}
        sh.update(zip(("sx" + a for a in "ncdhw"), _layout(layout, (b, gg, sh["D"], sh["H"], sh["W"]))))
        w5 = _contiguous((gg * kg, 1, sh["KD"], sh["KH"], sh["KW"]))
        sh.update(zip(("swo", "swkd", "swkh", "swkw"), (w5[0], *w5[2:])))
        out.append(sh)
    return out


def depthwise(constexprs: list[dict], layout: str = "ncdhw") -> LaunchContract:
    """``conv_depthwise_kernel``: x (BATCH, G, D, H, W) and the weight (G KG, 1, window) with any strides,
    the output in ``layout``; the domain is ``depthwise.depthwise_limits`` at the tile the constexprs
    share (the program count depends on it) and an output whose strides nest."""
    bp, bc = constexprs[0]["BLOCK_P"], constexprs[0]["BLOCK_C"]
    if any((c["BLOCK_P"], c["BLOCK_C"]) != (bp, bc) for c in constexprs):
        raise ValueError("one depthwise contract per tile (BLOCK_P, BLOCK_C): its domain depends on it")
    geometry = {k: v for k, v in _GEOMETRY.items() if k != "CG"}
    args = {
        "x_ptr": Tensor((BATCH, G, D, H, W), SX), "w_ptr": Tensor((CO, KD, KH, KW), SWDW), "y_ptr": _output(layout),
        **_EPILOGUE, **geometry, "CO": CO, **{f"sx{a}": v for a, v in zip("ncdhw", SX)},
        **dict(zip(("swo", "swd", "swh", "sww"), SWDW)),
    }
    lim = depthwise_limits(BATCH, G, KG, I3, O3, K3, STRIDE, PAD, DIL, SX, SWDW, SY, SR, SBIAS, bp, bc)
    domain = [v < b for _, v, b in lim] + nests(SY, (BATCH, CO, OD, OH, OW), OUTPUT_ORDERS[layout])
    orders = "/".join(sorted({c["ORDER"] for c in constexprs}))
    return LaunchContract(
        kernel=DK_.conv_depthwise_kernel, name=f"conv_depthwise_kernel[{layout}, {orders}, {bp}x{bc}]", args=args,
        constexprs=constexprs, grid=lambda c: (cdiv(M, c["BLOCK_P"]) * cdiv(CO, c["BLOCK_C"]),),
        domain=domain, bounded_shapes=_dw_bounded(layout), witnesses={"y_ptr": lambda c: _dw_y_witness(c, layout)})


def _dw_meta(order: str, epilogue: bool = True, block_p: int = 32, block_c: int = 16) -> dict:
    return dict(BLOCK_P=block_p, BLOCK_C=block_c, ORDER=order, HAS_BIAS=epilogue, HAS_RES=epilogue,
                ACTIVATION="gelu" if epilogue else "none", EMULATE=False)


def depthwise_for_config(config: Mapping[str, Any], problem: Any) -> list[LaunchContract]:
    """The depthwise kernel one tuned config launches, its output in the layout the op allocates."""
    a = problem.attrs
    layout = "ndhwc" if a.get("channels_last") else "ncdhw"
    meta = dict(BLOCK_P=config.BLOCK_P, BLOCK_C=config.BLOCK_C, ORDER=config.ORDER, HAS_BIAS=bool(a["bias"]),
                HAS_RES=bool(a["residual"]), ACTIVATION=a["activation"], EMULATE=False)
    return [depthwise([meta], layout)]


CONTRACTS = [  # every (LOOP, TRANSPOSED, epilogue or none) of the forward, both output layouts
    forward([_meta("nested", False), _meta("nested", False, epilogue=False)], "ncdhw"),
    forward([_meta("flat", False), _meta("flat", True, epilogue=False)], "ndhwc"),
    forward([_meta("nested", True), _meta("flat", True)], "ncdhw"),
    forward([_meta("nested", True, epilogue=False), _meta("flat", False, epilogue=False)], "ndhwc"),
    split([_meta("nested", False, split=True)]),
    split([_meta("flat", True, split=True)]),
    reduce([_epilogue_meta(True)], "ncdhw"),
    reduce([_epilogue_meta(False)], "ndhwc"),
    wgrad([_wgrad_meta()]),
    # the transposed conv by phase, one combination (its proof is the slowest here: the phase index math
    # is nonlinear); a tuned config's own combination is proved at tune time (phased_for_config)
    phased([_phase_meta("nested")], "ncdhw"),
    # the depthwise kernel: both program orders, with and without the epilogue, both output layouts
    depthwise([_dw_meta("pixels"), _dw_meta("channels", epilogue=False)], "ndhwc"),
    depthwise([_dw_meta("channels"), _dw_meta("pixels", epilogue=False)], "ncdhw"),
]
