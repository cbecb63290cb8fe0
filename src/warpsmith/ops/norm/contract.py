"""Launch contracts of the normalization kernels, for ``warpsmith prove`` (verify/symbolic).

Inputs (x, residual, dy, ds) have any non-negative row stride and unit column stride (the
launchers require it; the public ops copy otherwise); outputs (y, s, dx, the statistics, the
dw/db workspace) are contiguous, as the launchers allocate (or require) them. Sizes:
1 <= M <= 2^30, 1 <= N <= 2^24, at most 8 x 132 persistent programs; the row and persistent
kernels hold whole rows (N <= BLOCK_N, their validity). Rows are indexed in int64 in the
kernels, so row strides need no bound.

What is proved (z3, every shape in the domain): in-bounds accesses and no int32 overflow for
every kernel; race freedom and coverage of every output through writer witnesses
(verify/symbolic/contract.py), which say who writes each element, so that z3 never has to invert
``row * N + col``: row m is lane ``m % ROWS`` of row block ``m // ROWS``, owned by program
``block`` (row kernels) or by program ``block % PROGRAMS`` at iteration ``block // PROGRAMS`` of
its grid-stride loop (persistent kernels); in the looped kernels column n is lane
``n % BLOCK_N`` at iteration ``n // BLOCK_N`` of the loop that stores it; a workspace row is its
program's (``p[slot, k, n]``: statement k, dw then db). The atomic workspace has several writers
per element and no witness.
:func:`for_config` builds the contracts of exactly the kernels and constexprs one config launches
(the verifier proves a tuned winner's); ``CONTRACTS`` covers each kernel for the tests.
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv, sizes
from . import kernel as K_

M, N, P = sizes("M N PROGRAMS")
sxm, srm, sdym, sdsm = sizes("stride_xm stride_rm stride_dym stride_dsm")
MAX_PROGRAMS = 8 * 132
DOMAIN = [M <= 2**30, N <= 2**24]


def _whole_rows(kernel: str, consts: list[dict]) -> list[Any]:
    """Row and persistent kernels hold whole rows: their BLOCK_N (shared by ``consts``) is >= N."""
    return [] if kernel == "looped" else [N <= consts[0]["BLOCK_N"]]


def _bounded(max_n: int = 2**24) -> list[dict]:
    out = []
    for m, n in ((1, 1), (5, 37), (19, 130)):
        n = min(n, max_n - 3) if n > max_n else n
        s = {"M": m, "N": n, "stride_xm": n, "stride_rm": n + 3, "stride_dym": n + 1, "stride_dsm": 2 * n,
             "PROGRAMS": 3}
        out.append(s)
    return out


def _rows(kernel: str, c: Mapping[str, Any], columns: bool) -> Witness:
    """Who writes row m (and column n when ``columns``) of a row-indexed output of ``kernel``."""
    if kernel == "looped" and "ROWS" not in c:  # forward looped: one row per program, grid M
        if not columns:
            return Witness(writer=lambda m: Writer(pid=(m,)), element=lambda store, pid, iters, lanes: (pid[0],))
        bn = c["BLOCK_N"]
        return Witness(writer=lambda m, n: Writer(pid=(m,), iters=(n / bn,), lanes=(n % bn,)),
                       element=lambda store, pid, iters, lanes: (pid[0], iters[0] * bn + lanes[0]))
    rows = c["ROWS"]
    if kernel == "persistent":  # blocks of ROWS rows, PROGRAMS programs striding over them
        def who(m):
            return ((m / rows) % P,), ((m / rows) / P,)

        def row(pid, iters, lane):
            return (pid[0] + iters[0] * P) * rows + lane
    else:  # one block of ROWS rows per program
        def who(m):
            return (m / rows,), ()

        def row(pid, iters, lane):
            return pid[0] * rows + lane
    if not columns:
        return Witness(writer=lambda m: Writer(pid=who(m)[0], iters=who(m)[1], lanes=(m % rows,)),
                       element=lambda store, pid, iters, lanes: (row(pid, iters, lanes[0]),))
    if kernel == "looped":  # backward looped: ROWS rows per program, columns in chunks (second loop)
        bn = c["BLOCK_N"]
        return Witness(writer=lambda m, n: Writer(pid=who(m)[0], iters=(n / bn,), lanes=(m % rows, n % bn)),
                       element=lambda store, pid, iters, lanes: (row(pid, (), lanes[0]), iters[0] * bn + lanes[1]))
    return Witness(writer=lambda m, n: Writer(pid=who(m)[0], iters=who(m)[1], lanes=(m % rows, n)),
                   element=lambda store, pid, iters, lanes: (row(pid, iters, lanes[0]), lanes[1]))


def _workspace(kernel: str, c: Mapping[str, Any]) -> Witness:
    """p[slot, k, n] is program ``slot``'s: statement k (dw, then db), column n (chunked when looped)."""
    if kernel == "looped":
        bn = c["BLOCK_N"]
        return Witness(writer=lambda slot, k, n: Writer(pid=(slot,), iters=(n / bn,), lanes=(n % bn,), store=k),
                       element=lambda store, pid, iters, lanes: (pid[0], store, iters[0] * bn + lanes[0]))
    return Witness(writer=lambda slot, k, n: Writer(pid=(slot,), lanes=(n,), store=k),
                   element=lambda store, pid, iters, lanes: (pid[0], store, lanes[0]))


