"""``warpsmith.ops.batch_norm``, ``group_norm`` and ``instance_norm``: validate, call the
``warpsmith::batch_norm`` / ``warpsmith::group_norm`` custom ops (differentiable), and update
running statistics in place as torch does.

Running statistics (batch norm in training, instance norm with running stats):
``running = (1 - momentum) running + momentum stat``, with the unbiased variance
(n / (n - 1) times the biased one that normalizes) for ``running_var``; instance norm averages
the per-instance statistics over the batch first (as torch's instance_norm does). The modules in
:mod:`warpsmith.nn` turn ``momentum=None`` into torch's cumulative average (1 / batches seen).
"""
from __future__ import annotations

from typing import Optional

import torch

from ....core.errors import InvalidInputError
from ....dispatch import launch
from ...shared.validate import check_device, check_dtype, check_tensor
from .spec import CHANNEL_SPECS
from .variant import VARIANTS

_SPECS = {s.name: s for s in CHANNEL_SPECS}
Tensor = torch.Tensor


def _channels_last(x3: Tensor) -> bool:
    return x3.shape[1] > 1 and x3.shape[2] > 1 and x3.stride(1) == 1


def _problem(op: str, x3: Tensor, weight, bias, eps: float, training: bool = True, groups: int = 1):
    attrs = {"weight": weight is not None, "bias": bias is not None, "channels_last": _channels_last(x3), "eps": eps}
    if op.startswith("batch"):
        attrs["training"] = training
    else:
        attrs["groups"] = groups
    N, C, S = x3.shape
    return _SPECS[op].problem({"N": N, "C": C, "S": S}, x3.dtype, attrs)


def _empty(x: Tensor) -> Tensor:
    return x.new_empty((0,), dtype=torch.float32)


def _inputs(x3, weight, bias, **more):
    d = {"x": x3, **{k: v for k, v in more.items() if v is not None}}
    if weight is not None:
        d["weight"] = weight
    if bias is not None:
        d["bias"] = bias
    return d


# ---- batch norm -------------------------------------------------------------------------------------
@torch.library.custom_op("warpsmith::batch_norm", mutates_args=())
def batch_norm_op(x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], running_mean: Optional[Tensor],
                  running_var: Optional[Tensor], training: bool, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    p = _problem("batch_norm", x, weight, bias, eps, training)
    outs = launch(p, VARIANTS, _inputs(x, weight, bias, running_mean=None if training else running_mean,
                                       running_var=None if training else running_var))
    return (outs[0], outs[1], outs[2]) if training else (outs[0], _empty(x), _empty(x))


@batch_norm_op.register_fake
def _(x, weight, bias, running_mean, running_var, training, eps):
    n = x.shape[1] if training else 0
    return torch.empty_like(x), x.new_empty((n,), dtype=torch.float32), x.new_empty((n,), dtype=torch.float32)


@torch.library.custom_op("warpsmith::batch_norm_backward", mutates_args=())
def batch_norm_backward_op(dy: Tensor, x: Tensor, weight: Optional[Tensor], mean: Tensor, var: Tensor,
                           training: bool, has_bias: bool, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    bias = torch.empty(0) if has_bias else None
    p = _problem("batch_norm_backward", x, weight, bias, eps, training)
    stats = {"mean": mean, "var": var} if training else {"running_mean": mean, "running_var": var}
    ins = {"dy": dy, "x": x, **stats}
    if weight is not None:
        ins["weight"] = weight
    outs = list(launch(p, VARIANTS, ins))
    dw = outs.pop(1) if weight is not None else _empty(x)
    db = outs.pop(1) if has_bias else _empty(x)
    return outs[0], dw, db


@batch_norm_backward_op.register_fake
def _(dy, x, weight, mean, var, training, has_bias, eps):
    dw = weight.new_empty(weight.shape) if weight is not None else _empty(x)
    return torch.empty_like(x), dw, x.new_empty((x.shape[1] if has_bias else 0,), dtype=torch.float32)


def _bn_setup(ctx, inputs, output):
    x, weight, bias, rm, rv, training, eps = inputs
    ctx.training, ctx.eps, ctx.has_bias = training, eps, bias is not None
    ctx.save_for_backward(x, weight, output[1] if training else rm, output[2] if training else rv)


def _bn_backward(ctx, dy, _dm, _dv):
    x, weight, mean, var = ctx.saved_tensors
    dx, dw, db = batch_norm_backward_op(dy.contiguous() if dy.stride() != x.stride() else dy, x, weight, mean, var,
                                        ctx.training, ctx.has_bias, ctx.eps)
    return dx, (dw if weight is not None else None), (db.to(weight.dtype if weight is not None else db.dtype)
                                                      if ctx.has_bias else None), None, None, None, None


batch_norm_op.register_autograd(_bn_backward, setup_context=_bn_setup)


# ---- group norm -------------------------------------------------------------------------------------
@torch.library.custom_op("warpsmith::group_norm", mutates_args=())
def group_norm_op(x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], groups: int,
                  eps: float) -> tuple[Tensor, Tensor, Tensor]:
    y, mean, var = launch(_problem("group_norm", x, weight, bias, eps, groups=groups), VARIANTS,
                          _inputs(x, weight, bias))
    return y, mean, var


