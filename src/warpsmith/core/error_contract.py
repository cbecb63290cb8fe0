"""Error contracts: how far from an fp64 oracle a result may be.

A contract is derived from the dtypes and the reduction length, never a blanket
tolerance. For a result ``y = act(sum_i p_i + bias)`` with ``n`` summed terms it
allows, per element,

    |y - y64| <= u_out |y64| + L * (gamma(n, u_acc) + 2 u_op) * S + floor

where ``S`` is the op's error scale (``sum_i |p_i| + |bias|``, e.g. ``|A| @ |B|``
for GEMM), ``u_op`` the rounding of operands before the products (0 unless a
lower precision such as tf32 is allowed), ``gamma(n, u) = n u / (1 - n u)`` the
classical worst-case bound of a length-n summation, ``L`` the Lipschitz
constant of the epilogue and ``floor`` the smallest subnormal step of the
output. This is a rigorous worst-case bound for a correct kernel.

A second criterion catches kernels that are "within tolerance" but far worse
than they should be (e.g. tf32 passed off as fp32): the candidate's largest
error must be at most ``ref_factor`` times that of the reference computed in the
working dtype, plus two output ulps of the largest magnitude.

That reference error has a floor, the **sensitivity** of the op to a perturbation of its inputs at
the scale of one rounding: the largest change of the fp64 oracle when every element of every
floating input moves by ``d * u * max|input|``, ``d`` uniform in ``[-2, 2]`` (mean magnitude 1: on
average one unit roundoff ``u`` of the largest input, ``u`` that of the precision arithmetic is done
in, the contract's ``u_acc``). This is normwise backward stability's
yardstick: an algorithm that is backward stable in that sense (its result is the exact result
for inputs moved that little) stays within a small multiple of it. Without it, a reference whose
algorithm is luckily accurate on these inputs (torch's softmax subtracts the row's maximum
exactly) would reject a standard algorithm (``exp(x - logsumexp(x))``, the form FlashAttention's
backward recomputes, whose error grows with ``|logsumexp|``) by any factor. The floor is measured,
not assumed, so it stays small where the op is well conditioned: tf32 (operands rounded at
2^-11) is still hundreds of times over it for fp32.

The check harness judges foreign kernels, with no per-op error scale, element by element instead
(:func:`warpsmith.check.compare.judge`): :func:`perturb_each` moves every input element by one
rounding of *itself*, and :func:`element_scale` turns the oracle's change into each element's own
scale, so that an allowance does not grow with the largest input and a small element keeps a
small one.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

import torch

from .dtypes import SUBNORMAL_STEP as _SUBNORMAL_STEP

REF_FACTOR = 4.0


def within_reference(err: float, ref_err: float, largest: float, u: float, factor: float = REF_FACTOR,
                     floor: float = 0.0, sensitivity: float = 0.0) -> tuple[bool, float]:
    """The second criterion: the largest error ``err`` against the oracle is at most ``factor`` times the
    reference's own (``ref_err``, the reference computed in the working dtype) or, where larger, the
    op's ``sensitivity`` to its inputs (module docstring), plus two ulps (``u``) of the ``largest``
    magnitude (the output's own rounding and one of an intermediate), plus ``floor``; returns (ok, the allowed error). Shared by
    :class:`ErrorContract` and the check harness (:func:`warpsmith.check.compare.judge`)."""
    allowed = factor * max(ref_err, sensitivity) + 2.0 * u * largest + floor
    return bool(err <= allowed), allowed  # False when either side is NaN


# KernelBench's own tolerance by output dtype (its eval.py: ``torch.allclose(out, ref, atol=t, rtol=t)``
# against the eager reference): the cap of every declared deviation (:func:`within_tolerance`).
KERNELBENCH_TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}


def within_tolerance(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype | None = None,
                     share: float = 1.0) -> tuple[bool, float]:
    """Whether ``|out - ref| <= t (1 + |ref|)`` everywhere both are finite, ``t`` being ``share`` times
    KernelBench's tolerance for ``dtype`` (default ``ref``'s; :data:`KERNELBENCH_TOLERANCE`, float32's
    for other dtypes); returns (ok, the largest ratio of the error to its allowance)."""
    t = share * KERNELBENCH_TOLERANCE.get(dtype or ref.dtype, KERNELBENCH_TOLERANCE[torch.float32])
    a, b = out.to(torch.float64), ref.to(out.device, torch.float64)
    both = torch.isfinite(a) & torch.isfinite(b)
    if a.numel() == 0:
        return True, 0.0
    ratio = ((a - b).abs() / (t * (1.0 + b.abs()))).where(both, torch.zeros_like(a))
    worst = float(ratio.max())
    return bool(worst <= 1.0), worst


def perturb(inputs64: Mapping[str, Any], u: float, seed: int = 0) -> dict[str, Any]:
    """``inputs64`` with every element of every floating tensor moved by ``d * u * max|tensor|``, ``d``
    uniform in ``[-2, 2]`` (a fixed seed: the floor is reproducible); other values are returned as they
    are. The oracle on these, against the oracle on ``inputs64``, is the op's sensitivity (module
    docstring)."""
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {}
    for k, v in inputs64.items():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            d = torch.rand(v.shape, generator=gen, dtype=torch.float64).to(v.device) * 4.0 - 2.0
            v64 = v.to(torch.float64)
            finite = v64.abs().where(torch.isfinite(v64), torch.zeros_like(v64))
            big = float(finite.max()) if v64.numel() else 0.0
            out[k] = v64 + d * (u * big)
        else:
            out[k] = v
    return out


def perturb_each(inputs64: Mapping[str, Any], u: float, seed: int = 0) -> dict[str, Any]:
    """``inputs64`` with every element of every floating tensor moved by ``±m u |x|`` relative to
    itself, ``m`` uniform in ``[1/2, 3/2]`` and the sign random (a fixed seed: reproducible); other
    values are returned as they are. One rounding of each element, never much less (the magnitude
    is bounded away from 0, so a change driven by one element cannot vanish by chance). Zeros stay
    zero and signs are kept: padding, sparsity and the inputs' structure survive. The oracle on
    these, against the oracle on ``inputs64``, is each element's sensitivity (:func:`element_scale`);
    unlike :func:`perturb`, an element's move does not grow with the largest element of its
    tensor."""
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {}
    for k, v in inputs64.items():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            v64 = v.to(torch.float64)
            m = torch.rand(v.shape, generator=gen, dtype=torch.float64) + 0.5
            sign = torch.where(torch.rand(v.shape, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
            step = (sign * m).to(v.device) * (u * v64.abs())
            out[k] = v64 + step.where(torch.isfinite(step), torch.zeros_like(step))
        else:
            out[k] = v
    return out


# the element scale's floors (:func:`element_scale`)
ROUNDINGS = 4  # roundings of a value as large as the element, in the arithmetic's precision
ROW_MIN = 8  # the shortest last dimension whose slices count as rows


def _rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as rows along its last dimension (one row when that is shorter than :data:`ROW_MIN`)."""
    if t.dim() >= 1 and t.shape[-1] >= ROW_MIN:
        return t.reshape(-1, t.shape[-1])
    return t.reshape(1, -1)


