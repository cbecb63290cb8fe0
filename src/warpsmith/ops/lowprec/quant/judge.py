"""The verification criteria of the quantization ops (spec.py), exact where the outputs are discrete.

**quantize.** Let y be what is quantized (x, or its RMSNorm), y64 its fp64 value (the oracle), and
u = 2^-24 the fp32 unit roundoff. The kernel's y_k has relative error ``e_y``: 0 without the norm (an
fp32/fp16/bf16 x converts exactly); with it, the fp32 sum of N squares (``gamma(N + 3, u)`` relative with
the 1/N and + eps roundings, halved by the square root), the square root and the reciprocal (the GPU's
approximate ``sqrt`` within 2 ulps, its fp32 division within 2 ulps: ``6u`` together) and the two products
(``3u``). Then:

- scale: ``|s_k - amax64 / QMAX| <= (e_y + 4u) amax64 / QMAX + 2^-149`` (the max of values within ``e_y``
  is within ``e_y``; one division, 2 ulps = 4u), and exactly 1 for an all-zero group;
- values: with the kernel's *own* scale s_k, the exact quotient ``t = y64 / s_k`` is what the kernel
  approximates by ``fl(y_k / s_k)``, within ``e_q = e_y + 5u`` relative (plus 2^-147 absolute, the
  division's error below fp32's normal range). Round-to-nearest with saturation (``saturate_cast``) is
  monotone, so a correct kernel's q lies in ``[R(t (1 - e_q)), R(t (1 + e_q))]``: one value, or two
  neighbours where t lies within ``e_q`` of a rounding tie. Nothing else is accepted.
- per tensor (``tensor``): the same, with one group, the whole tensor (amax over every element);
- special values (reference.py's convention): amax ignores NaN (an all-NaN group: amax 0, scale
  exactly 1); a group whose amax is +inf must have scale +inf, and its values are then judged like any
  other against ``y / inf`` (0 for finite y, NaN for ±inf); a NaN quotient must give NaN in fp8 and 0 in
  int8. With the norm a row's NaN or infinity reaches the whole row (through the sum of squares) in the
  fp64 oracle as in the kernel.

**stochastic_round.** Each output is one of the two neighbours of x in the target format (exactly x where
representable; e4m3 saturates at ±448 and keeps NaN; bf16 keeps NaN and ±inf, and rounds past its largest
finite value to inf), and the upward roundings are unbiased: with p each element's probability of rounding
up, ``(|x| - |lo|) / (|hi| - |lo|)``, and up its 0/1 outcome, two statistics ``S_w = sum w (up - p)``, for
w = 1 (the count) and w = p - 1/2 (the correlation with p), satisfy ``|S_w| <= 6 sqrt(sum w^2 p (1 - p)) +
max |w|``. Always rounding down fails the first on any input of more than a few dozen inexact elements,
round-to-nearest (right on average for spread-out p) the second; a correct stochastic rounding, each draw
an independent Bernoulli(p), fails either with probability below 1e-8.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ....core.error_contract import gamma
from ....core.opspec import Problem
from .reference import BLOCK, QMAX, expand_scale, saturate_cast

U = 2.0**-24
SCALE_FLOOR = 2.0**-149
QUOTIENT_FLOOR = 2.0**-147
SIGMAS = 6.0
STATIC_REL = 4 * U


@dataclass(frozen=True)
class QuantizeBounds:
    value_rel: float  # e_y: the relative error of y_k
    scale_rel: float  # e_y + 4u
    quotient_rel: float  # e_y + 5u


def quantize_bounds(p: Problem) -> QuantizeBounds:
    e_y = gamma(p.shape["N"] + 3, U) / 2 + 9 * U if p.attrs["norm"] else 0.0
    return QuantizeBounds(e_y, e_y + 4 * U, e_y + 5 * U)


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in mask.nonzero()[0].tolist())


def judge_quantize(p: Problem, inputs: Mapping[str, torch.Tensor], outs: tuple[torch.Tensor, ...]) -> str | None:
    """None if (q, scale) meet the criterion of the module docstring, else what failed, where."""
    from .spec import prequantized

    q, s = outs
    fmt, gran = p.attrs["format"], p.attrs["granularity"]
    M, N = p.shape["M"], p.shape["N"]
    b = quantize_bounds(p)
    x64 = {k: v.detach().cpu().to(torch.float64) for k, v in inputs.items()}
    y = prequantized(x64, p.attrs)
    cols = 1 if gran == "row" else BLOCK
    groups = s.shape[-1]
    ya = y.abs().where(~torch.isnan(y), torch.zeros((), dtype=y.dtype))  # amax ignores NaN
    if gran == "row":
        amax = ya.amax(dim=1, keepdim=True)
    elif gran == "tensor":  # one group: the whole tensor, its scale s (1,) seen as (1, 1)
        amax = ya.amax().reshape(1, 1)
        s = s.reshape(1, 1)
    else:
        pad = torch.zeros(M, groups * cols, dtype=torch.float64)
        pad[:, :N] = ya
        amax = pad.reshape(M, groups, cols).amax(dim=2)
    sk = s.detach().cpu().to(torch.float64)
    exact = amax / QMAX[fmt]
    zero = amax == 0
    if (zero & (sk != 1.0)).any():
        at = _first(zero & (sk != 1.0))
        return f"output 1 (scale): {sk[at].item()!r} at {at} for an all-zero (or all-NaN) group, expected exactly 1"
    inf = torch.isinf(amax)
    if (inf & (sk != float("inf"))).any():
        at = _first(inf & (sk != float("inf")))
        return f"output 1 (scale): {sk[at].item()!r} at {at} for a group holding an infinity, expected +inf"
    judged = torch.ones_like(amax, dtype=torch.bool)
    live = (amax > 0) & ~inf
    err = (sk - exact).abs()
    allowed = b.scale_rel * exact + SCALE_FLOOR
    over = live & ~(err <= allowed)  # NaN fails
    if over.any():
        at = _first(over)
        return (f"output 1 (scale): {sk[at].item()!r} at {at}, expected amax / QMAX = {exact[at].item()!r} "
                f"within {allowed[at].item():.3e} (relative {b.scale_rel:.3e})")
    ok_el = expand_scale(judged, M, N, 1, cols) if gran == "block" else judged.expand(M, N)
    sk_el = (expand_scale(sk, M, N, 1, cols) if gran == "block" else sk.expand(M, N)).where(ok_el, torch.ones(()))
    t = (y / sk_el).where(ok_el, torch.zeros(()))
    return values_within(q, t, b.quotient_rel, fmt, ok_el, "output 0 (q)", f"the kernel's own scale, {b.quotient_rel:.3e}")


def values_within(q: torch.Tensor, t: torch.Tensor, rel: float, fmt: str, judged: torch.Tensor, what: str,
                  how: str) -> str | None:
    """None if every judged q lies in ``[R(t (1 - rel)), R(t (1 + rel))]`` (R: the saturating round-to-nearest
    ``saturate_cast``; ±inf quotients saturate; a NaN quotient must give NaN in fp8 and 0 in int8, which has
    no NaN), else the first element that does not."""
    fin = torch.isfinite(t)
    slack = (rel * t.abs() + QUOTIENT_FLOOR).where(fin, torch.zeros((), dtype=t.dtype))
    lo = saturate_cast(t - slack, fmt).to(torch.float64)
    hi = saturate_cast(t + slack, fmt).to(torch.float64)
    qk = q.detach().cpu().to(torch.float64)
    nan_t = torch.isnan(t)  # int8: lo = hi = R(NaN) = 0
    ok = ((qk >= lo) & (qk <= hi)) | (nan_t & torch.isnan(qk) & (fmt != "int8"))  # NaN (an unwritten poison) fails
    wrong = judged & ~ok
    if wrong.any():
        at = _first(wrong)
        want = f"{lo[at].item()!r}" if lo[at] == hi[at] or nan_t[at] else f"{lo[at].item()!r} or {hi[at].item()!r}"
        return (f"{what}: {qk[at].item()!r} at {at}, expected {want}: the saturating round-to-nearest of "
                f"x / scale = {t[at].item()!r} ({how} relative)")
    return None


def judge_quantize_static(p: Problem, inputs: Mapping[str, torch.Tensor], outs: tuple[torch.Tensor, ...]) -> str | None:
    """quantize_static: q within the interval of :func:`values_within` around the exact x / scale (the given
    scale), 4u relative (one fp32 division, 2 ulps on the GPU); every element judged (NaN and ±inf too)."""
    x = inputs["x"].detach().cpu().to(torch.float64)
    t = x / inputs["scale"].detach().cpu().to(torch.float64)
    return values_within(outs[0], t, STATIC_REL, p.attrs["format"], torch.ones_like(t, dtype=torch.bool), "q",
                         f"the given scale, {STATIC_REL:.3e}")
    return None


def neighbours(x: torch.Tensor, target: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(lo, hi, p): the neighbours of fp32 ``x`` in ``target`` toward and away from zero (equal where x is
    representable, or saturated, or not finite), as fp32, and the probability of rounding to hi."""
    x = x.detach().cpu().to(torch.float32)
    if target == "bf16":
        bits = x.view(torch.int32)
        low = bits & 0xFFFF
        lo_bits = bits - low
        hi_bits = torch.where(low != 0, lo_bits + 0x10000, lo_bits)
        finite = torch.isfinite(x)
        lo = torch.where(finite, lo_bits.view(torch.float32), x)
        hi = torch.where(finite, hi_bits.view(torch.float32), x)
        p = torch.where(finite, low.to(torch.float64) / 65536.0, torch.zeros((), dtype=torch.float64))
        return lo, hi, p
    a = x.abs()
    sat = a >= QMAX["e4m3"]
    c = a.where(~sat & ~torch.isnan(a), torch.zeros(())).to(torch.float8_e4m3fn)
    cb = c.view(torch.uint8).to(torch.int32)
    cf = c.to(torch.float32)
    lo_b = torch.where(cf > a, cb - 1, cb)
    hi_b = torch.where(cf < a, cb + 1, cb)

    def value(bits: torch.Tensor) -> torch.Tensor:
        return bits.clamp(0, 0x7E).to(torch.uint8).view(torch.float8_e4m3fn).to(torch.float32)

    lo_m, hi_m = value(lo_b), value(hi_b)
    lo_m = torch.where(sat, torch.full_like(a, QMAX["e4m3"]), lo_m)
    hi_m = torch.where(sat, torch.full_like(a, QMAX["e4m3"]), hi_m)
    gap = (hi_m - lo_m).to(torch.float64)
    p = torch.where(gap > 0, (a.to(torch.float64) - lo_m.to(torch.float64)) / gap.where(gap > 0, torch.ones(())),
                    torch.zeros((), dtype=torch.float64))
    sign = torch.where(x < 0, -1.0, 1.0)
    nan = torch.isnan(x)
    lo = torch.where(nan, x, lo_m * sign)
    hi = torch.where(nan, x, hi_m * sign)
    return lo, hi, p


