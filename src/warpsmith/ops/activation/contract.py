"""Launch contracts of the gated activation kernels, for ``warpsmith prove`` (verify/symbolic).

Inputs (M, H) with any non-negative row stride and unit column stride; outputs contiguous
(M, H). The packed form passes an (M, 2H) tensor as its two halves, each a (M, H) view with row
stride 2H (inputs, and the backward's packed output: proving each half covered and race-free
covers the whole (M, 2H) gradient). Sizes: rows and columns with their block overshoot stay
below 2^31 (rows are indexed in int64, columns and tile numbers in int32; the validity predicate
refuses more than 2^31 tiles).
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import LaunchContract, Tensor, cdiv, sizes
from . import kernel as K_
from .limits import MAX_BLOCK_H, MAX_BLOCK_M

M, H, P = sizes("M H PROGRAMS")
s_dy, s_g, s_u = sizes("stride_dym stride_gm stride_um")
DOMAIN = [M + MAX_BLOCK_M < 2**31, H + MAX_BLOCK_H < 2**31]
_SHAPES = [(1, 1), (7, 37), (3, 70)]  # bounded checks enumerate every program: keep them small


def _bounded(packed: bool, persistent: bool) -> list[dict]:
    out = []
    for m, h in _SHAPES:
        sh = {"M": m, "H": h, "stride_dym": h + 3, "stride_gm": h, "stride_um": h + 1}
        if persistent:
            sh["PROGRAMS"] = 3
        out.append(sh)
    return out


def _operands(backward: bool, packed: bool) -> dict[str, Any]:
    row = (lambda s: 2 * H) if packed else (lambda s: s)
    args: dict[str, Any] = {"g_ptr": Tensor((M, H), (row(s_g), 1)), "u_ptr": Tensor((M, H), (row(s_u), 1)),
                            "M": M, "H": H, "stride_gm": row(s_g), "stride_um": row(s_u)}
    if backward:
        out_row = 2 * H if packed else H
        args |= {"dy_ptr": Tensor((M, H), (s_dy, 1)), "stride_dym": s_dy,
                 "dg_ptr": Tensor((M, H), (out_row, 1), output=True),
                 "du_ptr": Tensor((M, H), (out_row, 1), output=True), "stride_dgm": out_row, "stride_dum": out_row}
    else:
        args |= {"y_ptr": Tensor((M, H), (H, 1), output=True), "stride_ym": H}
    return args


def contract(backward: bool, packed: bool, persistent: bool, constexprs: list[dict]) -> LaunchContract:
    """One contract per (BLOCK_M, BLOCK_H) when persistent (the int32 tile count bounds the domain)."""
    kernels = {(False, False): K_.gated_fwd_kernel, (False, True): K_.gated_fwd_persistent_kernel,
               (True, False): K_.gated_bwd_kernel, (True, True): K_.gated_bwd_persistent_kernel}
    kernel = kernels[(backward, persistent)]
    domain = list(DOMAIN)
    if persistent:
        bm, bh = constexprs[0]["BLOCK_M"], constexprs[0]["BLOCK_H"]
        domain += [P <= 8 * 264, cdiv(M, bm) * cdiv(H, bh) < 2**31]
        grid: Any = (P,)
    else:
        grid = lambda c: (cdiv(M, c["BLOCK_M"]), cdiv(H, c["BLOCK_H"]))  # noqa: E731
    name = kernel.fn.__name__ if hasattr(kernel, "fn") else "gated"
    return LaunchContract(kernel=kernel, name=f"{name}[{'packed' if packed else 'separate'}]",
                          args=_operands(backward, packed), constexprs=constexprs, grid=grid, domain=domain,
                          bounded_shapes=_bounded(packed, persistent))


def for_config(backward: bool, packed: bool, act: str, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contract of exactly the kernel and constexprs ``config`` launches (GPU build: no emulation)."""
    meta = {"BLOCK_M": config["BLOCK_M"], "BLOCK_H": config["BLOCK_H"], "ACT": act, "EMULATE": False}
    return [contract(backward, packed, bool(config["PROGRAMS_PER_SM"]), [meta])]


def _meta(bm: int, bh: int, act: str) -> dict:
    return {"BLOCK_M": bm, "BLOCK_H": bh, "ACT": act, "EMULATE": False}


CONTRACTS = [
    contract(False, False, False, [_meta(4, 32, "silu"), _meta(1, 128, "gelu_tanh")]),
    contract(False, True, True, [_meta(2, 64, "gelu")]),
    contract(True, False, False, [_meta(4, 32, "gelu")]),
    contract(True, True, True, [_meta(2, 16, "silu")]),
]