def _per_row(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Per-row values of :func:`_rows` broadcast back to ``like``'s shape."""
    if like.dim() >= 1 and like.shape[-1] >= ROW_MIN:
        return v.reshape(*like.shape[:-1], 1)
    return v.reshape([1] * like.dim())


def element_scale(ref64: torch.Tensor, probes64: torch.Tensor | None, u: float, step: float,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
    """Each element's own error scale: how far a standard computation of that element may be from
    the oracle ``ref64`` for rounding its inputs and intermediates once, at unit roundoff ``u`` (that
    of the arithmetic), measured rather than assumed. Per element ``i`` of a row ``R`` (the slice
    along the last dimension; the whole tensor when that is shorter than :data:`ROW_MIN`):

        w_i = max(s_i, median_R s, median_R(s / |y|) |y_i|, n u |y_i|, n u median_R |y|, step),
        n = max(ROUNDINGS, sqrt(L))

    - ``s_i``: the change of the oracle at ``i`` when every input element moves by one rounding of
      itself (:func:`perturb_each`), the root mean square over the probes ``probes64`` (the oracle on
      each perturbed draw, stacked on a new first dimension; None: no probes, ``s = 0``). The
      sensitivity of this element, not of the tensor: an input 100x larger elsewhere does not raise
      it.
    - ``median_R s``: the typical sensitivity of the row. Where ``y_i`` cancels to nearly 0 (a dot
      product, ``x w + b``), the intermediates still have the row's typical size and so do their
      rounding errors; one probe's value at one element may also be small by chance.
    - ``median_R(s / |y|) |y_i|``: the row's typical *relative* sensitivity, applied to the
      element. An error common to the row in relative terms (softmax as ``exp(x - logsumexp(x))``
      rounds ``logsumexp``, which moves every element of the row by the same factor, the largest
      one included, whose own sensitivity is nearly 0) stays within the row's conditioning.
    - ``n u |y_i|``: a few roundings of a value as large as the element itself,
      or, along a row of length ``L``, the random walk of one such rounding per step: an element
      accumulated along its row (a scan, a running sum) rounds a partial result as large as itself at
      every step, which no perturbation of the inputs shows (the probes move inputs, not partial
      results), and torch's CPU reference may accumulate in float64 and show none of it either.
      Measured: a float32 cumsum over 5000 elements computed in chunks is off by 1.4e-4 at an element
      of 42.7, 0.8 of ``sqrt(L) u |y_i|``; an operand rounded to 13 bits is off by about 1e-4 of the
      element, hundreds of times ``sqrt(L) u |y_i|`` for a row of 48.
    - ``n u median_R |y|``: the same steps for values as large as the row's typical element: where
      ``y_i`` cancels (``x w + b`` with ``x w`` near ``-b``; a running sum that came back near 0),
      the terms and partial results were that large, and a parameter of the model (a bias) is not
      among the perturbed inputs.
    - ``step``: the output dtype's smallest subnormal (its resolution near 0).

    Medians, not maxima: one large element of a row does not lend its allowance to the small ones.
    ``mask`` selects the elements taking part (where the oracle and the reference are finite)."""
    y = ref64.to(torch.float64)
    if y.numel() == 0:
        return torch.zeros_like(y)
    keep = torch.isfinite(y) if mask is None else (mask & torch.isfinite(y))
    a = y.abs().where(keep, torch.zeros_like(y))
    if probes64 is None:
        s = torch.zeros_like(y)
    else:
        d = (probes64.to(y.device, torch.float64) - y).abs()
        d = d.where(torch.isfinite(d), torch.zeros_like(d))  # a probe that overflowed says nothing
        s = d.pow(2).mean(0).sqrt().where(keep, torch.zeros_like(y))
    nan = torch.full_like(y, float("nan"))
    typical = _per_row(torch.nanmedian(_rows(s.where(keep, nan)), dim=-1).values.nan_to_num(0.0), y)
    rel = (s / a).where(keep & (a > 0), nan)
    kappa = _per_row(torch.nanmedian(_rows(rel), dim=-1).values.nan_to_num(0.0), y)
    size = _per_row(torch.nanmedian(_rows(a.where(keep, nan)), dim=-1).values.nan_to_num(0.0), y)
    steps = max(float(ROUNDINGS), float(_rows(y).shape[-1]) ** 0.5)
    w = torch.maximum(torch.maximum(s, torch.maximum(typical, steps * u * size).expand_as(s)),
                      torch.maximum(kappa * a, steps * u * a))
    return w.clamp_min(step).where(keep, torch.zeros_like(y))


def sensitivity_of(ref64: torch.Tensor, perturbed64: torch.Tensor | None) -> float:
    """The largest change of the oracle under :func:`perturb`, over the elements finite in both."""
    if perturbed64 is None or ref64.numel() == 0:
        return 0.0
    a, b = ref64.to(torch.float64), perturbed64.to(ref64.device, torch.float64)
    both = torch.isfinite(a) & torch.isfinite(b)
    return float((a - b).abs().where(both, torch.zeros_like(a)).max())


def gamma(n: int, u: float) -> float:
    nu = n * u
    if nu >= 1.0:
        return float("inf")
    return nu / (1.0 - nu)


@dataclass(frozen=True)
class ErrorContract:
    out_dtype: str
    u_out: float
    u_acc: float
    reduction_len: int
    u_operand: float = 0.0
    lipschitz: float = 1.0
    ref_factor: float | None = REF_FACTOR

    def allowed(self, ref64: torch.Tensor, scale64: torch.Tensor) -> torch.Tensor:
        """Per-element allowed absolute error, given the oracle and the op's error scale."""
        rel = self.lipschitz * (gamma(self.reduction_len, self.u_acc) + 2.0 * self.u_operand + self.u_acc)
        return self.u_out * ref64.abs() + rel * scale64 + _SUBNORMAL_STEP[self.out_dtype]

    def check(self, out: torch.Tensor, ref64: torch.Tensor, scale64: torch.Tensor,
              ref_in_dtype: torch.Tensor | None = None,
              perturbed64: torch.Tensor | None = None) -> tuple[bool, str]:
        """Apply both criteria; returns (ok, a one-line description of the worst element).

        ``perturbed64`` is the oracle on the perturbed inputs (:func:`perturb` with ``u_acc``,
        e.g. :meth:`~warpsmith.core.opspec.OpSpec.perturbed_oracle`): the second criterion's floor. Without
        it the floor is 0, which is stricter.

        Non-finite values are judged against the fp64 oracle rounded to the output dtype, never
        against the reference in the working dtype (whose special values depend on the CPU's vector
        ISA: torch's float32 ``gelu(+inf)`` is NaN on AVX-512 and +inf elsewhere): NaN exactly where
        the oracle has NaN; ±Inf where the oracle rounds to ±Inf. Where the oracle is finite and the
        working-dtype reference overflowed to ±Inf, the candidate may overflow the same way (it is
        then no worse than the reference); finite everywhere else.

        Every criterion is NaN-safe: an error scale that is NaN where the oracle is finite (``0 *
        inf`` at -inf inputs) allows no scaled error there (only ``u_out |y| + floor``), and no
        NaN can hide the worst element of the rest.
        """
        o = out.to(torch.float64)
        ref64 = ref64.to(torch.float64)
        expect = ref64.to(out.dtype).to(torch.float64)  # the oracle rounded to the output dtype
        nan_o, nan_e = torch.isnan(o), torch.isnan(expect)
        if not torch.equal(nan_o, nan_e):
            bad = (nan_o != nan_e).nonzero()[0].tolist()
            what = "NaN where the reference has none" if nan_o[tuple(bad)] else "the reference's NaN not propagated"
            return False, f"{what} (first at {tuple(bad)})"
        inf_e = torch.isinf(expect)
        wrong_inf = inf_e & ~(torch.isinf(o) & (torch.sign(o) == torch.sign(expect)))
        stray = torch.isinf(o) & ~inf_e
        if ref_in_dtype is not None:  # overflowed as the working-dtype reference did, where the oracle is finite
            r = ref_in_dtype.to(torch.float64)
            stray = stray & ~(torch.isinf(r) & (torch.sign(o) == torch.sign(r)))
        if wrong_inf.any() or stray.any():
            bad = (wrong_inf | stray).nonzero()[0].tolist()
            return False, f"infinities differ from the reference (first at {tuple(bad)})"
        compare = torch.isfinite(o) & torch.isfinite(ref64)
        zero = torch.zeros_like(o)
        err = (o - ref64).abs().where(compare, zero)
        scale = scale64.to(torch.float64).where(compare & ~torch.isnan(scale64), zero)
        allowed = self.allowed(ref64.where(compare, zero), scale)
        excess = (err / allowed).nan_to_num(nan=float("inf"))  # allowed > 0; a NaN here is a failure
        worst = int(torch.argmax(excess).item()) if excess.numel() else 0
        if excess.numel() and not bool(excess.flatten()[worst] <= 1.0):
            idx = tuple(torch.unravel_index(torch.tensor(worst), excess.shape))
            return False, (f"error {err.flatten()[worst].item():.3e} exceeds contract "
                           f"{allowed.flatten()[worst].item():.3e} at {tuple(int(i) for i in idx)}")
        max_err = float(err.max()) if err.numel() else 0.0
        if self.ref_factor is not None and ref_in_dtype is not None and err.numel():
            r = ref_in_dtype.to(torch.float64)
            both = compare & torch.isfinite(r)
            ref_err = float((r - ref64).abs().where(both, zero).max())
            largest = float(ref64.abs().where(both, zero).max())
            slack = self.u_out * largest
            sens = sensitivity_of(ref64, perturbed64)
            if not within_reference(float(err.where(both, zero).max()), ref_err, largest, self.u_out, self.ref_factor,
                                    sensitivity=sens)[0]:
                return False, (f"max error {max_err:.3e} exceeds {self.ref_factor:g}x the reference's own "
                               f"error in {self.out_dtype} ({ref_err:.3e}; the op's sensitivity to its inputs "
                               f"{sens:.3e}) + two ulps ({2 * slack:.3e})")
        return True, f"max error {max_err:.3e}, worst element at {excess.max().item() if excess.numel() else 0:.2f} of contract"

    def to_json(self) -> dict:
        return asdict(self)
