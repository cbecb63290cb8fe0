"""``warpsmith.ops.conv`` / ``conv_transpose`` / ``convolution``: validate, then call the custom ops.

- ``warpsmith::conv``: ``act(scale conv(x, w) + bias + residual)``, direct or transposed, 1-D/2-D/3-D,
  with per-axis leading and trailing padding; autograd: the data gradient is the other form of the
  conv (a transposed conv for a conv, a conv for a transposed conv) on the same weight, the weight
  gradient ``warpsmith::conv_weight_grad`` (an implicit GEMM over batch x pixels).
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from ...core.dtypes import dtype_name
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...dispatch import launch
from ..matmul.op import _activation_grad
from ..shared.validate import check_device, check_tensor
from .spec import ACTIVATIONS, CONV, SPATIAL
from .variant import VARIANTS, launch_wgrad, memory_format_like
from .wgrad import VARIANTS as WGRAD_VARIANTS, weight_grad_problem

IntOrTuple = Union[int, Sequence[int]]


def problem_of(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], residual: Optional[torch.Tensor],
               stride: Sequence[int], pad: Sequence[int], pad_end: Sequence[int], dilation: Sequence[int],
               output_padding: Sequence[int], groups: int, transposed: bool, activation: str,
               scale: float) -> Problem:
    """The Problem a (validated) call solves; channels_last is read off the input's strides."""
    nd = x.dim() - 2
    axes = SPATIAL[3 - nd:]
    shape = {"N": x.shape[0], "C": x.shape[1], "K": (w.shape[1] * groups if transposed else w.shape[0])}
    if groups > 1:
        shape["G"] = groups
    for a, size, k in zip(axes, x.shape[2:], w.shape[2:]):
        shape[a.upper()] = size
        shape["K" + a.upper()] = k
    attrs = {"transposed": transposed, "channels_last": bool(x.stride(1) == 1 and x.shape[1] > 1 and x.dim() > 2
                                                          and not x.is_contiguous()),
             "bias": bias is not None, "residual": residual is not None, "activation": activation,
             "allow_tf32": x.dtype == torch.float32 and bool(torch.backends.cudnn.allow_tf32
                                                             and torch.backends.cuda.matmul.allow_tf32),
             "scale": float(scale)}
    for i, a in enumerate(axes):
        attrs.update({f"stride_{a}": stride[i], f"pad_{a}": pad[i], f"pad_end_{a}": pad_end[i],
                      f"dil_{a}": dilation[i], f"opad_{a}": output_padding[i]})
    return CONV.problem(shape, x.dtype, attrs)


@torch.library.custom_op("warpsmith::conv", mutates_args=())
def conv_op(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], residual: Optional[torch.Tensor],
            stride: list[int], pad: list[int], pad_end: list[int], dilation: list[int], output_padding: list[int],
            groups: int, transposed: bool, activation: str, scale: float) -> torch.Tensor:
    if x.shape[0] == 0:  # an empty batch (as torch accepts): the empty output, no launch
        return _empty_output(x, w, stride, pad, pad_end, dilation, output_padding, groups, transposed)
    p = problem_of(x, w, bias, residual, stride, pad, pad_end, dilation, output_padding, groups, transposed,
                   activation, scale)
    inputs = {"x": x, "w": w}
    if bias is not None:
        inputs["bias"] = bias
    if residual is not None:
        inputs["residual"] = residual
    return launch(p, VARIANTS, inputs)


def output_size(size: int, k: int, stride: int, pad: int, pad_end: int, dil: int, opad: int, transposed: bool) -> int:
    if transposed:
        return (size - 1) * stride - pad - pad_end + dil * (k - 1) + opad + 1
    return (size + pad + pad_end - dil * (k - 1) - 1) // stride + 1


def _empty_output(x, w, stride, pad, pad_end, dilation, output_padding, groups, transposed) -> torch.Tensor:
    """An uninitialized output of the conv's shape, in x's memory format (the fake kernel's; also the
    whole result of an empty batch)."""
    cout = w.shape[1] * groups if transposed else w.shape[0]
    spatial = tuple(output_size(x.shape[2 + i], w.shape[2 + i], stride[i], pad[i], pad_end[i], dilation[i],
                                output_padding[i], transposed) for i in range(x.dim() - 2))
    return memory_format_like(x, (x.shape[0], cout) + spatial, x.dtype)


