"""Launch contracts of the RoPE kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

q, k (B, H, S, D), cos, sin and positions have *any* non-negative strides (a transposed q, a
batch-broadcast table: stride 0); the outputs are contiguous, as the launcher allocates them. cos
and sin are a (P, R2) table (batch stride 0) or per-token (B, S, R2). Positions are declared with
``values`` spanning all of int64: the kernel masks its gather with ``0 <= position < P``, so the
table reads are proved in bounds for *any* position values (an out-of-range position yields NaN
rotary dims, never a stray read). Sizes: 2 R2 <= D, and every int32 index (tokens, heads, pairs,
tile numbers) with its block overshoot below 2^31.
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import LaunchContract, Tensor, cdiv, sizes
from . import kernel as K_

B, S, HQ, HK, R2, D, P, PROGS = sizes("B S HQ HK R2 D P PROGRAMS")
sqb, sqh, sqs, sqd, skb, skh, sks, skd = sizes("stride_qb stride_qh stride_qs stride_qd "
                                               "stride_kb stride_kh stride_ks stride_kd")
scb, scs, scr, spb, sps = sizes("stride_cb stride_cs stride_cr stride_pb stride_ps")
DOMAIN = [B <= 65535, S <= 2**24, HQ <= 4096, HK <= 4096, 2 * R2 <= D, D <= 2**14, P <= 2**30]
_ANY_INT64 = (-(2**63), 2**63)


def _bounded(per_token: bool, persistent: bool) -> list[dict]:
    out = []
    for b, s, hq, hk, r2, d, p in ((1, 1, 1, 1, 1, 2, 1), (2, 3, 3, 1, 3, 9, 5), (1, 5, 2, 2, 4, 8, 7)):
        sh = {"B": b, "S": s, "HQ": hq, "HK": hk, "R2": r2, "D": d, "P": s if per_token else p,
              # q as Hugging Face makes it: (B, S, H, D) viewed as (B, H, S, D)
              "stride_qb": s * hq * d, "stride_qh": d, "stride_qs": hq * d, "stride_qd": 1,
              "stride_kb": hk * s * d, "stride_kh": s * d, "stride_ks": d, "stride_kd": 1,
              "stride_cb": s * r2 if per_token else 0, "stride_cs": r2, "stride_cr": 1,
              "stride_pb": s, "stride_ps": 1}
        if persistent:
            sh["PROGRAMS"] = 3
        out.append(sh)
    return out


def contract(per_token: bool, persistent: bool, constexprs: list[dict]) -> LaunchContract:
    """The contract of rope_kernel (or rope_persistent_kernel) for one cos/sin form."""
    table = (Tensor((B, S, R2), (scb, scs, scr)) if per_token else Tensor((P, R2), (scs, scr)))
    rows = S if per_token else P
    args: dict[str, Any] = {
        "q_ptr": Tensor((B, HQ, S, D), (sqb, sqh, sqs, sqd)), "k_ptr": Tensor((B, HK, S, D), (skb, skh, sks, skd)),
        "qo_ptr": Tensor((B, HQ, S, D), (HQ * S * D, S * D, D, 1), output=True),
        "ko_ptr": Tensor((B, HK, S, D), (HK * S * D, S * D, D, 1), output=True),
        "cos_ptr": table, "sin_ptr": table,
        "pos_ptr": Tensor((B, S), (spb, sps), values=_ANY_INT64),
        "S": S, "HQ": HQ, "HK": HK, "R2": R2, "D": D, "P": rows,
        "stride_qb": sqb, "stride_qh": sqh, "stride_qs": sqs, "stride_qd": sqd,
        "stride_kb": skb, "stride_kh": skh, "stride_ks": sks, "stride_kd": skd,
        "stride_qob": HQ * S * D, "stride_qoh": S * D, "stride_qos": D, "stride_qod": 1,
        "stride_kob": HK * S * D, "stride_koh": S * D, "stride_kos": D, "stride_kod": 1,
        "stride_cb": scb if per_token else 0, "stride_cs": scs, "stride_cr": scr,
        "stride_sb": scb if per_token else 0, "stride_ss": scs, "stride_sr": scr,
        "stride_pb": spb, "stride_ps": sps,
    }
    name = f"rope{'_persistent' if persistent else ''}_kernel[{'per_token' if per_token else 'table'}]"
    if persistent:
        bs, bh = constexprs[0]["BLOCK_S"], constexprs[0]["BLOCK_H"]  # one contract per (BLOCK_S, BLOCK_H)
        per_batch = cdiv(S, bs) * cdiv(HQ + HK, bh)  # < 2^31: the validity predicate's int32 tile numbers
        return LaunchContract(kernel=K_.rope_persistent_kernel, name=name, args=args, constexprs=constexprs,
                              grid=(PROGS, B), domain=DOMAIN + [PROGS <= 8 * 264, per_batch < 2**31],
                              bounded_shapes=_bounded(per_token, True))
    return LaunchContract(kernel=K_.rope_kernel, name=name, args=args, constexprs=constexprs,
                          grid=lambda c: (cdiv(S, c["BLOCK_S"]), cdiv(HQ + HK, c["BLOCK_H"]), B),
                          domain=DOMAIN, bounded_shapes=_bounded(per_token, False))


def _meta(bs: int, bh: int, br: int, layout: str, has_pos: bool, backward: bool) -> dict:
    return dict(BLOCK_S=bs, BLOCK_H=bh, BLOCK_R=br, LAYOUT=layout, HAS_POS=has_pos, BACKWARD=backward, EMULATE=False)


def for_config(problem: Any, config: Mapping[str, Any], backward: bool) -> list[LaunchContract]:
    """The contract of exactly the kernel and constexprs ``config`` launches (GPU build)."""
    meta = _meta(config["BLOCK_S"], config["BLOCK_H"], config["BLOCK_R"], problem.attrs["layout"],
                 problem.attrs["positions"] == "given", backward)
    return [contract(problem.attrs["cos_sin"] == "per_token", bool(config["PROGRAMS_PER_SM"]), [meta])]


CONTRACTS = [
    contract(False, False, [_meta(2, 4, 8, "neox", True, False), _meta(4, 2, 4, "gptj", False, True)]),
    contract(True, False, [_meta(2, 2, 4, "neox", False, False)]),
    contract(False, True, [_meta(2, 2, 4, "gptj", True, False)]),
]
