"""Launch contracts of the scaled GEMM kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

A and B have any non-negative strides; C and the split-K workspace are contiguous (the launchers
allocate them). The scale tensors have exactly the shapes of spec.py with any strides:
``row`` reads ``sa[m]`` over (M,) and ``sb[n]`` over (N,); ``block`` reads ``sa[m, k // 128]`` over
(M, ceil(K/128)) and ``sb[k // 128, n // 128]`` over (ceil(K/128), ceil(N/128)) (the block-scale
index math: every K tile starts at a multiple of BLOCK_K <= 128 below K, so ``k // 128`` stays below
ceil(K/128)); ``tensor`` reads element 0 of each. Sizes 1 <= M, N, K <= 2^20 with the launcher's
32-bit indexing precondition, as the matmul family's, for A, B, C, the bias and the scale tensors
(:data:`SCALE_DOMAIN`); the split-K workspace (SPLIT_K x M x N, which may pass 2^31) is indexed in 64 bits.
"""
from __future__ import annotations

from typing import Any, Mapping

from ....verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv, sizes
from ...matmul.contract import _span, tile_coords, tile_of
from ...matmul.limits import INDEX_LIMIT
from . import kernel as K_
from ..quant.reference import BLOCK

M, N, K = sizes("M N K")
sam, sak, sbk, sbn, sbias = sizes("stride_am stride_ak stride_bk stride_bn stride_bias")
ssam, ssak, ssbk, ssbn = sizes("stride_sam stride_sak stride_sbk stride_sbn")
S = sizes("SPLIT_K")[0]
KB, NB = cdiv(K, BLOCK), cdiv(N, BLOCK)

DOMAIN = [M <= 2**20, N <= 2**20, K <= 2**20,
          _span(M, K, sam, sak) < INDEX_LIMIT, _span(K, N, sbk, sbn) < INDEX_LIMIT, _span(M, N, N, 1) < INDEX_LIMIT,
          _span(N, 0, sbias, 0) < INDEX_LIMIT]
# the scale tensors' spans, as the launcher checks them (variant._Scaled._operands)
SCALE_DOMAIN = {"tensor": [], "row": [_span(M, 0, ssam, 0) < INDEX_LIMIT, _span(N, 0, ssbn, 0) < INDEX_LIMIT],
                "block": [_span(M, KB, ssam, ssak) < INDEX_LIMIT, _span(KB, NB, ssbk, ssbn) < INDEX_LIMIT]}
_SHAPES = [{"M": 1, "N": 1, "K": 1}, {"M": 37, "N": 19, "K": 300}, {"M": 17, "N": 133, "K": 256}]


def _bounded(scaling: str) -> list[dict]:
    out = []
    for s in _SHAPES:
        kb, nb = -(-s["K"] // 128), -(-s["N"] // 128)
        st = {"stride_sam": 1, "stride_sak": 1, "stride_sbk": 1, "stride_sbn": 1}  # sizes are >= 1; unused ones too
        if scaling == "block":
            st = {"stride_sam": kb, "stride_sak": 1, "stride_sbk": nb, "stride_sbn": 1}
        out.append({**s, "stride_am": s["K"], "stride_ak": 1, "stride_bk": 1, "stride_bn": s["K"], "stride_bias": 1,
                    **st})
    return out


def _scales(scaling: str) -> dict:
    if scaling == "tensor":
        return {"sa_ptr": Tensor((1,), (1,)), "sb_ptr": Tensor((1,), (1,)), "stride_sam": 0, "stride_sak": 0,
                "stride_sbk": 0, "stride_sbn": 0}
    if scaling == "row":
        return {"sa_ptr": Tensor((M,), (ssam,)), "sb_ptr": Tensor((N,), (ssbn,)), "stride_sam": ssam, "stride_sak": 0,
                "stride_sbk": 0, "stride_sbn": ssbn}
    return {"sa_ptr": Tensor((M, KB), (ssam, ssak)), "sb_ptr": Tensor((KB, NB), (ssbk, ssbn)),
            "stride_sam": ssam, "stride_sak": ssak, "stride_sbk": ssbk, "stride_sbn": ssbn}


def _operands(scaling: str) -> dict:
    return {"a_ptr": Tensor((M, K), (sam, sak)), "b_ptr": Tensor((K, N), (sbk, sbn)), "M": M, "N": N, "K": K,
            "stride_am": sam, "stride_ak": sak, "stride_bk": sbk, "stride_bn": sbn, **_scales(scaling)}


def _c_witness(c: Mapping[str, Any]) -> Witness:
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]

    def element(store, pid, iters, lanes):
        pm, pn = tile_coords(pid[0], c)
        return pm * bm + lanes[0], pn * bn + lanes[1]

    return Witness(writer=lambda m, n: Writer(pid=(tile_of(m / bm, n / bn, c),), lanes=(m % bm, n % bn)),
                   element=element)


