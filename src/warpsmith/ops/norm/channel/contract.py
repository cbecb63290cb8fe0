"""Launch contracts of the channel normalization kernels, for ``warpsmith prove``.

x and dy are (N, C, S) with any positive strides (NCHW gives (C S, S, 1), channels-last (S C, 1, C));
y and dx are allocated contiguous or channels-last (``channels_last``); the per-plane tensors
(mean, rstd, M2, the gradient sums, k1, k2) are contiguous (N, C) fp32. Sizes: N, C <= 65535
(grid axes), S + blocks < 2^31 (positions are int32; plane offsets int64).
"""
from __future__ import annotations

from typing import Any, Mapping

from ....verify.symbolic import LaunchContract, Tensor, cdiv, sizes
from . import kernel as K_

N, C, S = sizes("N C S")
SX = sizes("stride_xn stride_xc stride_xs")
SD = sizes("stride_dyn stride_dyc stride_dys")
DOMAIN = [N <= 65535, C <= 65535, S <= 2**31 - 2**14]


def _layout(channels_last: bool) -> tuple:
    return (S * C, 1, C) if channels_last else (C * S, S, 1)


def _bounded(extra: dict | None = None) -> list[dict]:
    out = []
    for n, c, s in ((1, 1, 1), (2, 3, 37), (3, 2, 5)):
        out.append({"N": n, "C": c, "S": s, "stride_xn": c * s, "stride_xc": 1, "stride_xs": c,
                    "stride_dyn": c * s, "stride_dyc": s, "stride_dys": 1, **(extra or {})})
    return out


def _plane(output: bool = False) -> Tensor:
    return Tensor((N, C), (C, 1), output=output)


def stats(consts: list[dict]) -> LaunchContract:
    args = {"x_ptr": Tensor((N, C, S), tuple(SX)), "mean_ptr": _plane(True), "m2_ptr": _plane(True),
            "C": C, "S": S, "stride_xn": SX[0], "stride_xc": SX[1], "stride_xs": SX[2]}
    return LaunchContract(kernel=K_.plane_stats_kernel, name="plane_stats_kernel", args=args, constexprs=consts,
                          grid=(C, N), domain=DOMAIN, bounded_shapes=_bounded())


def apply(consts: list[dict], channels_last: bool) -> LaunchContract:
    sy = _layout(channels_last)
    args = {"x_ptr": Tensor((N, C, S), tuple(SX)), "y_ptr": Tensor((N, C, S), sy, output=True),
            "mean_ptr": _plane(), "scale_ptr": _plane(), "shift_ptr": Tensor((C,), (1,)), "C": C, "S": S,
            "stride_xn": SX[0], "stride_xc": SX[1], "stride_xs": SX[2],
            "stride_yn": sy[0], "stride_yc": sy[1], "stride_ys": sy[2]}
    return LaunchContract(kernel=K_.channel_apply_kernel, name="channel_apply_kernel", args=args, constexprs=consts,
                          grid=lambda c: (cdiv(S, c["BLOCK"]), C, N), domain=DOMAIN, bounded_shapes=_bounded())


def grad_sums(consts: list[dict]) -> LaunchContract:
    args = {"dy_ptr": Tensor((N, C, S), tuple(SD)), "x_ptr": Tensor((N, C, S), tuple(SX)), "mean_ptr": _plane(),
            "rstd_ptr": _plane(), "a_ptr": _plane(True), "b_ptr": _plane(True), "C": C, "S": S,
            "stride_dyn": SD[0], "stride_dyc": SD[1], "stride_dys": SD[2],
            "stride_xn": SX[0], "stride_xc": SX[1], "stride_xs": SX[2]}
    return LaunchContract(kernel=K_.plane_grad_sums_kernel, name="plane_grad_sums_kernel", args=args,
                          constexprs=consts, grid=(C, N), domain=DOMAIN, bounded_shapes=_bounded())


def grad_apply(consts: list[dict], channels_last: bool) -> LaunchContract:
    sd = _layout(channels_last)
    args = {"dy_ptr": Tensor((N, C, S), tuple(SD)), "x_ptr": Tensor((N, C, S), tuple(SX)),
            "dx_ptr": Tensor((N, C, S), sd, output=True), "mean_ptr": _plane(), "rstd_ptr": _plane(),
            "w_ptr": Tensor((C,), (1,)), "k1_ptr": _plane(), "k2_ptr": _plane(), "C": C, "S": S,
            "stride_dyn": SD[0], "stride_dyc": SD[1], "stride_dys": SD[2],
            "stride_xn": SX[0], "stride_xc": SX[1], "stride_xs": SX[2],
            "stride_dxn": sd[0], "stride_dxc": sd[1], "stride_dxs": sd[2]}
    return LaunchContract(kernel=K_.channel_grad_apply_kernel, name="channel_grad_apply_kernel", args=args,
                          constexprs=consts, grid=lambda c: (cdiv(S, c["BLOCK"]), C, N), domain=DOMAIN,
                          bounded_shapes=_bounded())


def for_config(variant: Any, problem: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contracts of exactly the kernels and constexprs ``config`` launches."""
    cl = bool(problem.attrs["channels_last"])
    stats_used = variant.spec.uses_batch_stats(problem.attrs)
    if variant.backward:
        return [grad_sums([{"BLOCK": config["BLOCK_S"]}]),
                grad_apply([{"BLOCK": config["BLOCK"], "HAS_W": bool(problem.attrs["weight"]), "EMULATE": False}], cl)]
    out = [stats([{"BLOCK": config["BLOCK_S"]}])] if stats_used else []
    return out + [apply([{"BLOCK": config["BLOCK"], "HAS_SHIFT": bool(problem.attrs["bias"]), "EMULATE": False}], cl)]


CONTRACTS = [
    stats([{"BLOCK": 64}]),
    apply([{"BLOCK": 64, "HAS_SHIFT": True, "EMULATE": False}], True),
    grad_sums([{"BLOCK": 64}]),
    grad_apply([{"BLOCK": 64, "HAS_W": True, "EMULATE": False}], False),
]
