"""Comparing tensors: bitwise equality, shared memory, layout, and the error contract.

**The error contract** for a floating-point output has three parts:

- ``y`` is the candidate's output.
- ``y64`` is the oracle: the reference run on float64 copies of the inputs (and, for
  KernelBench, of the weights).
- ``r`` is the reference run in the working dtype.

The rules:

1. **Non-finite values.** NaN, +Inf and -Inf must be exactly where ``r`` has them.
2. **Error.** Over the elements where ``r`` and ``y64`` are both finite:

       max|y - y64| <= factor * max(max|r - y64|, s) + 2 u * max|y64| + floor

   - ``u`` is the unit roundoff of the output dtype (2^-24 fp32, 2^-11 fp16, 2^-8 bf16,
     2^-4 / 2^-3 fp8).
   - ``factor`` is 4.
   - ``floor`` is the dtype's smallest subnormal step.
   - ``s`` is the op's sensitivity to its inputs: the largest change of the oracle when every
     element of every floating input moves by ``u' * max|input|`` on average (``u'`` = 2^-24, or 2^-53
     for float64 inputs; :func:`warpsmith.core.contract.perturb`). A standard algorithm less lucky
     than PyTorch's on these inputs (``exp(x - logsumexp(x))`` for softmax) is not rejected for it.

   This is the second criterion of :class:`warpsmith.core.contract.ErrorContract`
   (:func:`~warpsmith.core.contract.within_reference`, the same function): the
   candidate may be a few times worse than PyTorch's own result in the same dtype, plus two
   ulps of the largest magnitude, and no worse. The first, rigorous criterion of that class
   needs a per-op error scale (such as ``|A| @ |B|``), and an arbitrary reference does not
   come with one.

   *Limit:* the bound is on the largest error. An error confined to elements much smaller
   than the largest one can hide under it.
3. **Integer and bool outputs** must equal ``r`` exactly.
4. **A declared deviation.** A compiler that changed the program's numbers on purpose (values
   stored between kernels in 16 bits, :mod:`warpsmith.compiler.precision`) declares it: ``yd``,
   the program in float64 with the deviation applied. Its distance ``d = max|yd - y64|`` joins
   ``s`` in rule 2 (``max(max|r - y64|, s, d)``), and the output must also be within KernelBench's
   own tolerance against ``r`` everywhere: ``|y - r| <= t (1 + |r|)``, ``t`` = 1e-4 for float32,
   1e-2 for float16 and bfloat16 (:data:`warpsmith.core.contract.KERNELBENCH_TOLERANCE`). No
   declaration loosens the contract past KernelBench's.

The functions bind the torch functions they use when this module is imported. A candidate
that patches ``torch.equal`` or ``torch.Tensor.__sub__`` therefore cannot change these
comparisons, and :class:`~warpsmith.check.guards.PatchGuard` reports the patch.
"""
from __future__ import annotations

from builtins import all, isinstance, len, sorted, type, zip  # pinned against later patches of builtins
from typing import Any

import torch

from ..core.contract import KERNELBENCH_TOLERANCE, REF_FACTOR, sensitivity_of, within_reference, within_tolerance
from ..core.dtypes import SUBNORMAL_STEP_OF as SUBNORMAL_STEP, UNIT_ROUNDOFF_OF as UNIT_ROUNDOFF
from ..verify.harness import unwritten

_abs, _sub, _amax, _where = torch.abs, torch.sub, torch.amax, torch.where
_isnan, _isposinf, _isneginf, _isfinite = torch.isnan, torch.isposinf, torch.isneginf, torch.isfinite
_equal, _clone, _sum = torch.equal, torch.clone, torch.sum
_logical_and, _logical_not = torch.logical_and, torch.logical_not
_zeros_like = torch.zeros_like
_Tensor = torch.Tensor
_float64, _uint8 = torch.float64, torch.uint8


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


def judge(out: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor, factor: float = REF_FACTOR,
          perturbed: torch.Tensor | None = None, declared: torch.Tensor | None = None) -> tuple[bool, str]:
    """Apply the error contract (module docstring) to one output; returns (ok, a one-line account).
    ``perturbed`` is the oracle on the inputs rounded once (the floor of the reference's error);
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
            return False, f"{name} pattern differs from the reference's (first at {_first(mismatch)})"
    mask = _logical_and(_isfinite(r), _isfinite(y))
    zero = _zeros_like(o)
    err = _amax(_where(mask, _abs(_sub(o, y)), zero)) if o.numel() else zero.sum()
    ref_err = _amax(_where(mask, _abs(_sub(r, y)), zero)) if o.numel() else zero.sum()
    big = _amax(_where(mask, _abs(y), zero)) if o.numel() else zero.sum()
    u = UNIT_ROUNDOFF.get(ref.dtype, 2.0**-24)
    sens = sensitivity_of(y, perturbed) if perturbed is not None and perturbed.shape == y.shape else 0.0
    dev = sensitivity_of(y, declared) if declared is not None and declared.shape == y.shape else 0.0
    ok, allowed = within_reference(float(err), float(ref_err), float(big), u, factor,
                                   SUBNORMAL_STEP.get(ref.dtype, 0.0), max(sens, dev))
    if ok and declared is not None:
        capped, ratio = within_tolerance(o, r, ref.dtype)
        if not capped:
            return False, (f"with the declared deviation ({dev:.3e}), the error against the reference reaches "
                           f"{ratio:.3g}x KernelBench's tolerance for {str(ref.dtype).replace('torch.', '')} "
                           f"({KERNELBENCH_TOLERANCE.get(ref.dtype, KERNELBENCH_TOLERANCE[torch.float32]):g}, "
                           "atol = rtol), the cap of any declaration")
    if not ok:
        worst = _first(_logical_and(mask, _abs(_sub(o, y)) == err))
        return False, (f"max error {float(err):.3e} vs the fp64 oracle (at {worst}) exceeds {factor:g}x the "
                       f"reference's own error in {str(ref.dtype).replace('torch.', '')} ({float(ref_err):.3e}; "
                       f"the op's sensitivity to its inputs {sens:.3e}"
                       f"{f'; the declared deviation {dev:.3e}' if declared is not None else ''}) "
                       f"+ two ulps of the largest value ({2 * u * float(big):.3e})")
    return True, (f"max error {float(err):.3e}, reference's {float(ref_err):.3e}, allowed {allowed:.3e}"
                  + (f" (declared deviation {dev:.3e}, capped at KernelBench's tolerance)" if declared is not None else ""))


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


__all__ = ["UNIT_ROUNDOFF", "SUBNORMAL_STEP", "REF_FACTOR", "bitwise_equal", "snapshot", "shares_memory", "dense",
           "unwritten", "judge", "describe", "identity", "same_layout"]
