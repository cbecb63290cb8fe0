"""Comparing tensors: bitwise equality, shared memory, layout, and the error contract.

**The error contract** for a floating-point output compares three tensors:

- ``y`` is the candidate's output.
- ``y64`` is the oracle: the reference run on float64 copies of the inputs (and, for
  KernelBench, of the weights).
- ``r`` is the reference run in the working dtype.

and, per element, ``e_i = |y_i - y64_i|`` (the candidate's error) and ``e_r,i = |r_i - y64_i|``
(the reference's own error). The rules:

1. **Non-finite values.** NaN, +Inf and -Inf must be exactly where ``r`` has them (a reference
   whose all-zero row gives NaN, 0/0, requires NaN there; a candidate giving NaN where ``r`` is a
   number fails).
2. **Error, element by element.** Over the elements where ``r`` and ``y64`` are both finite, every
   element must satisfy

       e_i <= factor * max(e_r,i, rho * w_i) + 2 u |y64_i| + floor

   and the largest error must satisfy

       max e <= factor * max(max e_r, 2 max w) + 2 u max|y64| + floor

   - ``factor`` is 4 (:data:`~warpsmith.core.error_contract.REF_FACTOR`).
   - ``u`` is the unit roundoff of the output dtype (2^-24 fp32, 2^-11 fp16, 2^-8 bf16, 2^-4 /
     2^-3 fp8); ``2 u |y64_i|`` is the rounding of the element itself, and one more.
   - ``w_i`` is the element's own scale (:func:`warpsmith.core.error_contract.element_scale`), the largest
     of: ``s_i``, the oracle's change at that element when every input element moves by one
     rounding of *itself* (the root mean square over two probes,
     :func:`~warpsmith.core.error_contract.perturb_each`); the median of ``s`` over the element's row;
     the row's median relative change ``s / |y64|`` times ``|y64_i|``; ``n`` roundings of the element,
     ``n u' |y64_i|``, and of the row's median magnitude, ``n u' median |y64|``, with
     ``n = max(4, sqrt(L))`` for a row of length ``L`` (an element accumulated along its row rounds a
     partial result at every step: a random walk of ``L`` roundings); the dtype's smallest subnormal. A row is a slice along the last dimension (the whole tensor where that is
     shorter than 8). ``u'`` is the arithmetic's unit roundoff: 2^-24, or 2^-53 in float64 (float64
     inputs for the probes, a float64 output for the roundings).
   - ``rho = max(2, max_i e_r,i / w_i)``: the reference's own worst error in units of the scale, at
     least 2 (one probe's change understates a standard algorithm's error by about that much). The
     scale sets *where* error is allowed, the reference *how much*.
   - ``floor`` is float32's smallest normal, 2^-126 (results below it may be flushed to zero by a
     GPU's float32 arithmetic, as the reference's may), or the dtype's smallest subnormal where that
     is larger; for a float64 output, float64's smallest subnormal.

   Why per element: a tensor-wide bound (the largest error against the reference's largest error
   and a sensitivity that perturbs every input by ``u' max|input|``, the contract before) lets an
   error confined to small elements hide under the allowance of the large ones. On inputs with
   outliers (1% of them 100x larger) it let through inputs rounded to 13 mantissa bits, about 1000
   times the reference's own error at the typical elements; an element's scale here does not grow
   with the largest input. The row medians keep the correct kernels in, measured rather than
   assumed: a different summation order, or ``x w + b`` near ``-b``, whose error where the result
   cancels is that of the row's typical terms, not of the result, and which one probe may
   understate by chance; ``exp(x - logsumexp(x))`` softmax, whose rounding of ``logsumexp`` moves
   the whole row by one factor, its largest element included (whose own sensitivity is nearly 0).
   Medians, not maxima, so that one large element of a row does not lend its allowance to the
   small ones. The second inequality, on the largest error, is the tensor-wide bound with the
   element scale in place of the sensitivity: a reference much worse than the scale at one element
   does not lend that ratio to every element. Measured (60 draws per distribution, every
   distribution of :data:`~warpsmith.check.formats.DISTRIBUTIONS`, fp32): the worst correct
   candidate used at most 0.78 of its allowance (a 5x48 layer norm written out; matmuls in another
   summation order 0.6; ``exp(x - logsumexp(x))`` on a 6x40 softmax 0.49), while inputs or operands
   rounded to 13 mantissa bits were at least 15 times over it, except where that rounding changes
   nothing or next to nothing (powers of two; softmax of inputs of size 1e-3).
3. **Integer and bool outputs** must equal ``r`` exactly.
4. **A declared deviation.** A compiler that changed the program's numbers on purpose (values
   stored between kernels in 16 bits, :mod:`warpsmith.compiler.precision`) declares it: ``yd``,
   the program in float64 with the deviation applied. Its distance ``d_i = |yd_i - y64_i|`` joins
   the reference's error in rule 2 (``max(e_r,i, d_i, rho w_i)`` and ``max(max e_r, max d, 2 max w)``),
   and the output must also be within KernelBench's own tolerance against ``r`` everywhere:
   ``|y - r| <= t (1 + |r|)``, ``t`` = 1e-4 for float32, 1e-2 for float16 and bfloat16
   (:data:`warpsmith.core.error_contract.KERNELBENCH_TOLERANCE`). No declaration loosens the contract past
   KernelBench's.

:func:`probe_oracle` computes the probes (the oracle on perturbed copies of a draw's inputs); the
harness passes them to :func:`judge` as ``perturbed``. The library verifier's
:class:`~warpsmith.core.error_contract.ErrorContract` keeps its own two criteria (a per-op error scale,
and :func:`~warpsmith.core.error_contract.within_reference`).

The functions bind the torch functions they use when this module is imported. A candidate
that patches ``torch.equal`` or ``torch.Tensor.__sub__`` therefore cannot change these
comparisons, and :class:`~warpsmith.check.guards.PatchGuard` reports the patch.
"""
from __future__ import annotations