@group_norm_op.register_fake
def _(x, weight, bias, groups, eps):
    st = (x.shape[0], groups)
    return torch.empty_like(x), x.new_empty(st, dtype=torch.float32), x.new_empty(st, dtype=torch.float32)


@torch.library.custom_op("warpsmith::group_norm_backward", mutates_args=())
def group_norm_backward_op(dy: Tensor, x: Tensor, weight: Optional[Tensor], mean: Tensor, var: Tensor, groups: int,
                           has_bias: bool, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    bias = torch.empty(0) if has_bias else None
    ins = {"dy": dy, "x": x, "mean": mean, "var": var}
    if weight is not None:
        ins["weight"] = weight
    outs = list(launch(_problem("group_norm_backward", x, weight, bias, eps, groups=groups), VARIANTS, ins))
    dw = outs.pop(1) if weight is not None else _empty(x)
    db = outs.pop(1) if has_bias else _empty(x)
    return outs[0], dw, db


@group_norm_backward_op.register_fake
def _(dy, x, weight, mean, var, groups, has_bias, eps):
    dw = weight.new_empty(weight.shape) if weight is not None else _empty(x)
    return torch.empty_like(x), dw, x.new_empty((x.shape[1] if has_bias else 0,), dtype=torch.float32)


def _gn_setup(ctx, inputs, output):
    x, weight, bias, groups, eps = inputs
    ctx.groups, ctx.eps, ctx.has_bias = groups, eps, bias is not None
    ctx.save_for_backward(x, weight, output[1], output[2])


def _gn_backward(ctx, dy, _dm, _dv):
    x, weight, mean, var = ctx.saved_tensors
    dx, dw, db = group_norm_backward_op(dy.contiguous() if dy.stride() != x.stride() else dy, x, weight, mean, var,
                                        ctx.groups, ctx.has_bias, ctx.eps)
    return dx, (dw if weight is not None else None), (db.to(weight.dtype if weight is not None else db.dtype)
                                                      if ctx.has_bias else None), None, None


group_norm_op.register_autograd(_gn_backward, setup_context=_gn_setup)


# ---- public functions -------------------------------------------------------------------------------
def _as3(x: object, name: str) -> Tensor:
    """(N, C, *) -> (N, C, S) (a view where the strides allow: NCHW and channels-last do)."""
    x = check_tensor("input", x)
    check_dtype("input", x, _SPECS[name].dtypes)
    check_device("input", x)
    if x.dim() < 2 or x.numel() == 0:
        raise InvalidInputError(f"input of {name}", "a non-empty (N, C, *) tensor", f"shape {tuple(x.shape)}")
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    return x3


def _param(name: str, t: object, C: int, x: Tensor) -> Optional[Tensor]:
    if t is None:
        return None
    t = check_tensor(name, t)
    if tuple(t.shape) != (C,) or t.dtype not in (torch.float32, x.dtype) or t.device != x.device:
        raise InvalidInputError(name, f"({C},) in float32 or {x.dtype} on {x.device}",
                                f"{tuple(t.shape)} {t.dtype} on {t.device}")
    return t


def _eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 <= eps <= 1:
        raise InvalidInputError("eps", "a number in [0, 1]", eps)
    return float(eps)


def _update(running: Optional[Tensor], stat: Tensor, momentum: float) -> None:
    if running is not None:
        with torch.no_grad():
            running.copy_((running.float() * (1 - momentum) + stat * momentum).to(running.dtype))


def _view(y3: Tensor, x: Tensor) -> Tensor:
    """(N, C, S) back to x's shape (channels-last stays channels-last)."""
    return y3.view(x.shape) if y3.is_contiguous() or x.dim() <= 3 or y3.stride(1) == 1 else y3.reshape(x.shape)


def batch_norm(input: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization as ``torch.nn.functional.batch_norm`` (same arguments).

    Training: per-channel mean and biased variance over N and the spatial dims normalize, and the
    running statistics (when given) are updated in place with ``momentum`` and the unbiased
    variance. Inference: the running statistics normalize. Statistics in fp32; y in the input's
    dtype and memory format. Differentiable in input, weight and bias.

    Args:
        input: (N, C, *) fp32, fp16 or bf16; NCHW or channels-last read in place.
        running_mean, running_var: (C,) or None (required when not training).
        weight, bias: optional (C,), fp32 or the input's dtype.
        training: use the batch's statistics (and update the running ones).
        momentum: the running statistics' update factor.
        eps: added to the variance.

    Returns:
        y like input.

    Raises:
        InvalidInputError: bad shapes, dtypes, devices or arguments (nothing is computed or updated).
    """
    x3 = _as3(input, "batch_norm")
    C = x3.shape[1]
    w, b = _param("weight", weight, C, x3), _param("bias", bias, C, x3)
    rm, rv = _param("running_mean", running_mean, C, x3), _param("running_var", running_var, C, x3)
    eps = _eps(eps)
    if not training and (rm is None or rv is None):
        raise InvalidInputError("running_mean and running_var", "(C,) tensors when training=False", None)
    n = x3.shape[0] * x3.shape[2]
    if training and n == 1:
        raise InvalidInputError("input of batch_norm", "more than one value per channel when training",
                                f"shape {tuple(input.shape)}")
    y, mean, var = batch_norm_op(x3, w, b, rm, rv, bool(training), eps)
    if training:
        _update(rm, mean.detach(), momentum)
        _update(rv, var.detach() * (n / (n - 1)), momentum)
    return _view(y, input)


def group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5) -> Tensor:
    """Group normalization as ``torch.nn.functional.group_norm``: per sample and group of
    C / num_groups channels, over those channels and the spatial dims (fp32 statistics).
    Arguments and errors as :func:`batch_norm`; ``num_groups`` must divide C."""
    x3 = _as3(input, "group_norm")
    C = x3.shape[1]
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1 or C % num_groups:
        raise InvalidInputError("num_groups", f"a positive divisor of C={C}", num_groups)
    w, b = _param("weight", weight, C, x3), _param("bias", bias, C, x3)
    y, _, _ = group_norm_op(x3, w, b, num_groups, _eps(eps))
    return _view(y, input)


def instance_norm(input: Tensor, running_mean: Optional[Tensor] = None, running_var: Optional[Tensor] = None,
                  weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Instance normalization as ``torch.nn.functional.instance_norm``: with ``use_input_stats``, per
    (sample, channel) over the spatial dims (group norm with C groups), updating the running
    statistics (when given) with the batch average of the per-instance mean and unbiased variance;
    else the running statistics normalize (batch norm in inference). Arguments as :func:`batch_norm`."""
    x3 = _as3(input, "group_norm")
    C = x3.shape[1]
    w, b = _param("weight", weight, C, x3), _param("bias", bias, C, x3)
    rm, rv = _param("running_mean", running_mean, C, x3), _param("running_var", running_var, C, x3)
    eps = _eps(eps)
    if not use_input_stats:
        if rm is None or rv is None:
            raise InvalidInputError("running_mean and running_var", "(C,) tensors when use_input_stats=False", None)
        y, _, _ = batch_norm_op(x3, w, b, rm, rv, False, eps)
        return _view(y, input)
    S = x3.shape[2]
    if S == 1:
        raise InvalidInputError("input of instance_norm", "more than one spatial element per channel",
                                f"shape {tuple(input.shape)}")
    y, mean, var = group_norm_op(x3, w, b, C, eps)
    _update(rm, mean.detach().mean(0), momentum)
    _update(rv, (var.detach() * (S / (S - 1))).mean(0), momentum)
    return _view(y, input)


__all__ = ["batch_norm", "group_norm", "instance_norm", "batch_norm_op", "batch_norm_backward_op", "group_norm_op",
           "group_norm_backward_op"]
