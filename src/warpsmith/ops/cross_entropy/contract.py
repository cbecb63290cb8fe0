"""Launch contracts of the cross-entropy kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

Logits have any non-negative strides, with the launcher's 32-bit precondition on offsets within a
row, ``(V + MAX_BLOCK_V) * stride_v < 2^31`` (row offsets are int64); targets any stride and *any*
int64 value (the gather of ``x[row, t]`` is masked by ``0 <= t < V``, so no precondition on the
targets is needed: the value range declared is all of int64). Row losses, statistics ((M, 2)
row-major) and the gradient are written as the launchers allocate them; the gradient is row-major with
disjoint rows, row stride >= V (the launcher refuses other strides, in place included: an in-place
gradient over logits with overlapping rows would race).
Sizes: 1 <= M <= 2^31 - 2048, 1 <= V <= 2^31 - 2 MAX_BLOCK_V. The single-pass form needs V <= BLOCK_V
(its validity: BLOCK_V = next_power_of_2(V)). ``CONTRACTS`` covers every kernel; :func:`for_config`
the exact constexprs of one tuned config (the GPU form: no interpreter emulation). The GEMMs of the
fused linear cross-entropy are matmul's, covered by ops/matmul/contract.py.

Writer witnesses (verify/symbolic/contract.py) prove ``race_free`` and ``coverage`` of the row
losses, the statistics and the gradient for every shape: row m is lane ``m % ROWS`` of program
``m // ROWS``; statistic j of a row is written by store statement j; gradient column n is lane n
(single pass) or lane ``n % BLOCK_V`` at iteration ``n // BLOCK_V`` of the loop that stores it.
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv, sizes
from . import kernel as K_
from .limits import INDEX_LIMIT, MAX_BLOCK_V, REDUCE_BLOCK

M, V = sizes("M V")
sxm, sxv, st, sl, ss, sdx = sizes("stride_xm stride_xv stride_t stride_l stride_s stride_dxm")
col0, V_all = sizes("col0 V_all")
ANY_INT64 = (-(2**63), 2**63)
IGNORE = -100


def _domain(block_v: int, single: bool) -> list[Any]:
    base = [M <= 2**31 - 2048, V <= 2**31 - 2 * MAX_BLOCK_V, (V + MAX_BLOCK_V) * sxv < INDEX_LIMIT, sdx >= V]
    return base + ([V <= block_v] if single else [])


def _bounded(block_v: int, single: bool) -> list[dict[str, int]]:
    out = []
    for m, v in ((1, 1), (5, 37), (3, 2 * block_v + 1), (9, block_v)):
        if not (single and v > block_v):
            out.append({"M": m, "V": v, "stride_xm": v, "stride_xv": 1, "stride_t": 1, "stride_l": 1, "stride_s": 1,
                        "stride_dxm": v})
    return out


def _common() -> dict[str, Any]:
    return {"x_ptr": Tensor((M, V), (sxm, sxv)), "t_ptr": Tensor((M,), (st,), values=ANY_INT64),
            "M": M, "V": V, "ignore_index": IGNORE, "eps": 0, "stride_xm": sxm, "stride_xv": sxv, "stride_t": st}


def _row_witnesses(c: Mapping[str, Any], chunked: bool) -> dict[str, Witness]:
    """Who writes the losses, the statistics and the gradient: ROWS rows per program; the gradient's
    columns in chunks of BLOCK_V (one loop around its store) when ``chunked``, else lanes."""
    r, bv = c["ROWS"], c["BLOCK_V"]
    grad = (Witness(writer=lambda m, n: Writer(pid=(m / r,), iters=(n / bv,), lanes=(m % r, n % bv)),
                    element=lambda store, pid, iters, lanes: (pid[0] * r + lanes[0], iters[0] * bv + lanes[1]))
            if chunked else
            Witness(writer=lambda m, n: Writer(pid=(m / r,), lanes=(m % r, n)),
                    element=lambda store, pid, iters, lanes: (pid[0] * r + lanes[0], lanes[1])))
    return {
        "loss_ptr": Witness(writer=lambda m: Writer(pid=(m / r,), lanes=(m % r,)),
                            element=lambda store, pid, iters, lanes: (pid[0] * r + lanes[0],)),
        "st_ptr": Witness(writer=lambda m, j: Writer(pid=(m / r,), lanes=(m % r,), store=j),
                          element=lambda store, pid, iters, lanes: (pid[0] * r + lanes[0], store)),
        "dx_ptr": grad,
    }


def forward(constexprs: list[dict]) -> LaunchContract:
    """``xent_fwd_kernel``; pass constexprs sharing BLOCK_V, SINGLE and the WRITE_* flags."""
    c0 = constexprs[0]
    bv, single = c0["BLOCK_V"], c0["SINGLE"]
    grad = Tensor((M, V), (sdx, 1), output=True)  # row-major, disjoint rows (the logits' own, in place)
    args = {**_common(),
            "loss_ptr": Tensor((M,), (sl,), output=c0["WRITE_LOSS"]), "stride_l": sl,
            "st_ptr": Tensor((M, 2), (2, 1), output=c0["WRITE_STATS"]),
            "dx_ptr": grad if c0["WRITE_GRAD"] else Tensor((M, V), (sdx, 1)),
            "s_ptr": Tensor((M,), (ss,)) if c0["SCALE"] == 2 else Tensor((1,), (1,)),
            "stride_dxm": sdx, "stride_dxv": 1, "stride_s": ss if c0["SCALE"] == 2 else 0}
    flags = "".join(k[6] for k in ("WRITE_LOSS", "WRITE_STATS", "WRITE_GRAD") if c0[k])
    return LaunchContract(
        kernel=K_.xent_fwd_kernel, name=f"xent_fwd_kernel[{'single' if single else 'looped'},{flags}]", args=args,
        constexprs=constexprs, grid=lambda c: (cdiv(M, c["ROWS"]),), domain=_domain(bv, single),
        bounded_shapes=_bounded(bv, single), witnesses=_row_witnesses(c0, chunked=not single))


def backward(constexprs: list[dict], sliced: bool = False) -> LaunchContract:
    """``xent_bwd_kernel``; pass constexprs sharing BLOCK_V and SCALE. ``sliced``: x is the column slice
    [col0, col0 + V) of rows of V_all classes (the fused op's vocabulary chunks); else the whole row."""
    c0 = constexprs[0]
    per_row = c0["SCALE"] == 2
    args = {**_common(), "st_ptr": Tensor((M, 2), (2, 1)), "dx_ptr": Tensor((M, V), (sdx, 1), output=True),
            "s_ptr": Tensor((M,), (ss,)) if per_row else Tensor((1,), (1,)), "stride_s": ss if per_row else 0,
            "stride_dxm": sdx, "stride_dxv": 1, "col0": col0 if sliced else 0, "V_all": V_all if sliced else V}
    domain = _domain(c0["BLOCK_V"], False) + ([col0 >= 0, col0 + V <= V_all, V_all <= 2**31 - 2 * MAX_BLOCK_V]
                                              if sliced else [])
    shapes = _bounded(c0["BLOCK_V"], False)
    if sliced:
        shapes = [{**sh, "col0": 3, "V_all": sh["V"] + 5} for sh in shapes]
    scale_name = "per-row" if per_row else "scalar"
    return LaunchContract(
        kernel=K_.xent_bwd_kernel, name=f"xent_bwd_kernel[{scale_name} scale{', column slice' if sliced else ''}]",
        args=args, constexprs=constexprs, grid=lambda c: (cdiv(M, c["ROWS"]),), domain=domain,
        bounded_shapes=shapes, witnesses=_row_witnesses(c0, chunked=True))


def reduce(constexprs: list[dict]) -> LaunchContract:
    return LaunchContract(
        kernel=K_.xent_reduce_kernel, name="xent_reduce_kernel",
        args={"loss_ptr": Tensor((M,), (1,)), "t_ptr": Tensor((M,), (st,), values=ANY_INT64),
              "out_ptr": Tensor((1,), (1,), output=True), "M": M, "ignore_index": IGNORE, "stride_t": st},
        constexprs=constexprs, grid=(1,), domain=[M <= 2**31 - 2048],
        bounded_shapes=[{"M": m, "stride_t": 1} for m in (1, 7, REDUCE_BLOCK + 3)])


def scale() -> LaunchContract:
    return LaunchContract(
        kernel=K_.xent_scale_kernel, name="xent_scale_kernel",
        args={"t_ptr": Tensor((M,), (st,), values=ANY_INT64), "g_ptr": Tensor((1,), (1,)),
              "s_ptr": Tensor((1,), (1,), output=True), "M": M, "ignore_index": IGNORE, "stride_t": st},
        constexprs=[{"BLOCK": REDUCE_BLOCK}], grid=(1,), domain=[M <= 2**31 - 2048],
        bounded_shapes=[{"M": m, "stride_t": 1} for m in (1, 7, REDUCE_BLOCK + 3)])


def _fwd_meta(rows: int, block_v: int, single: bool, **flags: Any) -> dict:
    base = dict(ROWS=rows, BLOCK_V=block_v, SINGLE=single, SMOOTH=True, WRITE_LOSS=True, WRITE_STATS=True,
                WRITE_GRAD=False, SCALE=0, EMULATE=False)
    return {**base, **flags}


def _scale_kind(reduction: str) -> int:
    return 2 if reduction == "none" else 1


def for_config(variant: Any, problem: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contracts covering exactly the xent kernels and constexprs ``config`` launches on ``problem``."""
    red = problem.attrs["reduction"]
    smooth = float(problem.attrs["label_smoothing"]) > 0
    out: list[LaunchContract] = []
    if variant.op == "cross_entropy":
        bv = variant.block_v(problem, config)
        out.append(forward([_fwd_meta(config["ROWS"], bv, variant.single, SMOOTH=smooth)]))
        if red != "none":
            out.append(reduce([{"MEAN": red == "mean", "BLOCK": REDUCE_BLOCK, "EMULATE": False}]))
    elif variant.op == "cross_entropy_backward":
        out.append(backward([dict(ROWS=config["ROWS"], BLOCK_V=variant.block_v(problem, config), SMOOTH=smooth,
                                  SCALE=_scale_kind(red), EMULATE=False)]))
        if red == "mean":
            out.append(scale())
    else:  # the fused linear cross-entropy's kernels on one row chunk (M = the chunk's rows), and with the
        # weight's gradient on one vocabulary chunk (M = all rows, V = the chunk's columns of V_all)
        single = config["BLOCK_V"] >= problem.shape["V"]
        bwd = variant.backward
        hid = bwd or problem.attrs["grads"] != "none"
        wgt = problem.attrs["grads"] == "all"
        kind = _scale_kind(red) if bwd else (1 if red == "mean" and hid else 0)
        out.append(forward([_fwd_meta(config["ROWS"], config["BLOCK_V"], single, SMOOTH=smooth, WRITE_LOSS=not bwd,
                                      WRITE_STATS=wgt, WRITE_GRAD=hid, SCALE=kind)]))
        if wgt:
            out.append(backward([dict(ROWS=config["ROWS"], BLOCK_V=config["BLOCK_V"], SMOOTH=smooth, SCALE=kind,
                                      EMULATE=False)], sliced=True))
        if not bwd and red != "none":
            out.append(reduce([{"MEAN": red == "mean", "BLOCK": REDUCE_BLOCK, "EMULATE": False}]))
        if red == "mean" and hid:
            out.append(scale())
    return out


CONTRACTS = [
    forward([_fwd_meta(4, 64, True)]),
    forward([_fwd_meta(2, 32, False)]),
    forward([_fwd_meta(1, 64, True, WRITE_STATS=False, WRITE_GRAD=True)]),
    forward([_fwd_meta(1, 32, False, WRITE_LOSS=False, WRITE_STATS=False, WRITE_GRAD=True, SCALE=2)]),
    backward([dict(ROWS=2, BLOCK_V=32, SMOOTH=True, SCALE=1, EMULATE=False)]),
    backward([dict(ROWS=1, BLOCK_V=64, SMOOTH=False, SCALE=2, EMULATE=False)]),
    reduce([{"MEAN": True, "BLOCK": REDUCE_BLOCK, "EMULATE": False}]),
    scale(),
]