@conv_op.register_fake
def _(x, w, bias, residual, stride, pad, pad_end, dilation, output_padding, groups, transposed, activation, scale):
    return _empty_output(x, w, stride, pad, pad_end, dilation, output_padding, groups, transposed)


@torch.library.custom_op("warpsmith::conv_weight_grad", mutates_args=())
def conv_weight_grad_op(a: torch.Tensor, b: torch.Tensor, weight_shape: list[int], stride: list[int],
                        pad: list[int], dilation: list[int], groups: int) -> torch.Tensor:
    """``dw[g, k, c, t] = sum_{n, o} a[n, g KG + k, o] b[n, g CG + c, o s - p + t d]``, shape ``weight_shape``."""
    if a.shape[0] == 0:  # an empty batch: no term in the sum, no launch
        return torch.zeros(weight_shape, dtype=a.dtype, device=a.device)
    nd = a.dim() - 2
    full = (lambda v, fill: (fill,) * (3 - nd) + tuple(v))
    p = weight_grad_problem(b, a, weight_shape, stride, pad, dilation, groups)
    if p is not None:  # a pipeline problem: a verified tuned record, else the variant's default
        return launch(p, WGRAD_VARIANTS, {"x": b, "dy": a})
    dw = torch.empty(weight_shape, dtype=a.dtype, device=a.device)  # outside the spec's ranges: the default
    return launch_wgrad(a, b, dw, groups=groups, transposed=False, stride=full(stride, 1), pad=full(pad, 0),
                        dil=full(dilation, 1))


@conv_weight_grad_op.register_fake
def _(a, b, weight_shape, stride, pad, dilation, groups):
    return a.new_empty(weight_shape)


def _setup(ctx, inputs, output) -> None:
    x, w, bias, residual, stride, pad, pad_end, dilation, opad, groups, transposed, activation, scale = inputs
    ctx.save_for_backward(x, w, bias, residual)
    ctx.geom = (list(stride), list(pad), list(pad_end), list(dilation), list(opad), groups, transposed)
    ctx.activation, ctx.scale = activation, scale


def _backward(ctx, grad):
    x, w, bias, residual = ctx.saved_tensors
    stride, pad, pad_end, dil, opad, groups, transposed = ctx.geom
    g = grad
    if ctx.activation != "none":  # recompute the pre-activation instead of storing it
        z = conv_op(x, w, bias, residual, stride, pad, pad_end, dil, opad, groups, transposed, "none", ctx.scale)
        g = (grad.float() * _activation_grad(z, ctx.activation)).to(grad.dtype)
    nd = x.dim() - 2
    dims = [0] + list(range(2, 2 + nd))
    grad_bias = g.float().sum(dim=dims).to(bias.dtype) if bias is not None and ctx.needs_input_grad[2] else None
    grad_res = g if residual is not None and ctx.needs_input_grad[3] else None
    gs = g if ctx.scale == 1.0 else (g.float() * ctx.scale).to(g.dtype)
    grad_x = grad_w = None
    if ctx.needs_input_grad[0]:
        # the data gradient: the other form of the conv, same weight, sized back to x
        back_pad_end, back_opad = [], []
        for i in range(nd):
            if not transposed:  # a transposed conv of dy whose output has x's size
                natural = output_size(g.shape[2 + i], w.shape[2 + i], stride[i], pad[i], 0, dil[i], 0, True)
                extra = natural - x.shape[2 + i]
                back_pad_end.append(max(extra, 0))
                back_opad.append(max(-extra, 0))
            else:  # a conv of dy: its floor division drops output padding below the stride
                back_pad_end.append(pad_end[i])
                back_opad.append(0)
        grad_x = conv_op(gs, w, None, None, stride, pad, back_pad_end, dil, back_opad, groups, not transposed,
                         "none", 1.0)
        for i in range(nd):  # output padding >= stride (allowed below the dilation): trailing rows beyond x
            if grad_x.shape[2 + i] > x.shape[2 + i]:
                grad_x = grad_x.narrow(2 + i, 0, x.shape[2 + i])
        if tuple(grad_x.shape) != tuple(x.shape):
            raise InvalidInputError("geometry for the data gradient", f"a gradient of shape {tuple(x.shape)}",
                                    tuple(grad_x.shape))
    if ctx.needs_input_grad[1]:
        a, b = (x, gs) if transposed else (gs, x)
        grad_w = conv_weight_grad_op(a, b, list(w.shape), stride, pad, dil, groups)
    return grad_x, grad_w, grad_bias, grad_res, None, None, None, None, None, None, None, None, None


