"""``warpsmith.ops.max_pool``, ``avg_pool`` and ``adaptive_avg_pool`` (1-D, 2-D, 3-D, chosen by the
input's rank): validate, then call the ``warpsmith::`` custom ops (differentiable).

``warpsmith::max_pool`` always returns ``(y, indices)`` (autograd saves the indices; the public
function drops them unless ``return_indices``); ``warpsmith::max_pool_backward`` routes ``dy``
through them. ``warpsmith::avg_pool`` / ``adaptive_avg_pool`` and their backwards need only the
input's shape. Every backward is the deterministic gather form (see :mod:`.kernel`).
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...dispatch import launch
from ..shared.validate import check_device, check_dtype, check_tensor
from .spec import DIMS, POOL_SPECS, problem_error
from .variant import VARIANTS

_SPECS = {s.name: s for s in POOL_SPECS}
Tensor = torch.Tensor
IntOrTuple = Union[int, Sequence[int]]


def _channels_last(x: Tensor) -> bool:
    return x.shape[1] > 1 and x.stride(1) == 1 and x.numel() > x.shape[1] * x.shape[0]


def problem_of(op: str, x: Tensor, **attrs) -> Problem:
    """The Problem a validated (N, C, *spatial) call solves; ``attrs`` per-dimension lists
    (``kernel``, ``stride``, ``padding``, ``dilation``, ``output_size``) and the flags."""
    dims = x.dim() - 2
    used = DIMS[3 - dims:]
    full = {"dims": dims, "channels_last": _channels_last(x)}
    for key, name in (("kernel", "kernel"), ("stride", "stride"), ("padding", "padding"), ("dilation", "dilation"),
                      ("output_size", "out")):
        if key in attrs:
            full.update({f"{name}_{a}": int(v) for a, v in zip(used, attrs.pop(key))})
    full.update(attrs)
    sp = (1,) * (3 - dims) + tuple(x.shape[2:])
    shape = {"N": x.shape[0], "C": x.shape[1], "D": sp[0], "H": sp[1], "W": sp[2]}
    return _SPECS[op].problem(shape, x.dtype, full)


# ---- max ------------------------------------------------------------------------------------------
def _max_problem(op, x, kernel, stride, padding, dilation, ceil_mode, return_indices=True):
    extra = {"return_indices": return_indices} if op == "max_pool" else {}
    return problem_of(op, x, kernel=kernel, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode,
                      **extra)


@torch.library.custom_op("warpsmith::max_pool", mutates_args=())
def max_pool_op(x: Tensor, kernel: list[int], stride: list[int], padding: list[int], dilation: list[int],
                ceil_mode: bool) -> tuple[Tensor, Tensor]:
    p = _max_problem("max_pool", x, kernel, stride, padding, dilation, ceil_mode)
    y, idx = launch(p, VARIANTS, {"x": x})
    return y, idx


@max_pool_op.register_fake
def _(x, kernel, stride, padding, dilation, ceil_mode):
    p = _max_problem("max_pool", x, kernel, stride, padding, dilation, ceil_mode)
    shape = _SPECS["max_pool"].out_shape(p)
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)


@torch.library.custom_op("warpsmith::max_pool_backward", mutates_args=())
def max_pool_backward_op(dy: Tensor, x: Tensor, indices: Tensor, kernel: list[int], stride: list[int],
                         padding: list[int], dilation: list[int], ceil_mode: bool) -> Tensor:
    p = _max_problem("max_pool_backward", x, kernel, stride, padding, dilation, ceil_mode, None)
    return launch(p, VARIANTS, {"dy": dy, "x": x, "indices": indices})


@max_pool_backward_op.register_fake
def _(dy, x, indices, kernel, stride, padding, dilation, ceil_mode):
    return x.new_empty(x.shape)


def _max_setup(ctx, inputs, output):
    x, kernel, stride, padding, dilation, ceil_mode = inputs
    ctx.args = (kernel, stride, padding, dilation, ceil_mode)
    ctx.save_for_backward(x, output[1])


def _max_backward(ctx, dy, _didx):
    x, idx = ctx.saved_tensors
    return (max_pool_backward_op(dy, x, idx, *ctx.args),) + (None,) * 5


max_pool_op.register_autograd(_max_backward, setup_context=_max_setup)


# ---- avg ------------------------------------------------------------------------------------------
def _avg_problem(op, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return problem_of(op, x, kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                      count_include_pad=count_include_pad, divisor_override=divisor_override)


@torch.library.custom_op("warpsmith::avg_pool", mutates_args=())
def avg_pool_op(x: Tensor, kernel: list[int], stride: list[int], padding: list[int], ceil_mode: bool,
                count_include_pad: bool, divisor_override: int) -> Tensor:
    p = _avg_problem("avg_pool", x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return launch(p, VARIANTS, {"x": x})[0]


@avg_pool_op.register_fake
def _(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    p = _avg_problem("avg_pool", x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return x.new_empty(_SPECS["avg_pool"].out_shape(p))


@torch.library.custom_op("warpsmith::avg_pool_backward", mutates_args=())
def avg_pool_backward_op(dy: Tensor, x: Tensor, kernel: list[int], stride: list[int], padding: list[int],
                         ceil_mode: bool, count_include_pad: bool, divisor_override: int) -> Tensor:
    p = _avg_problem("avg_pool_backward", x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return launch(p, VARIANTS, {"dy": dy, "x": x})


@avg_pool_backward_op.register_fake
def _(dy, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return x.new_empty(x.shape)


def _avg_setup(ctx, inputs, output):
    ctx.args = inputs[1:]
    ctx.save_for_backward(inputs[0])  # only its shape and layout are read


def _avg_backward(ctx, dy):
    (x,) = ctx.saved_tensors
    return (avg_pool_backward_op(dy, x, *ctx.args),) + (None,) * 6


avg_pool_op.register_autograd(_avg_backward, setup_context=_avg_setup)


# ---- adaptive avg ---------------------------------------------------------------------------------
@torch.library.custom_op("warpsmith::adaptive_avg_pool", mutates_args=())
def adaptive_avg_pool_op(x: Tensor, output_size: list[int]) -> Tensor:
    return launch(problem_of("adaptive_avg_pool", x, output_size=output_size), VARIANTS, {"x": x})[0]


@adaptive_avg_pool_op.register_fake
def _(x, output_size):
    return x.new_empty(tuple(x.shape[:2]) + tuple(output_size))


@torch.library.custom_op("warpsmith::adaptive_avg_pool_backward", mutates_args=())
def adaptive_avg_pool_backward_op(dy: Tensor, x: Tensor, output_size: list[int]) -> Tensor:
    p = problem_of("adaptive_avg_pool_backward", x, output_size=output_size)
    return launch(p, VARIANTS, {"dy": dy, "x": x})


@adaptive_avg_pool_backward_op.register_fake
def _(dy, x, output_size):
    return x.new_empty(x.shape)


def _adaptive_setup(ctx, inputs, output):
    ctx.output_size = inputs[1]
    ctx.save_for_backward(inputs[0])


def _adaptive_backward(ctx, dy):
    (x,) = ctx.saved_tensors
    return adaptive_avg_pool_backward_op(dy, x, ctx.output_size), None


adaptive_avg_pool_op.register_autograd(_adaptive_backward, setup_context=_adaptive_setup)


# ---- public functions -----------------------------------------------------------------------------
def _input(x: object, op: str) -> Tensor:
    """x checked: a tensor of a supported dtype and device, 2 to 5 dimensions, not empty."""
    x = check_tensor("x", x)
    check_dtype("x", x, _SPECS[op].dtypes)
    check_device("x", x)
    if not 2 <= x.dim() <= 5 or x.numel() == 0:
        raise InvalidInputError(f"x of {op}", "a non-empty (N, C, *spatial) or (C, *spatial) tensor, 1 to 3 "
                                "spatial dimensions", f"shape {tuple(x.shape)}")
    return x


def _tuple(name: str, v: object, dims: int, lo: int) -> list[int]:
    t = [v] * dims if isinstance(v, int) and not isinstance(v, bool) else v
    if not isinstance(t, (tuple, list)) or len(t) not in (1, dims) or any(
            isinstance(a, bool) or not isinstance(a, int) or a < lo for a in t):
        raise InvalidInputError(name, f"an int >= {lo} or {dims} of them", v)
    return [int(a) for a in t] * (dims if len(t) == 1 else 1)


def _spatial_dims(x: Tensor, dims: Optional[int]) -> tuple[Tensor, int, bool]:
    """Pick the spatial rank: ``dims`` when given (the nn modules), else x.dim() - 2."""
    d = x.dim() - 2 if dims is None else dims
    if x.dim() not in (d + 1, d + 2) or not 1 <= d <= 3:
        raise InvalidInputError("shape of x", f"(N, C) + {d} spatial dims, or (C) + {d}", tuple(x.shape))
    batched = x.dim() == d + 2
    return (x if batched else x.unsqueeze(0)), d, batched


def _checked(op: str, p: Problem) -> None:
    why = problem_error(p)
    if why:
        raise InvalidInputError(f"arguments of {op}", "a window that fits the padded input, padding at most half "
                                "the kernel", why)


def max_pool(x: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
             dilation: IntOrTuple = 1, ceil_mode: bool = False, return_indices: bool = False,
             dims: Optional[int] = None) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """Max pooling as ``torch.nn.functional.max_pool{1,2,3}d`` (the rank of x picks it).

    Args:
        x: (N, C, *spatial) or (C, *spatial), 1 to 3 spatial dims; fp32, fp16 or bf16; any strides
            (channels-last is read in place and the output keeps it).
        kernel_size, stride, padding, dilation: an int or one per spatial dim (stride None: the kernel).
        ceil_mode: ceil instead of floor in the output size (the last window starts inside the
            input or the left padding).
        return_indices: also return the int64 argmax indices, flat over the spatial dims.
        dims: the spatial rank, when x may be unbatched (the nn modules pass it).

    Returns:
        y, or (y, indices). Differentiable in x (the backward routes through the indices).

    Raises:
        InvalidInputError: bad types, shapes, dtypes or window arguments (nothing is computed).
    """
    x = _input(x, "max_pool")
    x4, d, batched = _spatial_dims(x, dims)
    k = _tuple("kernel_size", kernel_size, d, 1)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _tuple("stride", stride, d, 1)
    pad, dil = _tuple("padding", padding, d, 0), _tuple("dilation", dilation, d, 1)
    _checked("max_pool", _max_problem("max_pool", x4, k, s, pad, dil, bool(ceil_mode)))
    y, idx = max_pool_op(x4, k, s, pad, dil, bool(ceil_mode))
    if not batched:
        y, idx = y[0], idx[0]
    return (y, idx) if return_indices else y


def avg_pool(x: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
             ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Optional[int] = None,
             dims: Optional[int] = None) -> Tensor:
    """Average pooling as ``torch.nn.functional.avg_pool{1,2,3}d``: an fp32 sum over the window
    divided by ``divisor_override``, else the window size clipped to the padded input
    (``count_include_pad``) or to the input. Arguments as :func:`max_pool`; ``divisor_override``
    (2-D and 3-D only, as in torch) a positive int. Differentiable in x."""
    x = _input(x, "avg_pool")
    x4, d, batched = _spatial_dims(x, dims)
    k = _tuple("kernel_size", kernel_size, d, 1)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _tuple("stride", stride, d, 1)
    pad = _tuple("padding", padding, d, 0)
    div = 0
    if divisor_override is not None:
        if d == 1 or isinstance(divisor_override, bool) or not isinstance(divisor_override, int) or divisor_override < 1:
            raise InvalidInputError("divisor_override", "None, or a positive int for 2-D and 3-D pooling",
                                    divisor_override)
        div = divisor_override
    _checked("avg_pool", _avg_problem("avg_pool", x4, k, s, pad, bool(ceil_mode), bool(count_include_pad), div))
    y = avg_pool_op(x4, k, s, pad, bool(ceil_mode), bool(count_include_pad), div)
    return y if batched else y[0]


def adaptive_avg_pool(x: Tensor, output_size: IntOrTuple, dims: Optional[int] = None) -> Tensor:
    """Adaptive average pooling as ``torch.nn.functional.adaptive_avg_pool{1,2,3}d``: output o of a
    length-L dimension averages ``[floor(o L / O), ceil((o + 1) L / O))``. ``output_size``: an int
    or one per spatial dim (None entries keep the input's size). Differentiable in x."""
    x = _input(x, "adaptive_avg_pool")
    x4, d, batched = _spatial_dims(x, dims)
    if isinstance(output_size, (list, tuple)):
        output_size = [x4.shape[2 + i] if o is None else o for i, o in enumerate(output_size)]
    out = _tuple("output_size", output_size, d, 1)
    y = adaptive_avg_pool_op(x4, out)
    return y if batched else y[0]


__all__ = ["max_pool", "avg_pool", "adaptive_avg_pool", "max_pool_op", "max_pool_backward_op", "avg_pool_op",
           "avg_pool_backward_op", "adaptive_avg_pool_op", "adaptive_avg_pool_backward_op", "problem_of"]
