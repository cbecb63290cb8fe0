"""Launch contracts of the GEMM kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

Operands A and B have *any* non-negative strides (transposed views included); C and the
split-K workspace are contiguous, as the launchers allocate them. Sizes range over
1 <= M, N, K <= 2^20, batch 1 <= B <= 64, with the launcher's 32-bit indexing precondition
(every offset within one batch entry, tile overshoot included, below 2^31; the launcher refuses
larger operands). ``CONTRACTS`` (what ``warpsmith prove`` and the
tests prove) covers each kernel with and without the EVEN_K specialization, which is proved
under its guard K % BLOCK_K == 0; :func:`for_config` builds the contracts of one tuned config
(the verifier proves a winner's exact constexprs).

Writer witnesses (see verify/symbolic/contract.py) make ``race_free`` and ``coverage`` of C
provable for every shape: element (b, m, n) is written by lane (m % BLOCK_M, n % BLOCK_N) of the
program owning tile (m // BLOCK_M, n // BLOCK_N), numbered in the grouped order (:func:`tile_of`,
the inverse of the kernel's ``tile_coords``); the persistent kernel's program ``g % PROGRAMS``
writes global tile ``g = b * tiles + tile`` at iteration ``g // PROGRAMS`` of its grid-stride
loop. The split-K workspace (one writer per (batch, split, m, n)) and the reduction's C (flat
index ``m * N + n`` in blocks of BLOCK) have witnesses too; the atomic split-K form has several
writers per element and none.
"""
from __future__ import annotations

from typing import Any, Mapping

import z3

from ...verify.symbolic import LaunchContract, Split, Tensor, Witness, Writer, cdiv, sizes
from . import kernel as K_
from .limits import INDEX_LIMIT, MAX_BLOCK

M, N, K, B = sizes("M N K B")
sab, sam, sak, sbb, sbk, sbn, sbias = sizes("stride_ab stride_am stride_ak stride_bb stride_bk stride_bn stride_bias")
S, P = sizes("SPLIT_K PROGRAMS")
def _span(rows, cols, sr, sc):
    return (rows + MAX_BLOCK) * sr + (cols + MAX_BLOCK) * sc


# sizes, and the launcher's 32-bit indexing precondition (variant.index_span < INDEX_LIMIT)
DOMAIN = [M <= 2**20, N <= 2**20, K <= 2**20, B <= 64,
          _span(M, K, sam, sak) < INDEX_LIMIT, _span(K, N, sbk, sbn) < INDEX_LIMIT, _span(M, N, N, 1) < INDEX_LIMIT,
          _span(N, 0, sbias, 0) < INDEX_LIMIT]
_SHAPES = [{"M": 1, "N": 1, "K": 1, "B": 1}, {"M": 37, "N": 19, "K": 41, "B": 2}, {"M": 17, "N": 33, "K": 64, "B": 1},
           {"M": 5, "N": 70, "K": 96, "B": 3}]  # the last two also satisfy the EVEN_K guards
BOUNDED = [{**s, "stride_ab": s["M"] * s["K"], "stride_am": s["K"], "stride_ak": 1, "stride_bb": s["K"] * s["N"],
            "stride_bk": s["N"], "stride_bn": 1, "stride_bias": 1} for s in _SHAPES]
_EVEN_K = {"EVEN_K": lambda c: K % c["BLOCK_K"] == 0}
_OPERANDS = {
    "a_ptr": Tensor((B, M, K), (sab, sam, sak)),
    "b_ptr": Tensor((B, K, N), (sbb, sbk, sbn)),
    "M": M, "N": N, "K": K,
    "stride_ab": sab, "stride_am": sam, "stride_ak": sak, "stride_bb": sbb, "stride_bk": sbk, "stride_bn": sbn,
}
_OUTPUT = {
    "c_ptr": Tensor((B, M, N), (M * N, N, 1), output=True),
    "bias_ptr": Tensor((N,), (sbias,)),
    "stride_cb": M * N, "stride_cm": N, "stride_cn": 1, "stride_bias": sbias,
}