def _workspace_witness(c: Mapping[str, Any]) -> Witness:
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]

    def element(store, pid, iters, lanes):
        pm, pn = tile_coords(pid[0], c)
        return pid[1], pm * bm + lanes[0], pn * bn + lanes[1]

    return Witness(writer=lambda s, m, n: Writer(pid=(tile_of(m / bm, n / bn, c), s), lanes=(m % bm, n % bn)),
                   element=element)


def tiled(constexprs: list[dict]) -> LaunchContract:
    """One contract per SCALING (the scales' shapes depend on it): constexprs share SCALING."""
    scaling = constexprs[0]["SCALING"]
    return LaunchContract(
        kernel=K_.scaled_mm_kernel, name=f"scaled_mm_kernel[{scaling}]",
        args={**_operands(scaling), "c_ptr": Tensor((M, N), (N, 1), output=True), "bias_ptr": Tensor((N,), (sbias,)),
              "stride_cm": N, "stride_cn": 1, "stride_bias": sbias},
        constexprs=constexprs, grid=lambda c: (cdiv(M, c["BLOCK_M"]) * cdiv(N, c["BLOCK_N"]),),
        domain=DOMAIN + SCALE_DOMAIN[scaling],
        bounded_shapes=_bounded(scaling), witnesses={"c_ptr": _c_witness})


def splitk(constexprs: list[dict]) -> LaunchContract:
    """One contract per (SCALING, BLOCK_K)."""
    scaling, bk = constexprs[0]["SCALING"], constexprs[0]["BLOCK_K"]
    kps = cdiv(cdiv(K, S), bk) * bk
    return LaunchContract(
        kernel=K_.scaled_mm_splitk_kernel, name=f"scaled_mm_splitk_kernel[{scaling}]",
        args={**_operands(scaling), "p_ptr": Tensor((S, M, N), (M * N, N, 1), output=True), "K_PER_SPLIT": kps},
        constexprs=constexprs, grid=lambda c: (cdiv(M, c["BLOCK_M"]) * cdiv(N, c["BLOCK_N"]), S),
        domain=DOMAIN + SCALE_DOMAIN[scaling] + [S >= 1, S <= 16, (S - 1) * kps < K],
        bounded_shapes=[{**s, "SPLIT_K": sk} for s in _bounded(scaling) for sk in (1, 2, 3)
                        if (sk - 1) * (-(-(-(-s["K"] // sk)) // bk) * bk) < s["K"]],
        witnesses={"p_ptr": _workspace_witness})


def _meta(scaling: str, is_int: bool, bm: int = 16, bn: int = 32, bk: int = 32, group_m: int = 4) -> dict:
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, SCALING=scaling, IS_INT=is_int)


def for_config(variant: str, config: Mapping[str, Any], attrs: Mapping[str, Any]) -> list[LaunchContract]:
    """The contracts of exactly the kernels and constexprs ``config`` launches."""
    from ...matmul.contract import reduce

    meta = _meta(attrs["scaling"], attrs["format"] == "int8", config["BLOCK_M"], config["BLOCK_N"],
                 config["BLOCK_K"], config["GROUP_M"])
    epi = dict(HAS_BIAS=bool(attrs["bias"]), ACTIVATION=attrs["activation"])
    if variant == "tiled":
        return [tiled([{**meta, **epi, "EMULATE": False}])]
    return [splitk([meta]), reduce([{"BLOCK": 1024, "EMULATE": False, **epi}])]


_EPI = dict(HAS_BIAS=True, ACTIVATION="gelu", EMULATE=False)
CONTRACTS = [
    tiled([{**_meta("tensor", True), **_EPI}]),
    tiled([{**_meta("row", False), **_EPI}]),
    tiled([{**_meta("block", False), **_EPI}, {**_meta("block", False, 32, 16, 128), **_EPI}]),
    splitk([_meta("block", False)]),
    splitk([_meta("row", True)]),
]
