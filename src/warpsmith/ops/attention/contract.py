"""Launch contracts of the attention kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

Padded layout: q (B, H*G, Sq, D), k (B, H, Sk, D), v (B, H, Sk, Dv), dout like out, and an
optional bias (B, H*G, Sq, Sk), each with *any* positive strides and a unit stride along the head
dim (the launchers copy otherwise); out, lse, delta and the gradients are contiguous, as the
launchers allocate them. Packed layout: q (Tq, H*G, D), k (Tk, H, D), ... with ``cu_seqlens_q/k``
declared to hold non-decreasing values in [0, Tq] / [0, Tk] (``monotone``: the public op checks
it; in-bounds and int32 hold without it, race freedom needs it), and ``Sq``/``Sk`` the longest
sequence (at most the totals).

Sizes: 1 <= Sq, Sk, Tq, Tk <= 2^24, B, H, G <= 2^16, D <= BLOCK_D, Dv <= BLOCK_DV (the launcher
derives the blocks from the head dims); windows clamped to ``[0, Sq + Sk]`` and ``align_br`` in
{0, 1} (the launcher's ``window_args``; the prover's sizes are >= 1, so they are written
``WL - 1`` etc.). The launchers' 32-bit precondition: every offset within one sequence
(``(S + MAX_BLOCK) * stride_s + 256``, S the total tokens when packed) below 2^31.

``CONTRACTS`` covers each kernel padded and packed, with the window, softcap and bias paths on;
:func:`for_config` builds the contracts of one tuned config.
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import LaunchContract, Tensor, cdiv, sizes
from . import kernel as K_
from .limits import INDEX_LIMIT, MAX_BLOCK, head_blocks, window_args

B, H, G, Sq, Sk, Tq, Tk, D, DV = sizes("B H G Sq Sk Tq Tk D DV")
WL, WH, AB = sizes("WL WH AB")  # win_lo + 1, win_hi + 1, align_br + 1
sqb, sqh, sqs, skb, skh, sks, svb, svh, svs = sizes("stride_qb stride_qh stride_qs stride_kb stride_kh stride_ks "
                                                    "stride_vb stride_vh stride_vs")
sdob, sdoh, sdos, sbb, sbh, sbm, sbn = sizes("stride_dob stride_doh stride_dos stride_bb stride_bh stride_bm stride_bn")
HQ = H * G


def _span(rows: Any, stride: Any) -> Any:
    return (rows + MAX_BLOCK) * stride + 256


def _domain(varlen: bool, bd: int, bdv: int) -> list[Any]:
    tq, tk = (Tq, Tk) if varlen else (Sq, Sk)
    out = [Sq <= 2**24, Sk <= 2**24, B <= 2**16, H <= 2**16, G <= 2**16, HQ <= 65535, D <= bd, DV <= bdv,
           WL <= Sq + Sk + 1, WH <= Sq + Sk + 1, AB <= 2,
           _span(tq, sqs) < INDEX_LIMIT, _span(tk, sks) < INDEX_LIMIT, _span(tk, svs) < INDEX_LIMIT,
           _span(tq, sdos) < INDEX_LIMIT, _span(tq, HQ * DV) < INDEX_LIMIT, _span(tq, HQ * D) < INDEX_LIMIT,
           _span(tk, H * D) < INDEX_LIMIT, _span(tk, H * DV) < INDEX_LIMIT,
           _span(Sq, sbm) + (Sk + MAX_BLOCK) * sbn < INDEX_LIMIT]
    if varlen:
        out += [Tq <= 2**24, Tk <= 2**24, Sq <= Tq, Sk <= Tk]
    return out


def _io(varlen: bool) -> dict[str, Any]:
    """Tensors and strides of q, k, v, dout, lse (+ delta) and the bias, padded or packed."""
    if varlen:
        return {
            "q_ptr": Tensor((Tq, HQ, D), (sqs, sqh, 1)), "k_ptr": Tensor((Tk, H, D), (sks, skh, 1)),
            "v_ptr": Tensor((Tk, H, DV), (svs, svh, 1)), "do_ptr": Tensor((Tq, HQ, DV), (sdos, sdoh, 1)),
            "lse_ptr": Tensor((HQ, Tq), (Tq, 1)), "bias_ptr": Tensor((1,), (1,)),
            "cu_q_ptr": Tensor((B + 1,), (1,), values=(0, Tq + 1), monotone=True),
            "cu_k_ptr": Tensor((B + 1,), (1,), values=(0, Tk + 1), monotone=True),
            "stride_qb": 0, "stride_qh": sqh, "stride_qs": sqs, "stride_kb": 0, "stride_kh": skh, "stride_ks": sks,
            "stride_vb": 0, "stride_vh": svh, "stride_vs": svs, "stride_dob": 0, "stride_doh": sdoh, "stride_dos": sdos,
            "stride_lb": 0, "stride_lh": Tq, "stride_bb": 0, "stride_bh": 0, "stride_bm": 0, "stride_bn": 0,
        }
    return {
        "q_ptr": Tensor((B, HQ, Sq, D), (sqb, sqh, sqs, 1)), "k_ptr": Tensor((B, H, Sk, D), (skb, skh, sks, 1)),
        "v_ptr": Tensor((B, H, Sk, DV), (svb, svh, svs, 1)), "do_ptr": Tensor((B, HQ, Sq, DV), (sdob, sdoh, sdos, 1)),
        "lse_ptr": Tensor((B, HQ, Sq), (HQ * Sq, Sq, 1)), "bias_ptr": Tensor((B, HQ, Sq, Sk), (sbb, sbh, sbm, sbn)),
        "cu_q_ptr": Tensor((1,), (1,)), "cu_k_ptr": Tensor((1,), (1,)),
        "stride_qb": sqb, "stride_qh": sqh, "stride_qs": sqs, "stride_kb": skb, "stride_kh": skh, "stride_ks": sks,
        "stride_vb": svb, "stride_vh": svh, "stride_vs": svs, "stride_dob": sdob, "stride_doh": sdoh,
        "stride_dos": sdos, "stride_lb": HQ * Sq, "stride_lh": Sq, "stride_bb": sbb, "stride_bh": sbh, "stride_bm": sbm,
        "stride_bn": sbn,
    }


def _out(varlen: bool, rows: Any, heads: Any, dim: Any, name: str) -> dict[str, Any]:
    """A contiguous output (an allocated gradient or out) and its strides."""
    pre = {"o_ptr": "o", "dq_ptr": "dq", "dk_ptr": "dk", "dv_ptr": "dv"}[name]
    if varlen:
        return {name: Tensor((rows, heads, dim), (heads * dim, dim, 1), output=True), f"stride_{pre}b": 0,
                f"stride_{pre}h": dim, f"stride_{pre}s": heads * dim}
    return {name: Tensor((B, heads, rows, dim), (heads * rows * dim, rows * dim, dim, 1), output=True),
            f"stride_{pre}b": heads * rows * dim, f"stride_{pre}h": rows * dim, f"stride_{pre}s": dim}


_RUNTIME = {"Sq": Sq, "Sk": Sk, "D": D, "DV": DV, "G": G, "win_lo": WL - 1, "win_hi": WH - 1, "align_br": AB - 1}
_SCALARS = ("sm_scale", "softcap")


def _bounded(varlen: bool) -> list[dict[str, int]]:
    out = []
    for sq, sk, d, dv, b, h, g in ((1, 1, 1, 1, 1, 1, 1), (37, 54, 64, 32, 2, 1, 3), (70, 20, 80, 80, 1, 2, 2)):
        s = {"Sq": sq, "Sk": sk, "D": d, "DV": dv, "B": b, "H": h, "G": g, "WL": 3, "WH": 1, "AB": 2,
             "stride_qh": d, "stride_kh": d, "stride_vh": dv, "stride_doh": dv, "stride_bm": sk, "stride_bn": 1,
             "stride_bh": sq * sk, "stride_bb": h * g * sq * sk}
        if varlen:
            s.update(Tq=sq * b, Tk=sk * b, stride_qs=h * g * d, stride_ks=h * d, stride_vs=h * dv,
                     stride_dos=h * g * dv)
        else:
            s.update(stride_qs=d, stride_qh=sq * d, stride_qb=h * g * sq * d, stride_ks=d, stride_kh=sk * d,
                     stride_kb=h * sk * d, stride_vs=dv, stride_vh=sk * dv, stride_vb=h * sk * dv, stride_dos=dv,
                     stride_doh=sq * dv, stride_dob=h * g * sq * dv)
        out.append(s)
    return out


def _pick(args: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {n: args[n] for n in names if n in args}


def forward(constexprs: list[dict], varlen: bool) -> LaunchContract:
    """One contract per (BLOCK_D, BLOCK_DV) and packing: pass constexprs sharing them."""
    c0 = constexprs[0]
    io = _io(varlen)
    args = {**_pick(io, ("q_ptr", "k_ptr", "v_ptr", "lse_ptr", "cu_q_ptr", "cu_k_ptr", "bias_ptr")),
            **_out(varlen, Tq if varlen else Sq, HQ, DV, "o_ptr"), **_RUNTIME,
            **{k: v for k, v in io.items() if k.startswith("stride_") and not k.startswith("stride_do")}}
    args["lse_ptr"] = Tensor(io["lse_ptr"].shape, io["lse_ptr"].strides, output=True)
    args.update({s: 1.0 for s in _SCALARS})
    return LaunchContract(
        kernel=K_.attention_fwd_kernel, name="attention_fwd_kernel" + ("[packed]" if varlen else ""), args=args,
        constexprs=constexprs, grid=lambda c: (cdiv(Sq, c["BLOCK_M"]), HQ, B),
        domain=_domain(varlen, c0["BLOCK_D"], c0["BLOCK_DV"]), bounded_shapes=_bounded(varlen))


def preprocess(constexprs: list[dict], varlen: bool) -> LaunchContract:
    io = _io(varlen)
    o = _out(varlen, Tq if varlen else Sq, HQ, DV, "o_ptr")
    o["o_ptr"] = Tensor(o["o_ptr"].shape, o["o_ptr"].strides)  # read here
    args = {**o, "do_ptr": io["do_ptr"], "cu_q_ptr": io["cu_q_ptr"], "Sq": Sq, "DV": DV,
            "delta_ptr": Tensor(io["lse_ptr"].shape, io["lse_ptr"].strides, output=True),
            **_pick(io, ("stride_dob", "stride_doh", "stride_dos", "stride_lb", "stride_lh"))}
    return LaunchContract(
        kernel=K_.attention_bwd_preprocess_kernel, name="attention_bwd_preprocess_kernel" + ("[packed]" if varlen else ""),
        args=args, constexprs=constexprs, grid=lambda c: (cdiv(Sq, c["BLOCK_M"]), HQ, B),
        domain=_domain(varlen, 256, constexprs[0]["BLOCK_DV"]), bounded_shapes=_bounded(varlen))


def dkdv(constexprs: list[dict], varlen: bool) -> LaunchContract:
    c0 = constexprs[0]
    io = _io(varlen)
    args = {**io, **_out(varlen, Tk if varlen else Sk, H, D, "dk_ptr"), **_out(varlen, Tk if varlen else Sk, H, DV, "dv_ptr"),
            "delta_ptr": io["lse_ptr"], **_RUNTIME, **{s: 1.0 for s in _SCALARS}}
    return LaunchContract(
        kernel=K_.attention_bwd_dkdv_kernel, name="attention_bwd_dkdv_kernel" + ("[packed]" if varlen else ""),
        args=args, constexprs=constexprs, grid=lambda c: (cdiv(Sk, c["BLOCK_N"]), H, B),
        domain=_domain(varlen, c0["BLOCK_D"], c0["BLOCK_DV"]), bounded_shapes=_bounded(varlen))


def dq(constexprs: list[dict], varlen: bool) -> LaunchContract:
    c0 = constexprs[0]
    io = _io(varlen)
    args = {**io, **_out(varlen, Tq if varlen else Sq, HQ, D, "dq_ptr"), "delta_ptr": io["lse_ptr"], **_RUNTIME,
            **{s: 1.0 for s in _SCALARS}}
    return LaunchContract(
        kernel=K_.attention_bwd_dq_kernel, name="attention_bwd_dq_kernel" + ("[packed]" if varlen else ""),
        args=args, constexprs=constexprs, grid=lambda c: (cdiv(Sq, c["BLOCK_M"]), HQ, B),
        domain=_domain(varlen, c0["BLOCK_D"], c0["BLOCK_DV"]), bounded_shapes=_bounded(varlen))


M_, N_ = sizes("M N")
sam, sbm_ = sizes("stride_am stride_bm")


def merge(constexprs: list[dict]) -> LaunchContract:
    """Rows of the merged states: inputs with any row stride, unit column stride; outputs contiguous."""
    return LaunchContract(
        kernel=K_.merge_attention_states_kernel, name="merge_attention_states_kernel",
        args={"oa_ptr": Tensor((M_, N_), (sam, 1)), "la_ptr": Tensor((M_,), (1,)), "ob_ptr": Tensor((M_, N_), (sbm_, 1)),
              "lb_ptr": Tensor((M_,), (1,)), "o_ptr": Tensor((M_, N_), (N_, 1), output=True),
              "l_ptr": Tensor((M_,), (1,), output=True), "M": M_, "N": N_, "stride_am": sam, "stride_bm": sbm_,
              "stride_om": N_},
        constexprs=constexprs, grid=lambda c: (cdiv(M_, c["BLOCK_M"]),),
        domain=[M_ <= 2**31 - 256, N_ <= constexprs[0]["BLOCK_N"]],
        bounded_shapes=[{"M": 1, "N": 1, "stride_am": 1, "stride_bm": 1}, {"M": 37, "N": 80, "stride_am": 80,
                                                                          "stride_bm": 96}])


def _meta(p: Any, c: Mapping[str, Any]) -> dict[str, Any]:
    bd, bdv = head_blocks(p)
    w = window_args(p.attrs, 1, 1)
    return dict(BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_D=bd, BLOCK_DV=bdv, HAS_LO=w["HAS_LO"],
                HAS_HI=w["HAS_HI"], SOFTCAP=bool(p.attrs["softcap"]), HAS_BIAS=bool(p.attrs["bias"]),
                VARLEN=bool(p.attrs["varlen"]), IS_FP32=p.dtype_name == "float32", EMULATE=False)


def for_config(variant: Any, problem: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contracts covering exactly the kernels and constexprs ``config`` launches (GPU form)."""
    meta = _meta(problem, config)
    varlen = meta["VARLEN"]
    if variant.op == "attention":
        return [forward([meta], varlen)]
    pre = {"BLOCK_M": meta["BLOCK_M"], "BLOCK_DV": meta["BLOCK_DV"], "VARLEN": varlen}
    return [preprocess([pre], varlen), dkdv([meta], varlen), dq([meta], varlen)]


