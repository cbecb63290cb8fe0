"""Launch contracts of the int4 GEMM kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

The formats' shapes are built into the sizes: ``N = 8 N8`` (N8 packed words per row) and
``K = NG * GROUP`` (NG groups), so every contract holds exactly for the shapes the formats allow
(the variants' ``PACKED`` guard). x has any non-negative strides; the packed tensors, scales, bias
and y are contiguous, as the launcher passes them; with ``ACT_ORDER``, ``g_idx`` (K,) is declared
to hold groups in ``[0, NG)`` (the op checks it), under which the gathered zero and scale addresses
are proved in bounds. The unpacking index math (AWQ's ``n // 8`` word with its interleaved nibble,
GPTQ's ``k // 8`` row) is part of every load's address and proved in bounds for all sizes in the
domain: ``1 <= M <= 2^16``, ``1 <= N8 <= 2^13`` (N <= 65536), ``1 <= NG`` with ``K <= 2^16``, and the
launcher's 32-bit offsets.

Writer witnesses: y[m, n] of the GEMM kernel is lane (m % BLOCK_M, n % BLOCK_N) of program
(n // BLOCK_N, m // BLOCK_M); the GEMV kernel writes y[m, n] (one slice) or its partial p[m, s, n]
from program (n // BLOCK_N, s, m), lane n % BLOCK_N; the reduction y[m, n] from program
(n // BLOCK, m), lane n % BLOCK.
"""
from __future__ import annotations

from typing import Any, Mapping

from ....verify.symbolic import LaunchContract, Split, Tensor, Witness, Writer, cdiv, sizes
from . import kernel as K_
from .limits import INDEX_LIMIT, MAX_BLOCK

M, N8, NG, sxm, sxk = sizes("M N8 NG stride_xm stride_xk")
N = 8 * N8


def _domain(group: int) -> list[Any]:
    k = NG * group
    # the launcher's 32-bit indexing precondition (Int4*._operands)
    return [M <= 2**16, N8 <= 2**13, k <= 2**16,
            (M + MAX_BLOCK) * sxm + (k + MAX_BLOCK) * sxk < INDEX_LIMIT,
            (k + MAX_BLOCK) * (N + MAX_BLOCK) < INDEX_LIMIT, (M + MAX_BLOCK) * (N + MAX_BLOCK) < INDEX_LIMIT]


def _bounded(group: int) -> list[dict[str, int]]:
    out = []
    for m, n8, ng in ((1, 1, 1), (19, 5, 3), (3, 13, 2)):
        out.append({"M": m, "N8": n8, "NG": ng, "stride_xm": ng * group, "stride_xk": 1})
    return out