def forward(kernel: str, consts: list[dict], *, rms: bool, has_res: bool) -> LaunchContract:
    """``kernel``: "row", "persistent" or "looped"."""
    fn = {"row": K_.norm_fwd_row_kernel, "persistent": K_.norm_fwd_persistent_kernel,
          "looped": K_.norm_fwd_looped_kernel}[kernel]
    args = {
        "x_ptr": Tensor((M, N), (sxm, 1)), "res_ptr": Tensor((M, N), (srm, 1)),
        "w_ptr": Tensor((N,), (1,)), "b_ptr": Tensor((N,), (1,)),
        "y_ptr": Tensor((M, N), (N, 1), output=True), "s_ptr": Tensor((M, N), (N, 1), output=has_res),
        "mean_ptr": Tensor((M,), (1,), output=not rms), "rstd_ptr": Tensor((M,), (1,), output=True),
        "M": M, "N": N, "eps": 0, "stride_xm": sxm, "stride_rm": srm, "stride_ym": N, "stride_sm": N,
    }
    if kernel == "row":
        grid: Any = lambda c: (cdiv(M, c["ROWS"]),)
    elif kernel == "persistent":
        grid = (P,)
    else:
        grid = (M,)
    return LaunchContract(kernel=fn, name=f"{fn.fn.__name__ if hasattr(fn, 'fn') else kernel}"
                          f"[{'rms' if rms else 'layer'}{', residual' if has_res else ''}]",
                          args=args, constexprs=consts, grid=grid,
                          domain=DOMAIN + [P <= MAX_PROGRAMS] + _whole_rows(kernel, consts),
                          bounded_shapes=_bounded(consts[0]["BLOCK_N"] if kernel != "looped" else 2**24),
                          witnesses={"y_ptr": lambda c: _rows(kernel, c, True), "s_ptr": lambda c: _rows(kernel, c, True),
                                     "mean_ptr": lambda c: _rows(kernel, c, False),
                                     "rstd_ptr": lambda c: _rows(kernel, c, False)})


def backward(kernel: str, consts: list[dict], *, k: int, atomic: bool) -> LaunchContract:
    """The main backward kernel; ``k`` parameter gradients (0: the workspace is never touched)."""
    fn = {"row": K_.norm_bwd_row_kernel, "persistent": K_.norm_bwd_persistent_kernel,
          "looped": K_.norm_bwd_looped_kernel}[kernel]
    if kernel == "persistent":
        grid: Any = (P,)
        programs: Any = P
    else:
        grid = lambda c: (cdiv(M, c["ROWS"]),)
        programs = cdiv(M, consts[0]["ROWS"])
    rows = 1 if atomic else programs
    kk = max(k, 1)
    args = {
        "dy_ptr": Tensor((M, N), (sdym, 1)), "x_ptr": Tensor((M, N), (sxm, 1)), "w_ptr": Tensor((N,), (1,)),
        "mean_ptr": Tensor((M,), (1,)), "rstd_ptr": Tensor((M,), (1,)), "ds_ptr": Tensor((M, N), (sdsm, 1)),
        "dx_ptr": Tensor((M, N), (N, 1), output=True),
        "p_ptr": Tensor((rows, kk, N), (kk * N, N, 1), output=k > 0),
        "M": M, "N": N, "stride_dym": sdym, "stride_xm": sxm, "stride_dsm": sdsm, "stride_dxm": N,
    }
    return LaunchContract(kernel=fn, name=f"norm_bwd_{kernel}_kernel[k={k}{', atomic' if atomic else ''}]",
                          args=args, constexprs=consts, grid=grid,
                          domain=DOMAIN + [P <= MAX_PROGRAMS] + _whole_rows(kernel, consts),
                          bounded_shapes=_bounded(consts[0]["BLOCK_N"] if kernel != "looped" else 2**24),
                          witnesses={"dx_ptr": lambda c: _rows(kernel, c, True),
                                     **({} if atomic else {"p_ptr": lambda c: _workspace(kernel, c)})})