def _tiles(c: Mapping[str, Any]) -> Any:
    return cdiv(M, c["BLOCK_M"]) * cdiv(N, c["BLOCK_N"])


def _min(a: Any, b: Any) -> Any:
    return z3.If(a < b, a, b)


def tile_coords(tile: Any, c: Mapping[str, Any]) -> tuple[Any, Any]:
    """The kernel's ``tile_coords``: tile number (grouped order) -> (row tile, column tile)."""
    gm, num_m, num_n = c["GROUP_M"], cdiv(M, c["BLOCK_M"]), cdiv(N, c["BLOCK_N"])
    per_group = gm * num_n
    first_m = (tile / per_group) * gm
    size_m = _min(num_m - first_m, gm)
    return first_m + (tile % per_group) % size_m, (tile % per_group) / size_m


def tile_of(pid_m: Any, pid_n: Any, c: Mapping[str, Any]) -> Any:
    """Its inverse: the number, in the grouped order, of tile (pid_m, pid_n)."""
    gm, num_m, num_n = c["GROUP_M"], cdiv(M, c["BLOCK_M"]), cdiv(N, c["BLOCK_N"])
    first_m = (pid_m / gm) * gm
    size_m = _min(num_m - first_m, gm)
    return first_m * num_n + pid_n * size_m + (pid_m - first_m)


def _c_witness(c: Mapping[str, Any], persistent: bool = False) -> Witness:
    """Who writes C[b, m, n]: see the module docstring."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]

    def writer(b, m, n):
        tile = tile_of(m / bm, n / bn, c)
        lanes = (m % bm, n % bn)
        if persistent:
            g = b * _tiles(c) + tile
            return Writer(pid=(g % P,), iters=(g / P,), lanes=lanes)
        return Writer(pid=(tile, b), lanes=lanes)

    def element(store, pid, iters, lanes):
        if persistent:
            g = pid[0] + iters[0] * P
            b, tile = g / _tiles(c), g % _tiles(c)
        else:
            b, tile = pid[1], pid[0]
        pm, pn = tile_coords(tile, c)
        return b, pm * bm + lanes[0], pn * bn + lanes[1]

    return Witness(writer=writer, element=element)


def _workspace_witness(c: Mapping[str, Any]) -> Witness:
    """Split-K's partial products p[b, s, m, n]: tile (m // BLOCK_M, n // BLOCK_N), split s, batch b."""
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]

    def element(store, pid, iters, lanes):
        pm, pn = tile_coords(pid[0], c)
        return pid[2], pid[1], pm * bm + lanes[0], pn * bn + lanes[1]

    return Witness(writer=lambda b, s, m, n: Writer(pid=(tile_of(m / bm, n / bn, c), s, b), lanes=(m % bm, n % bn)),
                   element=element)


def _reduce_witness(c: Mapping[str, Any]) -> Witness:
    """The reduction's C[b, m, n]: flat index m * N + n, in blocks of BLOCK per program, batch b."""
    blk = c["BLOCK"]
    return Witness(writer=lambda b, m, n: Writer(pid=((m * N + n) / blk, b), lanes=((m * N + n) % blk,)),
                   element=lambda store, pid, iters, lanes: (pid[1], (pid[0] * blk + lanes[0]) / N,
                                                             (pid[0] * blk + lanes[0]) % N))


def tiled(constexprs: list[dict]) -> LaunchContract:
    return LaunchContract(
        kernel=K_.matmul_tiled_kernel, name="matmul_tiled_kernel", args={**_OPERANDS, **_OUTPUT},
        constexprs=constexprs, grid=lambda c: (_tiles(c), B), domain=DOMAIN, bounded_shapes=BOUNDED, guards=_EVEN_K,
        witnesses={"c_ptr": _c_witness})


def persistent(constexprs: list[dict]) -> LaunchContract:
    return LaunchContract(
        kernel=K_.matmul_persistent_kernel, name="matmul_persistent_kernel", args={**_OPERANDS, **_OUTPUT, "BATCH": B},
        constexprs=constexprs, grid=(P,), domain=DOMAIN + [P <= 264],
        bounded_shapes=[{**s, "PROGRAMS": 3} for s in BOUNDED], guards=_EVEN_K,
        witnesses={"c_ptr": lambda c: _c_witness(c, persistent=True)})


