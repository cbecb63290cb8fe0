"""``warpsmith.ops.rms_norm`` and ``warpsmith.ops.layer_norm``: validate, then call the
``warpsmith::rms_norm`` / ``warpsmith::layer_norm`` custom ops (differentiable)."""
from __future__ import annotations

import math
from typing import Optional, Union

import torch

from ..errors import InvalidInputError
from ..runtime.norm_ops import layer_norm_op, rms_norm_op, rows
from ..spec.dtypes import dtype_name
from ..spec.norm import RMS_NORM
from .validate import check_device, check_dtype, check_like, check_nonempty, check_tensor

Result = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]


def _check(x: object, residual: object, eps: object, **params: object) -> tuple:
    """Validate everything before anything is computed; returns the tensors as (M, N) rows."""
    x = check_tensor("x", x)
    check_nonempty("x", x)
    check_dtype("x", x, RMS_NORM.dtypes)
    check_device("x", x)
    N = x.shape[-1]
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or not 0 <= eps <= 1:
        raise InvalidInputError("eps", "a number in [0, 1]", eps)
    checked = {}
    allowed = (x.dtype, torch.float32)
    for name, p in params.items():
        if p is None:
            checked[name] = None
            continue
        p = check_tensor(name, p)
        check_like(name, p, "x", x, shape=(N,), dtype=False)
        if p.dtype not in allowed:
            raise InvalidInputError(f"dtype of {name}", f"{dtype_name(x.dtype)} (as x) or float32", str(p.dtype))
        checked[name] = p if p.stride(0) == 1 or N == 1 else p.contiguous()
    given = [p for p in checked.values() if p is not None]
    if len(given) == 2 and given[0].dtype != given[1].dtype:
        raise InvalidInputError("dtype of bias", f"{given[0].dtype} (as weight)", str(given[1].dtype))
    r2 = None
    if residual is not None:
        residual = check_tensor("residual", residual)
        check_like("residual", residual, "x", x, shape=tuple(x.shape))
        r2 = rows(residual)
    return rows(x), checked, r2, float(eps)


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: float = 1e-6,
             residual: Optional[torch.Tensor] = None) -> Result:
    """RMSNorm over the last dimension: ``y = x * rstd * weight``, ``rstd = 1/sqrt(mean(x^2) + eps)``.

    Statistics are computed in fp32 and ``y`` is rounded once to x's dtype (as
    ``torch.nn.functional.rms_norm``, and as HF's LlamaRMSNorm up to its intermediate rounding).
    Differentiable with respect to x, weight and residual.

    Args:
        x: (..., N) float16, bfloat16 or float32; any strides (rows are read in place when the last
            dimension has unit stride and the leading ones flatten without a copy, else copied).
        weight: optional (N,), in x's dtype or float32 (fp32 parameters with half-precision
            activations); its gradient has its dtype.
        eps: added to the mean of squares, a number in [0, 1].
        residual: optional (..., N) like x: the sum ``s = x + residual`` (rounded to x's dtype) is
            normalized instead of x, in the same kernel, and returned too.

    Returns:
        ``y`` (..., N) in x's dtype, contiguous; or ``(y, s)`` when ``residual`` is given.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices or eps (nothing is computed).
    """
    x2, params, r2, eps = _check(x, residual, eps, weight=weight)
    y, s, _ = rms_norm_op(x2, params["weight"], r2, eps)
    y = y.view(x.shape)
    return y if residual is None else (y, s.view(x.shape))


def layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5, residual: Optional[torch.Tensor] = None) -> Result:
    """LayerNorm over the last dimension: ``y = (x - mean) * rstd * weight + bias``,
    ``rstd = 1/sqrt(var + eps)`` with the biased variance (as ``torch.nn.functional.layer_norm``).

    Statistics are computed in fp32 and ``y`` is rounded once to x's dtype. Differentiable with
    respect to x, weight, bias and residual.

    Args:
        x: (..., N) float16, bfloat16 or float32; any strides (see :func:`rms_norm`).
        weight: optional (N,), in x's dtype or float32.
        bias: optional (N,), same dtype as weight (x's dtype or float32).
        eps: added to the variance, a number in [0, 1].
        residual: optional (..., N) like x: ``s = x + residual`` is normalized and returned too.

    Returns:
        ``y`` (..., N) in x's dtype, contiguous; or ``(y, s)`` when ``residual`` is given.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices or eps (nothing is computed).
    """
    x2, params, r2, eps = _check(x, residual, eps, weight=weight, bias=bias)
    y, s, _, _ = layer_norm_op(x2, params["weight"], params["bias"], r2, eps)
    y = y.view(x.shape)
    return y if residual is None else (y, s.view(x.shape))


__all__ = ["rms_norm", "layer_norm"]