def reduce(consts: list[dict]) -> LaunchContract:
    c = consts[0]
    kk = c["K"]
    args = {"p_ptr": Tensor((P, kk, N), (kk * N, N, 1)),
            "dw_ptr": Tensor((N,), (1,), output=c["HAS_W"]), "db_ptr": Tensor((N,), (1,), output=c["HAS_B"]),
            "P": P, "N": N}
    cols = Witness(writer=lambda n: Writer(pid=(n / c["BLOCK_N"],), lanes=(n % c["BLOCK_N"],)),
                   element=lambda store, pid, iters, lanes: (pid[0] * c["BLOCK_N"] + lanes[0],))
    return LaunchContract(kernel=K_.norm_partials_reduce_kernel, name=f"norm_partials_reduce_kernel[K={kk}]",
                          args=args, constexprs=consts, grid=lambda cc: (cdiv(N, cc["BLOCK_N"]),),
                          domain=[N <= 2**24, P <= 2**30], bounded_shapes=_bounded(),
                          witnesses={"dw_ptr": cols, "db_ptr": cols})


def for_config(variant: Any, problem: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contracts that cover exactly the kernels and constexprs ``config`` launches."""
    from .limits import REDUCE_BLOCK_N, REDUCE_BLOCK_P

    meta = {k: v for k, v in variant._meta(problem, config).items() if k != "num_warps"}
    meta["EMULATE"] = False  # what the GPU compiles; the interpreter's bf16 rounding shim aside
    a = problem.attrs
    has_w, has_b, has_res = bool(a["weight"]), bool(a.get("bias")), bool(a["residual"])
    rms = variant.kind == "rms"
    if not variant.backward:
        return [forward(variant.name, [{**meta, "HAS_W": has_w, "HAS_B": has_b, "HAS_RES": has_res}],
                        rms=rms, has_res=has_res)]
    k = int(has_w) + int(has_b)
    atomic = variant.typed(config).REDUCE == "atomic" and k > 0
    out = [backward(variant.name, [{**meta, "K": max(k, 1), "HAS_W": has_w, "HAS_B": has_b, "HAS_DS": has_res,
                                    "ATOMIC": atomic}], k=k, atomic=atomic)]
    if k:
        out.append(reduce([dict(BLOCK_P=REDUCE_BLOCK_P, BLOCK_N=REDUCE_BLOCK_N, K=k, HAS_W=has_w, HAS_B=has_b,
                                EMULATE=False)]))
    return out


def _fwd(rows: int, block: int, rms: bool, res: bool, looped: bool = False) -> dict:
    c = dict(BLOCK_N=block, IS_RMS=rms, HAS_W=True, HAS_B=not rms, HAS_RES=res, EMULATE=False)
    return c if looped else {**c, "ROWS": rows}


def _bwd(rows: int, block: int, rms: bool, atomic: bool = False) -> dict:
    return dict(ROWS=rows, BLOCK_N=block, K=1 if rms else 2, IS_RMS=rms, HAS_W=True, HAS_B=not rms, HAS_DS=True,
                ATOMIC=atomic, EMULATE=False)


CONTRACTS = [
    forward("row", [_fwd(4, 64, True, True)], rms=True, has_res=True),
    forward("persistent", [_fwd(2, 32, False, False)], rms=False, has_res=False),
    forward("looped", [_fwd(1, 16, False, True, looped=True)], rms=False, has_res=True),
    backward("row", [_bwd(4, 64, True)], k=1, atomic=False),
    backward("persistent", [_bwd(2, 32, False)], k=2, atomic=False),
    backward("looped", [_bwd(2, 16, False)], k=2, atomic=False),
    backward("row", [_bwd(4, 64, True, atomic=True)], k=1, atomic=True),
    reduce([dict(BLOCK_P=32, BLOCK_N=64, K=2, HAS_W=True, HAS_B=True, EMULATE=False)]),
]
