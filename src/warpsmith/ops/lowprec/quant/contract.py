"""Launch contracts of the quantization kernels (kernel.py), for ``warpsmith prove``.

``quant_rows_kernel`` (quantize, and quantize_static with STATIC; per tensor also AMAX_ONLY, then
:func:`amax_scale_contract`'s kernel, then STATIC): x (M, N) with any row stride and unit column stride; the norm weight (N,)
contiguous; q (M, N) and the scales (M, G) contiguous (G = 1 per row, ceil(N / 128) per block), as the
launcher allocates them; grid (M,). ``dequant_rows_kernel``: see :func:`dequant_contract`.
``stochastic_round_kernel``: x and y contiguous (n,), grid
cdiv(n, BLOCK). The domains are the launchers' preconditions, from their one definition in
limits.py (:func:`~.limits.columns_fit`, :func:`~.limits.elements_fit`). The
GPU build is proved (``EMULATE`` off: the interpreter's emulation computes bytes, never addresses).
"""
from __future__ import annotations

from typing import Any, Mapping

from ....core.opspec import Problem
from ....verify.symbolic import LaunchContract, Tensor, cdiv, sizes
from . import kernel as K_
from .limits import AMAX_BLOCK, columns_fit, elements_fit
from .reference import BLOCK as GROUP

M, N, n = sizes("M N n")
sxm, sqm = sizes("stride_xm stride_qm")
MAX_ROWS = 2**31 - 1  # the grid's first dimension


def rows_contract(granularity: str, consts: list[dict]) -> LaunchContract:
    """quant_rows_kernel for one granularity; every entry of ``consts`` has the same BLOCK (and STATIC,
    AMAX_ONLY). ``AMAX_ONLY`` (per tensor's first pass) writes the (M,) workspace of row amaxes as s, not q."""
    block = consts[0]["BLOCK"]
    groups = 1 if granularity == "row" else cdiv(N, GROUP)
    static = consts[0]["STATIC"]  # the scale is given (static_ptr); s_ptr is never written
    amax_only = consts[0].get("AMAX_ONLY", False)
    kind = "amax" if amax_only else "static" if static else granularity
    args = {"x_ptr": Tensor((M, N), (sxm, 1)), "w_ptr": Tensor((N,), (1,)),
            "q_ptr": Tensor((M, N), (N, 1), output=not amax_only),
            "s_ptr": Tensor((M, groups), (groups, 1), output=not static),
            "static_ptr": Tensor((1,), (1,)),
            "N": N, "stride_xm": sxm, "stride_qm": N, "stride_sm": groups, "eps": 0, "QMAX": 0}
    shapes = [{"M": 1, "N": 1, "stride_xm": 1}, {"M": 3, "N": block + 1, "stride_xm": block + 3},
              {"M": 2, "N": 2 * block + 37, "stride_xm": 2 * block + 37}]
    return LaunchContract(kernel=K_.quant_rows_kernel, name=f"quant_rows_kernel[{kind}, BLOCK={block}]",
                          args=args, constexprs=consts, grid=(M,), domain=[M <= MAX_ROWS, columns_fit(N, block)],
                          bounded_shapes=shapes)


def amax_scale_contract(block: int) -> LaunchContract:
    """amax_scale_kernel: the (M,) workspace of row amaxes (contiguous, as the launcher allocates it) to
    the (1,) scale; grid (1,)."""
    args = {"a_ptr": Tensor((M,), (1,)), "s_ptr": Tensor((1,), (1,), output=True), "M": M, "QMAX": 0}
    return LaunchContract(kernel=K_.amax_scale_kernel, name=f"amax_scale_kernel[BLOCK={block}]", args=args,
                          constexprs=[{"BLOCK": block}], grid=(1,), domain=[M <= MAX_ROWS],
                          bounded_shapes=[{"M": 1}, {"M": block + 1}, {"M": 3 * block - 5}])