from builtins import (all, float, int, isinstance, len, list, max, range, sorted, str, tuple,  # pinned against later
                      type, zip)  # patches of builtins
from typing import Any, Callable, Sequence

import torch

from ..core.error_contract import (KERNELBENCH_TOLERANCE, REF_FACTOR, element_scale, perturb_each, within_reference,
                             within_tolerance)
from ..core.dtypes import SUBNORMAL_STEP_OF as SUBNORMAL_STEP, UNIT_ROUNDOFF_OF as UNIT_ROUNDOFF
from ..verify.harness import unwritten

_abs, _sub, _amax, _where = torch.abs, torch.sub, torch.amax, torch.where
_isnan, _isposinf, _isneginf, _isfinite = torch.isnan, torch.isposinf, torch.isneginf, torch.isfinite
_equal, _clone, _sum, _stack = torch.equal, torch.clone, torch.sum, torch.stack
_maximum, _div, _argmax = torch.maximum, torch.div, torch.argmax
_logical_and, _logical_not = torch.logical_and, torch.logical_not
_zeros_like = torch.zeros_like
_Tensor = torch.Tensor
_float64, _uint8 = torch.float64, torch.uint8

PROBES = 2  # perturbed oracles per draw (:func:`probe_oracle`): the element scale's sensitivity
RHO_MIN = 2.0  # the least multiple of the element scale allowed (module docstring, rule 2)
FTZ_FLOOR = 2.0**-126  # float32's smallest normal: a result below it may be flushed to zero


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The values of ``t`` as a flat uint8 tensor (a copy where ``t`` is not contiguous)."""
    flat = _clone(t.detach(), memory_format=torch.contiguous_format).reshape(-1)
    return flat.view(_uint8)


def bitwise_equal(a: Any, b: Any) -> bool:
    """Same shape, dtype and bytes (NaN payloads included). Non-tensors compare with ``==``."""
    if isinstance(a, _Tensor) and isinstance(b, _Tensor):
        if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
            return False
        if a.device != b.device:
            b = b.to(a.device)
        return bool(_equal(as_bytes(a), as_bytes(b)))
    if isinstance(a, _Tensor) or isinstance(b, _Tensor):
        return False
    return bool(a == b)


def snapshot(t: Any) -> Any:
    """A private copy of ``t`` (same strides for a dense tensor); non-tensors are returned as is."""
    return _clone(t.detach()) if isinstance(t, _Tensor) else t


def _span(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the storages under ``a`` and ``b`` overlap (any bytes, not only the viewed ones)."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: the elements tile one block of memory, in some dimension order."""
    dims = sorted((d for d in range(t.dim()) if t.shape[d] != 1), key=lambda d: t.stride(d))
    expected = 1
    for d in dims:
        if t.stride(d) != expected:
            return False
        expected *= t.shape[d]
    return True


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    idx = mask.nonzero()
    return tuple(int(i) for i in idx[0]) if len(idx) else ()


