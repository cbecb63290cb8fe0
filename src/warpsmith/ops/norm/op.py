"""``warpsmith.ops.rms_norm`` and ``warpsmith.ops.layer_norm``: validate, then call the
``warpsmith::rms_norm`` / ``warpsmith::layer_norm`` custom ops (differentiable).

``warpsmith::rms_norm``, ``warpsmith::layer_norm`` and their ``*_backward`` custom ops, with fake
(meta) kernels and autograd.

The ops take validated 2-D (M, N) inputs (``warpsmith.ops.norm`` flattens the leading dimensions)
and return a fixed number of tensors: ``(y, s, rstd)`` for RMSNorm and ``(y, s, mean, rstd)`` for
LayerNorm, where ``s = x + residual`` is an empty (0,) tensor when no residual was given (a
custom op's outputs cannot be optional). The backward ops return ``(dx, dw)`` and
``(dx, dw, db)``, an absent parameter's gradient again an empty (0,) tensor. Autograd saves the
normalized input (x, or s when the residual add was fused) and the statistics, so the backward
never recomputes them; with a residual, the gradient flowing into the returned sum is added
inside the backward kernel, and the result is the gradient of both x and the residual.
"""
from __future__ import annotations

import math
from typing import Optional, Union

import torch

from ...core.dtypes import dtype_name, param_dtype_attr
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...dispatch import launch
from ..shared.validate import check_device, check_dtype, check_like, check_nonempty, check_tensor
from .spec import NORM_SPECS, RMS_NORM
from .variant import VARIANTS

_SPECS = {s.name: s for s in NORM_SPECS}

Tensor = torch.Tensor


def problem_of(op: str, x: Tensor, has_weight: bool, has_bias: bool, param_dtype: torch.dtype, residual: bool,
               eps: float) -> Problem:
    """The Problem a (validated) call solves; ``op`` is one of the four norm op names and
    ``param_dtype`` the weight's (and bias') dtype: x's, or float32."""
    weight_dtype = param_dtype_attr(param_dtype, x.dtype)
    attrs = {"weight": has_weight, "weight_dtype": weight_dtype, "residual": residual, "eps": eps}
    if op.startswith("layer_norm"):
        attrs["bias"] = has_bias
    return _SPECS[op].problem({"M": x.shape[0], "N": x.shape[1]}, x.dtype, attrs)


def _param_dtype(x: Tensor, *params: Optional[Tensor]) -> torch.dtype:
    given = [p for p in params if p is not None]
    return given[0].dtype if given else x.dtype


def _empty(x: Tensor) -> Tensor:
    return x.new_empty((0,))


def _forward(op: str, x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], residual: Optional[Tensor],
             eps: float) -> tuple[Tensor, ...]:
    inputs = {"x": x}
    for k, v in (("weight", weight), ("bias", bias), ("residual", residual)):
        if v is not None:
            inputs[k] = v
    p = problem_of(op, x, weight is not None, bias is not None, _param_dtype(x, weight, bias), residual is not None, eps)
    outs = launch(p, VARIANTS, inputs)
    if residual is None:
        outs = (outs[0], _empty(x)) + tuple(outs[1:])
    return tuple(outs)


def _fake_forward(x: Tensor, residual: Optional[Tensor], stats: int) -> tuple[Tensor, ...]:
    s = x.new_empty(x.shape) if residual is not None else _empty(x)
    return (x.new_empty(x.shape), s) + tuple(x.new_empty((x.shape[0],), dtype=torch.float32) for _ in range(stats))


# ---- RMSNorm ------------------------------------------------------------------------------------
@torch.library.custom_op("warpsmith::rms_norm", mutates_args=())
def rms_norm_op(x: Tensor, weight: Optional[Tensor], residual: Optional[Tensor],
                eps: float) -> tuple[Tensor, Tensor, Tensor]:
    return _forward("rms_norm", x, weight, None, residual, eps)


@rms_norm_op.register_fake
def _(x, weight, residual, eps):
    return _fake_forward(x, residual, 1)


@torch.library.custom_op("warpsmith::rms_norm_backward", mutates_args=())
def rms_norm_backward_op(dy: Tensor, x: Tensor, weight: Optional[Tensor], rstd: Tensor, ds: Optional[Tensor],
                         eps: float) -> tuple[Tensor, Tensor]:
    inputs = {"dy": dy, "x": x, "rstd": rstd}
    if weight is not None:
        inputs["weight"] = weight
    if ds is not None:
        inputs["ds"] = ds
    p = problem_of("rms_norm_backward", x, weight is not None, False, _param_dtype(x, weight), ds is not None, eps)
    outs = launch(p, VARIANTS, inputs)
    return outs[0], (outs[1] if weight is not None else _empty(x))