def dequant_contract(scaling: str, consts: list[dict]) -> LaunchContract:
    """dequant_rows_kernel: q (M, N) any row stride, unit column stride; the scale (1,), (M,) with any
    stride, or (M, ceil(N/128)) with any row stride; out (M, N) contiguous."""
    block = consts[0]["BLOCK"]
    ssm = sizes("stride_sm")[0]
    scale = {"tensor": Tensor((1,), (1,)), "row": Tensor((M,), (ssm,)),
             "block": Tensor((M, cdiv(N, GROUP)), (ssm, 1))}[scaling]
    args = {"q_ptr": Tensor((M, N), (sqm, 1)), "s_ptr": scale, "out_ptr": Tensor((M, N), (N, 1), output=True),
            "N": N, "stride_qm": sqm, "stride_sm": 0 if scaling == "tensor" else ssm, "stride_om": N}
    shapes = [{"M": 1, "N": 1, "stride_qm": 1, "stride_sm": 1}, {"M": 3, "N": block + 1, "stride_qm": block + 3,
                                                                 "stride_sm": 2 + block // GROUP},
              {"M": 2, "N": 2 * block + 37, "stride_qm": 2 * block + 37, "stride_sm": 3 + 2 * block // GROUP}]
    return LaunchContract(kernel=K_.dequant_rows_kernel, name=f"dequant_rows_kernel[{scaling}, BLOCK={block}]",
                          args=args, constexprs=consts, grid=(M,), domain=[M <= MAX_ROWS, columns_fit(N, block)],
                          bounded_shapes=shapes)


def dequant_meta(scaling: str, block: int) -> dict:
    return {"GROUP": GROUP if scaling == "block" else 0, "BLOCK": block, "TENSOR": scaling == "tensor",
            "EMULATE": False}


def stochastic_contract(consts: list[dict]) -> LaunchContract:
    args = {"x_ptr": Tensor((n,), (1,)), "y_ptr": Tensor((n,), (1,), output=True), "n": n, "seed": 0}
    return LaunchContract(kernel=K_.stochastic_round_kernel,
                          name=f"stochastic_round_kernel[BLOCK={consts[0]['BLOCK']}]", args=args, constexprs=consts,
                          grid=lambda c: (cdiv(n, c["BLOCK"]),), domain=[elements_fit(n)],
                          bounded_shapes=[{"n": 1}, {"n": consts[0]["BLOCK"] + 1}, {"n": 3 * consts[0]["BLOCK"] - 5}])


def rows_meta(granularity: str, block: int, norm: bool, fmt: str, static: bool = False,
              amax_only: bool = False) -> dict:
    return {"GROUP": GROUP if granularity == "block" else 0, "BLOCK": block, "NORM": norm, "STATIC": static,
            "FMT": fmt, "EMULATE": False, "AMAX_ONLY": amax_only}


def tensor_contracts(block: int, norm: bool, fmt: str) -> list[LaunchContract]:
    """Per-tensor quantization's three launches (variant.QuantizeRows.launch)."""
    return [rows_contract("row", [rows_meta("row", block, norm, fmt, amax_only=True)]),
            amax_scale_contract(AMAX_BLOCK),
            rows_contract("row", [rows_meta("row", block, norm, fmt, static=True)])]


def stochastic_meta(block: int, target: str) -> dict:
    return {"FMT": "bf16" if target == "bf16" else "e4m3", "BLOCK": block, "EMULATE": False}


def for_config(problem: Problem, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contract of exactly the kernel and constexprs ``config`` launches for ``problem``."""
    a = problem.attrs
    if problem.op == "stochastic_round":
        return [stochastic_contract([stochastic_meta(config["BLOCK"], a["target"])])]
    if problem.op == "dequantize":
        return [dequant_contract(a["scaling"], [dequant_meta(a["scaling"], config["BLOCK"])])]
    if problem.op == "quantize_static":
        return [rows_contract("row", [rows_meta("row", config["BLOCK"], False, a["format"], static=True)])]
    if a["granularity"] == "tensor":
        return tensor_contracts(config["BLOCK"], bool(a["norm"]), a["format"])
    return [rows_contract(a["granularity"], [rows_meta(a["granularity"], config["BLOCK"], bool(a["norm"]), a["format"])])]


CONTRACTS = [
    rows_contract("row", [rows_meta("row", 256, False, "e4m3"), rows_meta("row", 256, True, "int8")]),
    rows_contract("block", [rows_meta("block", 128, False, "e4m3"), rows_meta("block", 128, True, "e5m2")]),
    rows_contract("block", [rows_meta("block", 512, True, "e4m3")]),
    stochastic_contract([stochastic_meta(1024, "bf16"), stochastic_meta(1024, "e4m3")]),
    rows_contract("row", [rows_meta("row", 256, False, "e4m3", static=True)]),
    *tensor_contracts(256, True, "e4m3"),
    dequant_contract("tensor", [dequant_meta("tensor", 256)]),
    dequant_contract("row", [dequant_meta("row", 256)]),
    dequant_contract("block", [dequant_meta("block", 128), dequant_meta("block", 512)]),
]