def probe_oracle(run_oracle: Callable[[list[Any]], Sequence[Any]], args: Sequence[Any], u: float,
                 probes: int = PROBES) -> tuple[Any, ...]:
    """The oracle on ``probes`` copies of ``args`` whose floating elements each moved by one rounding
    of themselves (:func:`~warpsmith.core.error_contract.perturb_each`, seeds 0, 1, ...; ``u`` the
    arithmetic's unit roundoff), stacked per output on a new first dimension: :func:`judge`'s
    ``perturbed``."""
    runs = [list(run_oracle(list(perturb_each({str(i): a for i, a in enumerate(args)}, u, seed=k).values())))
            for k in range(probes)]
    out = []
    for i, first in enumerate(runs[0]):
        each = [r[i] if i < len(r) else None for r in runs]
        same = all(isinstance(t, _Tensor) and t.shape == first.shape for t in each)
        out.append(_stack([t.detach() for t in each]) if isinstance(first, _Tensor) and same else first)
    return tuple(out)


def _probes(perturbed: torch.Tensor | None, y: torch.Tensor) -> torch.Tensor | None:
    """``perturbed`` as stacked probes of ``y`` (one probe of ``y``'s shape is a stack of one)."""
    if not isinstance(perturbed, _Tensor):
        return None
    if tuple(perturbed.shape) == tuple(y.shape):
        return perturbed.to(y.device, _float64).unsqueeze(0)
    if perturbed.dim() == y.dim() + 1 and tuple(perturbed.shape[1:]) == tuple(y.shape) and perturbed.shape[0] > 0:
        return perturbed.to(y.device, _float64)
    return None


