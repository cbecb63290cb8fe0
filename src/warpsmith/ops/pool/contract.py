"""Launch contracts of the pooling kernels, for ``warpsmith prove`` (verify/symbolic).

Tensors are (N, C, D, H, W) with any positive strides (NCHW, channels-last, or views: the
kernels take every stride); the output of the forward and the gradient of the backward are
addressed through their own strides, as allocated. Sizes: N, C <= 65535 (grid axes 1 and 2; the max /
avg forward, whose grid axis 1 counts blocks of ROWS planes: N C <= 65535 ROWS),
spatial sizes <= 2^20 and the flat spatial positions of one plane (input and output) with a
block's overshoot below 2^31 (they are int32; the validity predicate refuses more); window
arguments within the spec's ranges (kernel, stride, dilation <= 255; padding at most half the
effective kernel, as torch requires); output sizes as torch computes them, which the domain
states through the bound they satisfy in floor and ceil mode: (O - 1) s <= L + 2 p.

Obligations, all proved for every shape in the domain: every load and store in bounds and no
int32 overflow (the padding, dilation and ceil_mode index math included: a window's taps outside
the input are masked, never read), race freedom, and coverage of every output by the plane
witness (:func:`_plane_witness`: element (n, c, i, j, k) is written by lane s % BLOCK of program
(s // BLOCK, c, n), s its flat position in the plane; for the max / avg forward, :func:`_tile_witness`:
lane (r % ROWS, s % BLOCK) of program (s // BLOCK, r // ROWS), r = n C + c its plane).
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv, sizes
from . import kernel as K_

N, C, D, H, W, OD, OH, OW = sizes("N C D H W OD OH OW")
KD, KH, KW, SD, SH, SW, DD, DH, DW = sizes("KD KH KW SD SH SW DD DH DW")
# sizes are >= 1 in every contract: padding and the divisor (0: none) are declared one above their value
PD1, PH1, PW1, DIV1 = sizes("PD_plus_1 PH_plus_1 PW_plus_1 DIVISOR_plus_1")
PD, PH, PW, DIV = PD1 - 1, PH1 - 1, PW1 - 1, DIV1 - 1
MD, MH, MW = sizes("MD MH MW")
SX = sizes("stride_xn stride_xc stride_xd stride_xh stride_xw")
SY = sizes("stride_yn stride_yc stride_yd stride_yh stride_yw")


def layout(channels_last: bool, sizes5: tuple) -> tuple:
    """Strides of an (N, C, D, H, W) tensor the launcher allocates: contiguous or channels-last."""
    _, c, d, h, w = sizes5
    if channels_last:
        return (d * h * w * c, 1, h * w * c, w * c, c)
    return (c * d * h * w, d * h * w, h * w, w, 1)
LIMIT = 2**31 - 4096

_SPATIAL = [D <= 2**20, H <= 2**20, W <= 2**20, OD <= 2**20, OH <= 2**20, OW <= 2**20,
         D * H * W <= LIMIT, OD * OH * OW <= LIMIT]
_BASE = [N >= 1, N <= 65535, C <= 65535] + _SPATIAL


def _tiled_base(rows: int) -> list[Any]:
    """The max / avg forward's sizes: N, C <= 65535 ROWS, which every launch the validity predicate allows
    satisfies (its grid axis 1 holds cdiv(N C, ROWS) <= 65535 programs; that product bound, not linear,
    is left out of the domain: the solver proves the layouts' nesting with linear bounds, and memory
    safety does not depend on it, plane indices being int64)."""
    return [N >= 1, N <= 65535 * rows, C <= 65535 * rows] + _SPATIAL


def _window_domain(is_max: bool) -> list[Any]:
    dom = []
    for L, O, k, s, p, d in ((D, OD, KD, SD, PD, DD), (H, OH, KH, SH, PH, DH), (W, OW, KW, SW, PW, DW)):
        dom += [k <= 255, s <= 255, d <= 255, (O - 1) * s <= L + 2 * p]
        dom += [2 * p <= d * (k - 1) + 1] if is_max else [d == 1, 2 * p <= k]
    return dom + [DIV <= 2**16]


def _bounded(adaptive: bool) -> list[dict]:
    """Small consistent shapes (output sizes as torch computes them), channels-last input."""
    from .spec import out_size

    out = []
    for (d, h, w) in ((1, 1, 1), (1, 5, 7), (3, 4, 5)):
        if adaptive:
            od, oh, ow = max(1, d - 1), 2, 3
            extra = {"MD": min(2, d, od), "MH": min(2, h, oh), "MW": min(3, w, ow)}
        else:
            k, st, p = (min(d, 2), 2, 3), (1, 2, 2), (0, 1, 1)
            od, oh, ow = (out_size(L, kk, ss, pp, 1, True) for L, kk, ss, pp in zip((d, h, w), k, st, p))
            extra = {"KD": k[0], "KH": k[1], "KW": k[2], "SD": st[0], "SH": st[1], "SW": st[2],
                     "PD_plus_1": p[0] + 1, "PH_plus_1": p[1] + 1, "PW_plus_1": p[2] + 1, "DD": 1, "DH": 1, "DW": 1,
                     "DIVISOR_plus_1": 1}
        sh = {"N": 2, "C": 3, "D": d, "H": h, "W": w, "OD": od, "OH": oh, "OW": ow,
              "stride_xn": 3 * d * h * w, "stride_xc": 1, "stride_xd": 3 * h * w, "stride_xh": 3 * w, "stride_xw": 3,
              "stride_yn": 3 * od * oh * ow, "stride_yc": od * oh * ow, "stride_yd": oh * ow, "stride_yh": ow,
              "stride_yw": 1, **extra}
        out.append(sh)
    return out


def _tensor(strides, out_sizes: bool, output: bool = False) -> Tensor:
    return Tensor((N, C, OD, OH, OW) if out_sizes else (N, C, D, H, W), tuple(strides), output=output)


def _scalars(adaptive: bool) -> dict[str, Any]:
    s = {"D": D, "H": H, "W": W, "OD": OD, "OH": OH, "OW": OW}
    if adaptive:
        return {**s, "MD": MD, "MH": MH, "MW": MW}
    return {**s, "KD": KD, "KH": KH, "KW": KW, "SD": SD, "SH": SH, "SW": SW, "PD": PD, "PH": PH, "PW": PW,
            "DD": DD, "DH": DH, "DW": DW, "DIVISOR": DIV}


def _plane_witness(c: Mapping[str, Any], A: Any, B: Any) -> Witness:
    """Who writes element (n, ch, i, j, k) of an output of spatial sizes (., A, B): lane s % BLOCK of program
    (s // BLOCK, ch, n), s = (i A + j) B + k its flat position in the plane (the kernels' ``_split``)."""
    blk = c["BLOCK"]

    def writer(n, ch, i, j, k):
        s = (i * A + j) * B + k
        return Writer(pid=(s / blk, ch, n), lanes=(s % blk,))

    def element(store, pid, iters, lanes):
        s = pid[0] * blk + lanes[0]
        return pid[2], pid[1], (s / B) / A, (s / B) % A, s % B

    return Witness(writer=writer, element=element)


def _tile_witness(c: Mapping[str, Any], A: Any, B: Any) -> Witness:
    """Who writes element (n, ch, i, j, k) of the max / avg forward's output (spatial sizes (., A, B)):
    lane (r % ROWS, s % BLOCK) of program (s // BLOCK, r // ROWS), r = n C + ch its plane and
    s = (i A + j) B + k its flat position (``pool_fwd_kernel``'s tiles)."""
    blk, rows = c["BLOCK"], c["ROWS"]

    def writer(n, ch, i, j, k):
        s = (i * A + j) * B + k
        r = n * C + ch
        return Writer(pid=(s / blk, r / rows), lanes=(r % rows, s % blk))

    def element(store, pid, iters, lanes):
        s = pid[0] * blk + lanes[1]
        r = pid[1] * rows + lanes[0]
        return r / C, r % C, (s / B) / A, (s / B) % A, s % B

    return Witness(writer=writer, element=element)


def _strides(prefix: str, values) -> dict[str, Any]:
    return {f"stride_{prefix}{a}": v for a, v in zip("ncdhw", values)}


def forward(consts: list[dict], *, adaptive: bool = False, channels_last: bool = False) -> LaunchContract:
    """``pool_fwd_kernel`` (max or avg, per its constexprs) or ``adaptive_fwd_kernel``; the input
    has any strides, the output the layout the launcher allocates."""
    fn = K_.adaptive_fwd_kernel if adaptive else K_.pool_fwd_kernel
    sy = layout(channels_last, (N, C, OD, OH, OW))
    args = {"x_ptr": _tensor(SX, False), "y_ptr": _tensor(sy, True, output=True), **_scalars(adaptive),
            **_strides("x", SX), **_strides("y", sy)}
    bounded = [{k: v for k, v in s.items() if not k.startswith("stride_y")} for s in _bounded(adaptive)]
    if adaptive:
        return LaunchContract(kernel=fn, name="adaptive_fwd_kernel", args=args, constexprs=consts,
                              grid=lambda c: (cdiv(OD * OH * OW, c["BLOCK"]), C, N),
                              domain=_BASE + [MD <= D, MH <= H, MW <= W], bounded_shapes=bounded,
                              witnesses={"y_ptr": lambda c: _plane_witness(c, OH, OW)})
    rows = {c["ROWS"] for c in consts}
    if len(rows) != 1:
        raise ValueError(f"pool forward contract: expected one ROWS over its constexpr sets, got {sorted(rows)}")
    args.update(N=N, C=C, idx_ptr=_tensor(sy, True, output=bool(consts[0].get("RETURN_INDICES"))))
    is_max = bool(consts[0].get("IS_MAX"))
    return LaunchContract(kernel=fn, name=f"pool_fwd_kernel[{'max' if is_max else 'avg'}]", args=args,
                          constexprs=consts, grid=lambda c: (cdiv(OD * OH * OW, c["BLOCK"]), cdiv(N * C, c["ROWS"])),
                          domain=_tiled_base(rows.pop()) + _window_domain(is_max), bounded_shapes=bounded,
                          witnesses={out: lambda c: _tile_witness(c, OH, OW) for out in ("y_ptr", "idx_ptr")})


def backward(consts: list[dict], *, adaptive: bool = False, channels_last: bool = False) -> LaunchContract:
    """``pool_bwd_kernel`` (the gather form) or ``adaptive_bwd_kernel``: dy (and the indices) have
    the forward output's shape and dy's strides; dx the input's shape."""
    fn = K_.adaptive_bwd_kernel if adaptive else K_.pool_bwd_kernel
    sx = layout(channels_last, (N, C, D, H, W))
    args = {"dy_ptr": _tensor(SY, True), "dx_ptr": _tensor(sx, False, output=True), **_scalars(adaptive),
            **_strides("dy", SY), **_strides("x", sx)}
    if not adaptive:
        args["idx_ptr"] = _tensor(SY, True)
    is_max = bool(consts[0].get("IS_MAX"))
    domain = _BASE + ([MD <= OD, MH <= OH, MW <= OW] if adaptive else _window_domain(is_max))
    bounded = [{k: v for k, v in s.items() if not k.startswith("stride_x")} | {
        k.replace("stride_y", "stride_y"): v for k, v in s.items() if k.startswith("stride_y")} for s in _bounded(adaptive)]
    name = ("adaptive_bwd_kernel" if adaptive else f"pool_bwd_kernel[{'max' if is_max else 'avg'}]")
    return LaunchContract(kernel=fn, name=name, args=args, constexprs=consts,
                          grid=lambda c: (cdiv(D * H * W, c["BLOCK"]), C, N), domain=domain,
                          bounded_shapes=bounded, witnesses={"dx_ptr": lambda c: _plane_witness(c, H, W)})


def for_config(variant: Any, problem: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contract of exactly the kernel and constexprs ``config`` launches (GPU build: no emulation)."""
    meta = {"BLOCK": config["BLOCK"], "EMULATE": False}
    adaptive = variant.kind == "adaptive_avg_pool"
    if variant.tiled:
        meta["ROWS"] = config.get("ROWS", 1)
    if not adaptive:
        a = problem.attrs
        meta.update(IS_MAX=variant.kind == "max_pool", COUNT_PAD=bool(a.get("count_include_pad")),
                    HAS_DIVISOR=bool(a.get("divisor_override")))
        if not variant.backward:
            meta["RETURN_INDICES"] = bool(a.get("return_indices"))
    return [(backward if variant.backward else forward)([meta], adaptive=adaptive,
                                                        channels_last=bool(problem.attrs["channels_last"]))]


def _pool(is_max: bool, block: int = 64, **over) -> dict:
    return {"BLOCK": block, "IS_MAX": is_max, "COUNT_PAD": not is_max, "HAS_DIVISOR": False, "EMULATE": False, **over}


CONTRACTS = [
    forward([_pool(True, ROWS=4, RETURN_INDICES=True)], channels_last=True),
    forward([_pool(False, ROWS=2, RETURN_INDICES=False, COUNT_PAD=False)]),
    forward([{"BLOCK": 64, "EMULATE": False}], adaptive=True),
    backward([_pool(True)], channels_last=True),
    backward([_pool(False, HAS_DIVISOR=True)]),
    backward([{"BLOCK": 64, "EMULATE": False}], adaptive=True),
]