@rms_norm_backward_op.register_fake
def _(dy, x, weight, rstd, ds, eps):
    return x.new_empty(x.shape), (weight.new_empty(weight.shape) if weight is not None else _empty(x))


def rows(t: Tensor) -> Tensor:
    """(..., N) -> (M, N) as the kernels take it: a view where the strides allow one (row stride
    free, unit column stride), else a copy."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 or t2.shape[-1] == 1 else t2.contiguous()


def _rms_setup(ctx, inputs, output) -> None:
    x, weight, residual, eps = inputs
    y, s, rstd = output
    ctx.has_res = residual is not None
    ctx.eps = eps
    ctx.save_for_backward(s if ctx.has_res else x, weight, rstd)


def _rms_backward(ctx, dy, ds, _drstd):
    xn, weight, rstd = ctx.saved_tensors
    dx, dw = rms_norm_backward_op(rows(dy), xn, weight, rstd, rows(ds) if ctx.has_res else None, ctx.eps)
    return dx, (dw if weight is not None and ctx.needs_input_grad[1] else None), (dx if ctx.has_res else None), None


rms_norm_op.register_autograd(_rms_backward, setup_context=_rms_setup)


# ---- LayerNorm ----------------------------------------------------------------------------------
@torch.library.custom_op("warpsmith::layer_norm", mutates_args=())
def layer_norm_op(x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], residual: Optional[Tensor],
                  eps: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _forward("layer_norm", x, weight, bias, residual, eps)


@layer_norm_op.register_fake
def _(x, weight, bias, residual, eps):
    return _fake_forward(x, residual, 2)


@torch.library.custom_op("warpsmith::layer_norm_backward", mutates_args=())
def layer_norm_backward_op(dy: Tensor, x: Tensor, weight: Optional[Tensor], has_bias: bool, mean: Tensor, rstd: Tensor,
                           ds: Optional[Tensor], eps: float, param_dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    """``param_dtype``: the dtype of the weight and bias (that of db when there is no weight)."""
    inputs = {"dy": dy, "x": x, "mean": mean, "rstd": rstd}
    if weight is not None:
        inputs["weight"] = weight
    if ds is not None:
        inputs["ds"] = ds
    p = problem_of("layer_norm_backward", x, weight is not None, has_bias, param_dtype, ds is not None, eps)
    outs = list(launch(p, VARIANTS, inputs))
    dw = outs.pop(1) if weight is not None else _empty(x)
    db = outs.pop(1) if has_bias else _empty(x)
    return outs[0], dw, db


@layer_norm_backward_op.register_fake
def _(dy, x, weight, has_bias, mean, rstd, ds, eps, param_dtype):
    dw = weight.new_empty(weight.shape) if weight is not None else _empty(x)
    db = x.new_empty((x.shape[1],), dtype=param_dtype) if has_bias else _empty(x)
    return x.new_empty(x.shape), dw, db


def _ln_setup(ctx, inputs, output) -> None:
    x, weight, bias, residual, eps = inputs
    y, s, mean, rstd = output
    ctx.has_res = residual is not None
    ctx.has_bias = bias is not None
    ctx.param_dtype = _param_dtype(x, weight, bias)
    ctx.eps = eps
    ctx.save_for_backward(s if ctx.has_res else x, weight, mean, rstd)


def _ln_backward(ctx, dy, ds, _dmean, _drstd):
    xn, weight, mean, rstd = ctx.saved_tensors
    dx, dw, db = layer_norm_backward_op(rows(dy), xn, weight, ctx.has_bias, mean, rstd,
                                        rows(ds) if ctx.has_res else None, ctx.eps, ctx.param_dtype)
    return (dx, dw if weight is not None and ctx.needs_input_grad[1] else None,
            db if ctx.has_bias and ctx.needs_input_grad[2] else None, dx if ctx.has_res else None, None)


layer_norm_op.register_autograd(_ln_backward, setup_context=_ln_setup)


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


__all__ = ["rms_norm_op", "rms_norm_backward_op", "layer_norm_op", "layer_norm_backward_op", "problem_of",
           "rms_norm", "layer_norm"]