def _args(c: Mapping[str, Any]) -> dict[str, Any]:
    g = c["GROUP"]
    k = NG * g
    qweight = Tensor((k, N8), (N8, 1)) if c["FORMAT"] == "awq" else Tensor((NG * (g // 8), N), (N, 1))
    return {
        "x_ptr": Tensor((M, k), (sxm, sxk)), "qw_ptr": qweight, "qz_ptr": Tensor((NG, N8), (N8, 1)),
        "s_ptr": Tensor((NG, N), (N, 1)),
        "gidx_ptr": Tensor((k,), (1,), values=(0, NG)) if c["ACT_ORDER"] else Tensor((1,), (1,)),
        "bias_ptr": Tensor((N,), (1,)),
        "M": M, "N": N, "K": k, "num_groups": NG, "stride_xm": sxm, "stride_xk": sxk,
    }


def gemm(constexprs: list[dict]) -> LaunchContract:
    """One contract per (FORMAT, GROUP, ACT_ORDER): pass constexprs sharing them."""
    c0 = constexprs[0]

    def witness(c):
        bm, bn = c["BLOCK_M"], c["BLOCK_N"]
        return Witness(writer=lambda m, n: Writer(pid=(n / bn, m / bm), lanes=(m % bm, n % bn)),
                       element=lambda store, pid, iters, lanes: (pid[1] * bm + lanes[0], pid[0] * bn + lanes[1]))

    return LaunchContract(
        kernel=K_.int4_matmul_gemm_kernel, name=f"int4_matmul_gemm_kernel[{_tag(c0)}]",
        args={**_args(c0), "y_ptr": Tensor((M, N), (N, 1), output=True)}, constexprs=constexprs,
        grid=lambda c: (cdiv(N, c["BLOCK_N"]), cdiv(M, c["BLOCK_M"])), domain=_domain(c0["GROUP"]),
        bounded_shapes=_bounded(c0["GROUP"]), witnesses={"y_ptr": witness})


def gemv(constexprs: list[dict]) -> LaunchContract:
    """One contract per (FORMAT, GROUP, ACT_ORDER, BLOCK_K, SPLIT_K)."""
    c0 = constexprs[0]
    split, bk = c0["SPLIT_K"], c0["BLOCK_K"]
    k = NG * c0["GROUP"]
    kps = cdiv(cdiv(k, split), bk) * bk
    if split == 1:
        outs = {"y_ptr": Tensor((M, N), (N, 1), output=True), "p_ptr": Tensor((1,), (1,))}

        def witness(c):
            bn = c["BLOCK_N"]
            return Witness(writer=lambda m, n: Writer(pid=(n / bn, 0, m), lanes=(n % bn,)),
                           element=lambda store, pid, iters, lanes: (pid[2], pid[0] * bn + lanes[0]))
        name = "y_ptr"
    else:
        outs = {"y_ptr": Tensor((1,), (1,)), "p_ptr": Tensor((M, split, N), (split * N, N, 1), output=True)}

        def witness(c):
            bn = c["BLOCK_N"]
            return Witness(writer=lambda m, s, n: Writer(pid=(n / bn, s, m), lanes=(n % bn,)),
                           element=lambda store, pid, iters, lanes: (pid[2], pid[1], pid[0] * bn + lanes[0]))
        name = "p_ptr"
    return LaunchContract(
        kernel=K_.int4_matmul_gemv_kernel, name=f"int4_matmul_gemv_kernel[{_tag(c0)},split={split}]",
        args={**_args(c0), **outs, "K_PER_SPLIT": kps}, constexprs=constexprs,
        grid=lambda c: (cdiv(N, c["BLOCK_N"]), split, M),
        # the validity predicate (Int4Gemv.invalid): every slice non-empty
        domain=_domain(c0["GROUP"]) + [(split - 1) * kps < k, M * split * N < INDEX_LIMIT],
        bounded_shapes=[s for s in _bounded(c0["GROUP"])
                        if (split - 1) * (-(-(-(-s["NG"] * c0["GROUP"] // split)) // bk) * bk) < s["NG"] * c0["GROUP"]],
        split=Split("x_ptr", dim=1, axis=1) if split > 1 else None, witnesses={name: witness})


def reduce(constexprs: list[dict]) -> LaunchContract:
    split = constexprs[0]["SPLIT_K"]
    blk = constexprs[0]["BLOCK"]
    return LaunchContract(
        kernel=K_.int4_matmul_reduce_kernel, name=f"int4_matmul_reduce_kernel[split={split}]",
        args={"p_ptr": Tensor((M, split, N), (split * N, N, 1)), "bias_ptr": Tensor((N,), (1,)),
              "y_ptr": Tensor((M, N), (N, 1), output=True), "N": N},
        constexprs=constexprs, grid=lambda c: (cdiv(N, c["BLOCK"]), M), domain=[M <= 2**16, N8 <= 2**13, M * split * N < INDEX_LIMIT],
        bounded_shapes=[{"M": 3, "N8": 5}],
        witnesses={"y_ptr": Witness(writer=lambda m, n: Writer(pid=(n / blk, m), lanes=(n % blk,)),
                                    element=lambda store, pid, iters, lanes: (pid[1], pid[0] * blk + lanes[0]))})


def _tag(c: Mapping[str, Any]) -> str:
    return f"{c['FORMAT']},G={c['GROUP']}{',act_order' if c['ACT_ORDER'] else ''}"


def _fmt(attrs: Mapping[str, Any]) -> dict:
    return dict(FORMAT=attrs["format"], GROUP=attrs["group_size"], ACT_ORDER=bool(attrs["act_order"]),
                HAS_BIAS=bool(attrs["bias"]), EMULATE=False)


def for_config(variant: str, config: Mapping[str, Any], attrs: Mapping[str, Any]) -> list[LaunchContract]:
    """The contracts that cover exactly the kernels and constexprs ``config`` launches."""
    fmt = _fmt(attrs)
    if variant == "gemm":
        return [gemm([{**fmt, "BLOCK_M": config["BLOCK_M"], "BLOCK_N": config["BLOCK_N"],
                       "BLOCK_K": config["BLOCK_K"]}])]
    split = config["SPLIT_K"]
    out = [gemv([{**fmt, "BLOCK_N": config["BLOCK_N"], "BLOCK_K": config["BLOCK_K"], "SPLIT_K": split}])]
    if split > 1:
        out.append(reduce([{"SPLIT_K": split, "HAS_BIAS": fmt["HAS_BIAS"], "BLOCK": 256, "EMULATE": False}]))
    return out


_AWQ = dict(FORMAT="awq", GROUP=32, ACT_ORDER=False, HAS_BIAS=True, EMULATE=False)
_GPTQ = dict(FORMAT="gptq", GROUP=32, ACT_ORDER=True, HAS_BIAS=True, EMULATE=False)
CONTRACTS = [
    gemm([{**_AWQ, "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}]),
    gemm([{**_GPTQ, "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}]),
    gemv([{**_AWQ, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1}]),
    gemv([{**_GPTQ, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 2}]),
    reduce([{"SPLIT_K": 2, "HAS_BIAS": True, "BLOCK": 256, "EMULATE": False}]),
]