def splitk(constexprs: list[dict]) -> LaunchContract:
    """One contract per BLOCK_K (K_PER_SPLIT depends on it): pass constexprs sharing BLOCK_K and ATOMIC."""
    bk, atomic = constexprs[0]["BLOCK_K"], constexprs[0]["ATOMIC"]
    parts = 1 if atomic else S
    return LaunchContract(
        kernel=K_.matmul_splitk_kernel, name=f"matmul_splitk_kernel[{'atomic' if atomic else 'workspace'}]",
        args={**_OPERANDS, "p_ptr": Tensor((B, parts, M, N), (M * N * parts, M * N, N, 1), output=True),
              "K_PER_SPLIT": cdiv(cdiv(K, S), bk) * bk},
        constexprs=constexprs, grid=lambda c: (_tiles(c), S, B),
        # the validity predicate (SplitKGemm.invalid): every slice non-empty
        domain=DOMAIN + [S >= 1, S <= 16, (S - 1) * (cdiv(cdiv(K, S), bk) * bk) < K],
        bounded_shapes=[{**s, "SPLIT_K": sk} for s in BOUNDED for sk in (1, 2, 3)
                        if (sk - 1) * (-(-(-(-s["K"] // sk)) // bk) * bk) < s["K"]],
        split=Split("a_ptr", dim=2, axis=1), guards=_EVEN_K,
        witnesses={} if atomic else {"p_ptr": _workspace_witness})


def reduce(constexprs: list[dict]) -> LaunchContract:
    return LaunchContract(
        kernel=K_.matmul_splitk_reduce_kernel, name="matmul_splitk_reduce_kernel",
        args={"p_ptr": Tensor((B, S, M, N), (S * M * N, M * N, N, 1)), **_OUTPUT, "M": M, "N": N, "SPLIT_K": S},
        constexprs=constexprs, grid=lambda c: (cdiv(M * N, c["BLOCK"]), B),
        domain=DOMAIN + [S >= 1, S <= 16], bounded_shapes=[{**s, "SPLIT_K": 2} for s in BOUNDED],
        witnesses={"c_ptr": _reduce_witness})


def _meta(bm: int, bn: int, bk: int, even_k: bool, group_m: int = 4, precision: str = "ieee", **extra: Any) -> dict:
    """The constexprs of one GEMM launch as the GPU compiles it (no interpreter emulation)."""
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, EVEN_K=even_k, IS_FP32=False,
                PRECISION=precision, EMULATE=False, **extra)


def for_config(variant: str, config: Mapping[str, Any], has_bias: bool, activation: str) -> list[LaunchContract]:
    """The contracts that cover exactly the kernels and constexprs ``config`` launches."""
    meta = _meta(config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"], bool(config["EVEN_K"]),
                 config["GROUP_M"], config["PRECISION"])
    epi = dict(HAS_BIAS=has_bias, ACTIVATION=activation)
    if variant == "tiled":
        return [tiled([{**meta, **epi}])]
    if variant == "persistent":
        return [persistent([{**meta, **epi}])]
    atomic = config["REDUCE"] == "atomic"
    return [splitk([{**meta, "ATOMIC": atomic}]), reduce([{"BLOCK": 1024, "EMULATE": False, **epi}])]


EPILOGUE = dict(HAS_BIAS=True, ACTIVATION="gelu")
CONTRACTS = [
    tiled([_meta(16, 32, 16, ek, **EPILOGUE) for ek in (False, True)]),
    splitk([_meta(16, 32, 16, ek, ATOMIC=False) for ek in (False, True)]),
    splitk([_meta(16, 32, 16, False, ATOMIC=True)]),
    reduce([{"BLOCK": 1024, "EMULATE": False, **EPILOGUE}]),
    persistent([_meta(32, 16, 32, ek, **EPILOGUE) for ek in (False, True)]),
]