def merge_for_config(problem: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    from ...core.variant import next_pow2

    return [merge([{"BLOCK_M": config["BLOCK_M"], "BLOCK_N": max(16, next_pow2(problem.shape["N"])), "EMULATE": False}])]


def _m(bm: int, bn: int, bd: int, bdv: int, varlen: bool, **flags: bool) -> dict[str, Any]:
    base = dict(HAS_LO=False, HAS_HI=False, SOFTCAP=False, HAS_BIAS=False)
    base.update(flags)
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd, BLOCK_DV=bdv, VARLEN=varlen, IS_FP32=False, EMULATE=False, **base)


_ALL = dict(HAS_LO=True, HAS_HI=True, SOFTCAP=True)
CONTRACTS = [
    forward([_m(64, 32, 64, 64, False), _m(64, 32, 64, 64, False, HAS_BIAS=True, **_ALL)], varlen=False),
    forward([_m(32, 64, 128, 64, True, **_ALL)], varlen=True),
    preprocess([{"BLOCK_M": 32, "BLOCK_DV": 64, "VARLEN": False}], varlen=False),
    preprocess([{"BLOCK_M": 32, "BLOCK_DV": 64, "VARLEN": True}], varlen=True),
    dkdv([_m(32, 64, 64, 64, False, HAS_BIAS=True, **_ALL)], varlen=False),
    dkdv([_m(32, 64, 64, 64, True, **_ALL)], varlen=True),
    dq([_m(64, 32, 64, 64, False, HAS_BIAS=True, **_ALL)], varlen=False),
    dq([_m(64, 32, 64, 64, True, **_ALL)], varlen=True),
    merge([{"BLOCK_M": 4, "BLOCK_N": 128, "EMULATE": False}]),
]
