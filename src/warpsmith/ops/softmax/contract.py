"""Launch contracts of the softmax kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

Inputs have any non-negative row and column strides; the output is row-major with row stride N,
as the launchers allocate it (a given ``out`` must be contiguous along rows). Sizes range over
1 <= M <= 2^31 - 256 rows and 1 <= N < 2^31 columns (the spec's ranges), with the launcher's
32-bit precondition on offsets within a row, ``(N + BLOCK_N) * stride_n < 2^31`` (row offsets
are int64). The grid is the launcher's: ``cdiv(M, ROWS)`` blocks of rows (or a persistent grid
of ``PROGRAMS`` programs) for the single-pass kernels, ``M`` rows for the online kernels; the
single-pass kernels need ``N <= BLOCK_N`` (their validity predicate). The prover found the
online kernels' first row loop bound ``cdiv(M - pid, M)`` wrapping int32 for M > 2^30; it is
now ``(M - 1 - pid) // nprog + 1``.
``CONTRACTS`` covers each kernel in forward/backward and softmax/log-softmax form;
:func:`for_config` builds the contracts of one tuned config.

Writer witnesses (verify/symbolic/contract.py) prove ``race_free`` and ``coverage`` of the output
for every shape: in the single-pass kernels element (m, n) is lane (m % ROWS, n) of row block
``m // ROWS``, which program ``block % G`` handles at iteration ``block // G`` of its grid-stride
loop over G programs; in the online kernels it is lane ``n % BLOCK_N`` of program m, at
iteration 0 of its row loop and ``n // BLOCK_N`` of its second column loop.
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv, sizes
from . import kernel as K_
from .limits import INDEX_LIMIT

M, N, P = sizes("M N PROGRAMS")
sxm, sxn, sdym, sdyn = sizes("stride_xm stride_xn stride_dym stride_dyn")


def _domain(block_n: int, single: bool) -> list[Any]:
    base = [M <= 2**31 - 256, N < 2**31, (N + block_n) * sxn < INDEX_LIMIT, (N + block_n) * sdyn < INDEX_LIMIT]
    return base + ([N <= block_n] if single else [])


def _bounded(block_n: int, single: bool) -> list[dict[str, int]]:
    shapes = [(1, 1), (5, 37), (3, 2 * block_n + 1), (9, block_n)]
    out = []
    for m, n in shapes:
        if single and n > block_n:
            continue
        out.append({"M": m, "N": n, "stride_xm": n, "stride_xn": 1, "stride_dym": n, "stride_dyn": 1, "PROGRAMS": 2})
    return out


def _args(backward: bool) -> dict[str, Any]:
    out = Tensor((M, N), (N, 1), output=True)
    if backward:
        return {"y_ptr": Tensor((M, N), (sxm, sxn)), "dy_ptr": Tensor((M, N), (sdym, sdyn)), "dx_ptr": out,
                "M": M, "N": N, "stride_ym": sxm, "stride_yn": sxn, "stride_dym": sdym, "stride_dyn": sdyn,
                "stride_dxm": N}
    return {"x_ptr": Tensor((M, N), (sxm, sxn)), "y_ptr": out, "M": M, "N": N,
            "stride_xm": sxm, "stride_xn": sxn, "stride_ym": N}


def _out(backward: bool) -> str:
    return "dx_ptr" if backward else "y_ptr"


def row_blocks(rows: int, programs: Any) -> Witness:
    """Rows in blocks of ``rows``, ``programs`` programs striding over the blocks (one loop)."""
    return Witness(
        writer=lambda m, n: Writer(pid=((m / rows) % programs,), iters=((m / rows) / programs,), lanes=(m % rows, n)),
        element=lambda store, pid, iters, lanes: ((pid[0] + iters[0] * programs) * rows + lanes[0], lanes[1]))


def rows_in_chunks(block_n: int) -> Witness:
    """One row per program (grid M), its columns in chunks of ``block_n`` (the second column loop)."""
    return Witness(
        writer=lambda m, n: Writer(pid=(m,), iters=(0, n / block_n), lanes=(n % block_n,)),
        element=lambda store, pid, iters, lanes: (pid[0] + iters[0] * M, iters[1] * block_n + lanes[0]))


def single_pass(constexprs: list[dict], backward: bool, persistent: bool = False) -> LaunchContract:
    """One contract per BLOCK_N (pass constexprs sharing it)."""
    bn = constexprs[0]["BLOCK_N"]
    kernel = K_.softmax_backward_single_pass_kernel if backward else K_.softmax_single_pass_kernel
    grid = (P,) if persistent else (lambda c: (cdiv(M, c["ROWS"]),))
    return LaunchContract(
        kernel=kernel, name=kernel.fn.__name__ + ("[persistent]" if persistent else ""), args=_args(backward),
        constexprs=constexprs, grid=grid, domain=_domain(bn, True) + ([P <= 8 * 264] if persistent else []),
        bounded_shapes=_bounded(bn, True),
        witnesses={_out(backward): lambda c: row_blocks(c["ROWS"], P if persistent else cdiv(M, c["ROWS"]))})


def online(constexprs: list[dict], backward: bool) -> LaunchContract:
    bn = constexprs[0]["BLOCK_N"]
    kernel = K_.softmax_backward_online_kernel if backward else K_.softmax_online_kernel
    return LaunchContract(
        kernel=kernel, name=kernel.fn.__name__, args=_args(backward), constexprs=constexprs, grid=(M,),
        domain=_domain(bn, False), bounded_shapes=_bounded(bn, False),
        witnesses={_out(backward): lambda c: rows_in_chunks(c["BLOCK_N"])})


def for_config(variant: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contract covering exactly the kernel and constexprs ``config`` launches (GPU form: no emulation)."""
    meta = {"BLOCK_N": config["BLOCK_N"], "LOG": variant.log, "EMULATE": False}
    if variant.name == "single_pass":
        return [single_pass([{**meta, "ROWS": config["ROWS"]}], variant.backward,
                            persistent=bool(variant.typed(config).PROGRAMS_PER_SM))]
    return [online([meta], variant.backward)]


CONTRACTS = [
    single_pass([{"BLOCK_N": 64, "ROWS": 4, "LOG": False, "EMULATE": False}], backward=False),
    single_pass([{"BLOCK_N": 32, "ROWS": 2, "LOG": True, "EMULATE": False}], backward=False, persistent=True),
    single_pass([{"BLOCK_N": 64, "ROWS": 2, "LOG": False, "EMULATE": False}], backward=True),
    online([{"BLOCK_N": 64, "LOG": False, "EMULATE": False}], backward=False),
    online([{"BLOCK_N": 32, "LOG": True, "EMULATE": False}], backward=True),
]