conv_op.register_autograd(_backward, setup_context=_setup)


def _tuple(name: str, v: IntOrTuple, nd: int, lo: int) -> list[int]:
    vals = [v] * nd if isinstance(v, int) and not isinstance(v, bool) else list(v) if isinstance(v, (tuple, list)) else None
    if vals is None or len(vals) != nd or any(isinstance(e, bool) or not isinstance(e, int) or e < lo for e in vals):
        raise InvalidInputError(name, f"an int >= {lo} or a tuple of {nd} such ints", v)
    return vals


def _padding(padding: Union[str, IntOrTuple], nd: int, w: torch.Tensor, stride: list[int],
             dil: list[int]) -> tuple[list[int], list[int]]:
    """(leading, trailing) padding per axis; "same" splits dil (k - 1) as torch does (the extra on the end)."""
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * nd, [0] * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise InvalidInputError("padding", "'same' only with stride 1 (as torch)", f"stride {tuple(stride)}")
            total = [d * (k - 1) for d, k in zip(dil, w.shape[2:])]
            return [t // 2 for t in total], [t - t // 2 for t in total]
        raise InvalidInputError("padding", "an int, a tuple of ints, 'same' or 'valid'", padding)
    pad = _tuple("padding", padding, nd, 0)
    return pad, list(pad)


def _validate(x, w, bias, residual, groups: int, transposed: bool, activation: str) -> int:
    x, w = check_tensor("x", x), check_tensor("w", w)
    if x.dim() not in (3, 4, 5):
        raise InvalidInputError("x", "a 3-D, 4-D or 5-D (N, C, spatial...) tensor", f"shape {tuple(x.shape)}")
    if w.dim() != x.dim():
        raise InvalidInputError("w", f"a {x.dim()}-D weight (as x)", f"shape {tuple(w.shape)}")
    if x.dtype not in CONV.dtypes:
        raise InvalidInputError("dtype of x", "one of " + ", ".join(dtype_name(d) for d in CONV.dtypes), str(x.dtype))
    for name, t in (("w", w), ("bias", bias), ("residual", residual)):
        if t is not None and (t.dtype != x.dtype or t.device != x.device):
            raise InvalidInputError(f"{name}", f"{x.dtype} on {x.device} (as x)", f"{t.dtype} on {t.device}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise InvalidInputError("groups", "a positive int", groups)
    cin = w.shape[0] if transposed else w.shape[1] * groups
    if x.shape[1] != cin or (w.shape[0] % groups):
        want = f"w of shape ({x.shape[1]}, C_out/{groups}, ...)" if transposed else f"w of shape (C_out, {x.shape[1] // max(groups, 1)}, ...) with C_in={x.shape[1]} divisible by groups={groups}"
        raise InvalidInputError("channels", want, f"x {tuple(x.shape)}, w {tuple(w.shape)}")
    if activation not in ACTIVATIONS:
        raise InvalidInputError("activation", "None or one of " + ", ".join(ACTIVATIONS[1:]), activation)
    if min(x.shape[1:]) < 1 or min(w.shape) < 1:  # N = 0, an empty batch, is fine (as torch): an empty output
        raise InvalidInputError("sizes", "every dimension >= 1 (the batch may be 0)",
                                f"x {tuple(x.shape)}, w {tuple(w.shape)}")
    check_device("x", x)
    return x.dim() - 2


def _check_extras(x, cout: int, bias, residual, out_shape) -> None:
    if bias is not None and tuple(bias.shape) != (cout,):
        raise InvalidInputError("bias", f"shape ({cout},)", tuple(bias.shape))
    if residual is not None and tuple(residual.shape) != tuple(out_shape):
        raise InvalidInputError("residual", f"shape {tuple(out_shape)} (the output's)", tuple(residual.shape))


def conv(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: IntOrTuple = 1,
         padding: Union[str, IntOrTuple] = 0, dilation: IntOrTuple = 1, groups: int = 1, *,
         activation: Optional[str] = None, residual: Optional[torch.Tensor] = None, scale: float = 1.0) -> torch.Tensor:
    """``act(scale conv(x, w) + bias + residual)``, 1-D/2-D/3-D, as torch.nn.functional.conv{1,2,3}d.

    Args:
        x: (N, C_in, [D, [H,]] W), NCHW-like or channels-last strides (read in place).
        w: (C_out, C_in / groups, [KD, [KH,]] KW).
        bias: optional (C_out,).
        stride, dilation: int or per-axis tuple (>= 1).
        padding: int, per-axis tuple, "valid" or "same" (stride 1; even windows pad one more at the end).
        groups: C_in and C_out divisible by it (groups == C_in: depthwise).
        activation: None, "relu", "gelu" (erf form) or "silu", applied last.
        residual: optional tensor of the output's shape, added before the activation.
        scale: multiplies the convolution before bias and residual.

    Returns:
        (N, C_out, spatial...) in x's dtype and memory format (N = 0: an empty output, and zero weight
        and bias gradients, with no kernel launched, as torch).

    Raises:
        InvalidInputError: wrong types, ranks, sizes, dtypes, devices or geometry (nothing is computed).
    """
    act = "none" if activation is None else activation
    nd = _validate(x, w, bias, residual, groups, False, act)
    st, dl = _tuple("stride", stride, nd, 1), _tuple("dilation", dilation, nd, 1)
    pad, pad_end = _padding(padding, nd, w, st, dl)
    out = [output_size(x.shape[2 + i], w.shape[2 + i], st[i], pad[i], pad_end[i], dl[i], 0, False) for i in range(nd)]
    if min(out) < 1:
        raise InvalidInputError("geometry", "an output of at least one element per axis",
                                f"output spatial size {tuple(out)}")
    _check_extras(x, w.shape[0], bias, residual, (x.shape[0], w.shape[0], *out))
    return conv_op(x, w, bias, residual, st, pad, pad_end, dl, [0] * nd, groups, False, act, float(scale))


def conv_transpose(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: IntOrTuple = 1,
                   padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                   dilation: IntOrTuple = 1, *, activation: Optional[str] = None,
                   residual: Optional[torch.Tensor] = None, scale: float = 1.0) -> torch.Tensor:
    """``act(scale conv_transpose(x, w) + bias + residual)``, as torch.nn.functional.conv_transpose{1,2,3}d.

    Args:
        x: (N, C_in, [D, [H,]] W), any strides.
        w: (C_in, C_out / groups, [KD, [KH,]] KW).
        bias: optional (C_out,).
        stride, padding, output_padding, dilation: int or per-axis tuple; output_padding below
            max(stride, dilation) on each axis.
        groups, activation, residual, scale: as :func:`conv`.

    Returns:
        (N, C_out, spatial...), spatial = (I - 1) s - 2 p + d (k - 1) + output_padding + 1.
    """
    act = "none" if activation is None else activation
    nd = _validate(x, w, bias, residual, groups, True, act)
    st, dl = _tuple("stride", stride, nd, 1), _tuple("dilation", dilation, nd, 1)
    pad, opad = _tuple("padding", padding, nd, 0), _tuple("output_padding", output_padding, nd, 0)
    for i in range(nd):
        if opad[i] >= max(st[i], dl[i]):
            raise InvalidInputError("output_padding", "below max(stride, dilation) on each axis", tuple(opad))
    out = [output_size(x.shape[2 + i], w.shape[2 + i], st[i], pad[i], pad[i], dl[i], opad[i], True) for i in range(nd)]
    if min(out) < 1:
        raise InvalidInputError("geometry", "an output of at least one element per axis", f"{tuple(out)}")
    cout = w.shape[1] * groups
    _check_extras(x, cout, bias, residual, (x.shape[0], cout, *out))
    return conv_op(x, w, bias, residual, st, pad, list(pad), dl, opad, groups, True, act, float(scale))


def convolution(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                groups: int) -> torch.Tensor:
    """``aten.convolution``'s signature (what the compiler lowers to): :func:`conv` or :func:`conv_transpose`."""
    if transposed:
        return conv_transpose(x, w, bias, list(stride), list(padding), list(output_padding), groups, list(dilation))
    if any(output_padding):
        raise InvalidInputError("output_padding", "zeros for a direct convolution", tuple(output_padding))
    return conv(x, w, bias, list(stride), list(padding), list(dilation), groups)


__all__ = ["conv_op", "conv_weight_grad_op", "problem_of", "conv", "conv_transpose", "convolution"]