def judge_stochastic(p: Problem, inputs: Mapping[str, Any], outs: tuple[torch.Tensor, ...]) -> str | None:
    """None if every output is a neighbour of its input and the upward count is unbiased (module docstring)."""
    x = inputs["x"]
    y = outs[0].detach().cpu().to(torch.float32)
    lo, hi, prob = neighbours(x, p.attrs["target"])
    nan_x = torch.isnan(x.detach().cpu())
    if not torch.equal(torch.isnan(y), nan_x):
        at = _first(torch.isnan(y) != nan_x)
        return f"NaN where the input has {'none' if not nan_x[at] else 'one'} (first at {at}: input {x[at].item()!r})"
    ok = nan_x | (y == lo) | (y == hi)
    if not ok.all():
        at = _first(~ok)
        return (f"{y[at].item()!r} at {at} is not a neighbour of {x[at].item()!r} in {p.attrs['target']} "
                f"(expected {lo[at].item()!r} or {hi[at].item()!r})")
    inexact = (lo != hi) & ~nan_x
    up = (inexact & (y == hi)).to(torch.float64)
    zero = torch.zeros((), dtype=torch.float64)
    prob = prob.where(inexact, zero)
    for what, w in (("upward roundings", torch.ones_like(prob)), ("upward roundings weighted by p - 1/2", prob - 0.5)):
        w = w.where(inexact, zero)
        stat = float((w * (up - prob)).sum())
        sd = float((w * w * prob * (1 - prob)).sum()) ** 0.5
        if abs(stat) > SIGMAS * sd + (float(w.abs().max()) if w.numel() else 0.0):
            return (f"biased: {what} of {int(inexact.sum())} inexact elements differ from their expectation by "
                    f"{stat:.1f} (standard deviation {sd:.1f}; {SIGMAS:g} allowed)")
    return None
