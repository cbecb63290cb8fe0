"""Launch contracts of the conv forward kernel, for ``warpsmith prove`` (see verify/symbolic/contract.py).

``conv_fwd_kernel`` (direct and transposed, both reduction orders, without split-K) over a domain of
any geometry: 1 <= sizes, strides, dilations; 0 <= padding; input, weight and output with *any*
non-negative strides (NCDHW, channels-last, views); groups G >= 1. Input coordinates are masked
(padding, stride holes), so the output's spatial sizes need no relation to the input's for
memory safety. The launcher's 32-bit precondition (variant.launch_conv: ``sample_span`` and
``coord_span`` below 2^31) is the domain's: every within-sample offset a lane computes, masked
or not, fits in int32 (the batch offset is int64).

STATUS (not yet proved): with z3 on this domain the in-bounds obligations of the x, w, residual
and y accesses time out (the pixel div/mod chains are non-linear); only the bias load is proved.
No test claims these proofs; see the README section "Convolution". The split-K partial store and its
reduction kernel and the weight-gradient kernel are covered by the interpreter tests and the
verifier, not by these proofs.
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import KernelContract, Tensor, cdiv, sizes
from . import kernel as K_

LIMIT = 2**31
BATCH, G, CG, KG, D, H, W, OD, OH, OW, KD, KH, KW = sizes("BATCH G CG KG D H W OD OH OW KD KH KW")
std, sth, stw, pd, ph, pw, dd, dh, dw = sizes("stride_d stride_h stride_w pad_d pad_h pad_w dil_d dil_h dil_w")
sxn, sxc, sxd, sxh, sxw = sizes("sxn sxc sxd sxh sxw")
swg, swn, swc, swd, swh, sww = sizes("swg swn swc swd swh sww")
syn, syc, syd, syh, syw = sizes("syn syc syd syh syw")
MAXB = 256


def _coord(o, k, st, p, dl):
    """Largest magnitude an input coordinate takes on any lane (masked lanes included)."""
    return (o + MAXB) * st + p + (k + MAXB) * dl


DOMAIN = [v <= 2**16 for v in (BATCH, G, CG, KG, D, H, W, OD, OH, OW, KD, KH, KW)] + [
    v <= 64 for v in (std, sth, stw, dd, dh, dw)] + [v <= 4096 for v in (pd, ph, pw)] + [
    v >= 0 for v in (pd, ph, pw)] + [
    # within-sample offsets, any lane (see module docstring); the same bounds launch_conv checks
    (G * CG + MAXB) * sxc + _coord(OD, KD, std, pd, dd) * sxd + _coord(OH, KH, sth, ph, dh) * sxh
    + _coord(OW, KW, stw, pw, dw) * sxw < LIMIT,
    (G + 1) * swg + (KG + MAXB) * swn + (CG + MAXB) * swc + (KD + MAXB) * swd + (KH + MAXB) * swh
    + (KW + MAXB) * sww < LIMIT,
    (G * KG + MAXB) * syc + (OD + MAXB) * syd + (OH + MAXB) * syh + (OW + MAXB) * syw < LIMIT,
    BATCH * OD * OH * OW + MAXB < LIMIT, KD * KH * KW * (CG + MAXB) < LIMIT]

_BOUNDED = [dict(BATCH=2, G=2, CG=3, KG=5, D=4, H=5, W=3, OD=4, OH=3, OW=2, KD=2, KH=3, KW=1, stride_d=1,
                 stride_h=2, stride_w=1, pad_d=1, pad_h=1, pad_w=0, dil_d=2, dil_h=1, dil_w=1)]
for _s in _BOUNDED:
    C = _s["G"] * _s["CG"]
    _s.update(sxn=C * _s["D"] * _s["H"] * _s["W"], sxc=1, sxd=_s["H"] * _s["W"] * C, sxh=_s["W"] * C, sxw=C,
              swg=_s["KG"] * _s["CG"] * 6, swn=_s["CG"] * 6, swc=6, swd=3, swh=1, sww=1,
              syn=_s["G"] * _s["KG"] * _s["OD"] * _s["OH"] * _s["OW"], syc=_s["OD"] * _s["OH"] * _s["OW"],
              syd=_s["OH"] * _s["OW"], syh=_s["OW"], syw=1)


def forward(constexprs: list[dict]) -> KernelContract:
    x = Tensor((BATCH, G * CG, D, H, W), (sxn, sxc, sxd, sxh, sxw))
    w = Tensor((G, KG, CG, KD, KH, KW), (swg, swn, swc, swd, swh, sww))
    y = Tensor((BATCH, G * KG, OD, OH, OW), (syn, syc, syd, syh, syw), output=True)
    args = {
        "x_ptr": x, "w_ptr": w, "y_ptr": y, "bias_ptr": Tensor((G * KG,), (1,)),
        "res_ptr": Tensor((BATCH, G * KG, OD, OH, OW), (syn, syc, syd, syh, syw)),
        "p_ptr": Tensor((1,), (1,)),
        "BATCH": BATCH, "CG": CG, "KG": KG, "D": D, "H": H, "W": W, "OD": OD, "OH": OH, "OW": OW,
        "KD": KD, "KH": KH, "KW": KW, "stride_d": std, "stride_h": sth, "stride_w": stw,
        "pad_d": pd, "pad_h": ph, "pad_w": pw, "dil_d": dd, "dil_h": dh, "dil_w": dw,
        "ITERS_PER_SPLIT": KD * KH * KW * CG, "scale": 1.0,
        "sxn": sxn, "sxc": sxc, "sxd": sxd, "sxh": sxh, "sxw": sxw,
        "swg": swg, "swn": swn, "swc": swc, "swd": swd, "swh": swh, "sww": sww,
        "syn": syn, "syc": syc, "syd": syd, "syh": syh, "syw": syw,
        "srn": syn, "src": syc, "srd": syd, "srh": syh, "srw": syw, "stride_bias": 1,
    }
    return KernelContract(
        kernel=K_.conv_fwd_kernel, name="conv_fwd_kernel", args=args, constexprs=constexprs,
        grid=lambda c: (cdiv(BATCH * OD * OH * OW, c["BLOCK_M"]) * cdiv(KG, c["BLOCK_N"]), G, 1),
        domain=DOMAIN, bounded_shapes=_BOUNDED)


def _meta(loop: str, transposed: bool, **extra: Any) -> dict:
    return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, LOOP=loop, TRANSPOSED=transposed, SPLIT=False, HAS_BIAS=True,
                HAS_RES=True, ACTIVATION="gelu", IS_FP32=False, PRECISION="ieee", EMULATE=False, **extra)


def for_config(config: Mapping[str, Any], problem: Any) -> list[KernelContract]:
    """The forward kernel's contract at ``config``'s tile and order (split-K configs: the split kernel
    and its reduction are not covered by a contract; the verifier tests them)."""
    if config.SPLIT_K > 1:
        return []
    a = problem.attrs
    meta = dict(BLOCK_M=config.BLOCK_M, BLOCK_N=config.BLOCK_N, BLOCK_K=config.BLOCK_K, LOOP=config.LOOP,
                TRANSPOSED=bool(a["transposed"]), SPLIT=False, HAS_BIAS=bool(a["bias"]),
                HAS_RES=bool(a["residual"]), ACTIVATION=a["activation"], IS_FP32=False,
                PRECISION=config.PRECISION, EMULATE=False)
    return [forward([meta])]


CONTRACTS = [forward([_meta("nested", False)]), forward([_meta("flat", False)]),
             forward([_meta("nested", True)])]