def judge(out: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor, factor: float = REF_FACTOR,
          perturbed: torch.Tensor | None = None, declared: torch.Tensor | None = None) -> tuple[bool, str]:
    """Apply the error contract (module docstring) to one output; returns (ok, a one-line account).
    ``perturbed`` is the oracle on perturbed inputs (:func:`probe_oracle`: probes stacked on a new
    first dimension, or one probe of the output's shape): the element scale's sensitivity;
    ``declared`` the float64 program with a deviation its compiler declared (rule 4)."""
    ref, oracle = ref.to(out.device), oracle.to(out.device)
    if not ref.is_floating_point():
        if bitwise_equal(out.to(ref.dtype), ref) and out.dtype == ref.dtype:
            return True, "exactly equal (integer output)"
        bad = out.to(ref.dtype) != ref
        at = _first(bad)
        return False, (f"{int(_sum(bad))} elements differ from the reference (integer output; exact match "
                       f"required), first at {at}")
    o, r, y = out.to(_float64), ref.to(_float64), oracle.to(_float64)
    for name, test in (("NaN", _isnan), ("+Inf", _isposinf), ("-Inf", _isneginf)):
        mismatch = test(o) != test(r)
        if bool(mismatch.any()):
            what = "where the reference has a number" if bool(test(o)[mismatch].any()) else "missing"
            return False, f"{name} pattern differs from the reference's ({name} {what}, first at {_first(mismatch)})"
    dtype = str(ref.dtype).replace("torch.", "")
    if o.numel() == 0:
        return True, "empty output"
    mask = _logical_and(_isfinite(r), _isfinite(y))
    zero = _zeros_like(o)
    err = _where(mask, _abs(_sub(o, y)), zero)
    ref_err = _where(mask, _abs(_sub(r, y)), zero)
    mag = _where(mask, _abs(y), zero)
    u = UNIT_ROUNDOFF.get(ref.dtype, 2.0**-24)
    u_arith = 2.0**-53 if ref.dtype == _float64 else 2.0**-24
    step = SUBNORMAL_STEP.get(ref.dtype, 0.0)
    floor = step if ref.dtype == _float64 else max(step, FTZ_FLOOR)
    w = element_scale(y, _probes(perturbed, y), u_arith, step, mask)
    dev = zero
    if isinstance(declared, _Tensor) and tuple(declared.shape) == tuple(y.shape):
        d64 = declared.to(y.device, _float64)
        dev = _where(_logical_and(mask, _isfinite(d64)), _abs(_sub(d64, y)), zero)
    rho = max(RHO_MIN, float(_amax(_where(w > 0, _div(ref_err, w), zero))))
    own = _maximum(_maximum(ref_err, dev), rho * w)
    allowed = factor * own + 2.0 * u * mag + floor
    ratio = _where(mask, _div(err, allowed), zero)
    worst = int(_argmax(ratio))
    at = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), ratio.shape))
    flat = lambda t: float(t.reshape(-1)[worst])  # noqa: E731
    big_err, big_ref, big_dev = float(_amax(err)), float(_amax(ref_err)), float(_amax(dev))
    decl = f"; the declared deviation {flat(dev):.3e}" if declared is not None else ""
    if not float(ratio.reshape(-1)[worst]) <= 1.0:
        return False, (f"error {flat(err):.3e} vs the fp64 oracle at {at} (oracle {flat(y):.3e}) exceeds the "
                       f"{flat(allowed):.3e} allowed there: {factor:g}x the larger of the reference's own error "
                       f"there in {dtype} ({flat(ref_err):.3e}) and {rho:.3g}x the element's scale "
                       f"({flat(w):.3e}, the oracle's change when the inputs move by one rounding){decl}, "
                       f"+ two ulps of the element ({2 * u * flat(mag):.3e})")
    scale = max(RHO_MIN * float(_amax(w)), big_dev)
    ok, cap = within_reference(big_err, big_ref, float(_amax(mag)), u, factor, floor, scale)
    if not ok:
        at_max = _first(_logical_and(mask, err == big_err))
        return False, (f"max error {big_err:.3e} vs the fp64 oracle (at {at_max}) exceeds {factor:g}x the larger "
                       f"of the reference's own largest error in {dtype} ({big_ref:.3e}) and twice the largest "
                       f"element scale ({RHO_MIN * float(_amax(w)):.3e})"
                       f"{f'; the declared deviation {big_dev:.3e}' if declared is not None else ''} "
                       f"+ two ulps of the largest value ({2 * u * float(_amax(mag)):.3e})")
    if declared is not None:
        capped, share = within_tolerance(o, r, ref.dtype)
        if not capped:
            return False, (f"with the declared deviation ({big_dev:.3e}), the error against the reference reaches "
                           f"{share:.3g}x KernelBench's tolerance for {dtype} "
                           f"({KERNELBENCH_TOLERANCE.get(ref.dtype, KERNELBENCH_TOLERANCE[torch.float32]):g}, "
                           "atol = rtol), the cap of any declaration")
    return True, (f"max error {big_err:.3e}, reference's {big_ref:.3e}; the worst element at "
                  f"{float(ratio.reshape(-1)[worst]):.2f} of its allowance {flat(allowed):.3e}"
                  + (f" (declared deviation {big_dev:.3e}, capped at KernelBench's tolerance)"
                     if declared is not None else ""))


def identity(t: torch.Tensor) -> tuple:
    """Where and how ``t`` lives: data pointer, storage, shape, strides, dtype."""
    return (t.data_ptr(), t.untyped_storage().data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)


def same_layout(a: list[Any], b: list[Any]) -> bool:
    """Two argument lists with tensors of equal shapes and dtypes in the same places."""
    return len(a) == len(b) and all(
        (isinstance(x, _Tensor) and isinstance(y, _Tensor) and x.shape == y.shape and x.dtype == y.dtype)
        or (not isinstance(x, _Tensor) and not isinstance(y, _Tensor)) for x, y in zip(a, b))


def describe(t: Any) -> str:
    """``float32[8, 40]`` for a tensor, the type name otherwise."""
    if isinstance(t, _Tensor):
        return f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}"
    return type(t).__name__ if not isinstance(t, (int, float, bool)) else repr(t)


__all__ = ["UNIT_ROUNDOFF", "SUBNORMAL_STEP", "REF_FACTOR", "PROBES", "bitwise_equal", "snapshot", "shares_memory",
           "dense", "unwritten", "judge", "probe_oracle", "describe", "identity", "same_layout"]
