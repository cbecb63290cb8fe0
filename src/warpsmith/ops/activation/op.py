"""``warpsmith.ops.swiglu`` and ``warpsmith.ops.geglu``: validate, then call the custom ops.

``warpsmith::swiglu``, ``warpsmith::geglu`` and their ``_backward`` ops: torch.library custom ops,
fake (meta) kernels and autograd.

The ops take 2-D operands (the public functions in :mod:`warpsmith.ops.activation` flatten the
leading dims): ``gate`` and ``up`` (M, H) with unit column stride, or ``up=None`` and ``gate`` the
packed (M, 2H) tensor. The backwards return a list: ``[d gate, d up]``, or ``[d x]`` (M, 2H) for
the packed form.
"""
from __future__ import annotations

from typing import Optional

import torch

from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...dispatch import launch
from ..shared.validate import check_device, check_dtype, check_like, check_tensor
from .spec import ACTIVATION_OPS, SWIGLU
from .variant import VARIANTS

_SPECS = {s.name: s for s in ACTIVATION_OPS}


def problem_of(op: str, gate: torch.Tensor, up: Optional[torch.Tensor], approximate: Optional[str] = None) -> Problem:
    """The Problem a (validated) call solves."""
    packed = up is None
    shape = {"M": gate.shape[0], "H": gate.shape[1] // 2 if packed else gate.shape[1]}
    attrs = {"packed": packed} | ({"approximate": approximate} if approximate is not None else {})
    return _SPECS[op].problem(shape, gate.dtype, attrs)


def _inputs(gate: torch.Tensor, up: Optional[torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"x": gate} if up is None else {"gate": gate, "up": up}


def _unit_cols(t: torch.Tensor) -> torch.Tensor:
    """Upstream gradients may come with any strides; the kernels need a unit column stride."""
    return t if t.shape[1] <= 1 or t.stride(1) == 1 else t.contiguous()


def _out_fake(gate: torch.Tensor, up: Optional[torch.Tensor]) -> torch.Tensor:
    h = gate.shape[1] // 2 if up is None else gate.shape[1]
    return gate.new_empty((gate.shape[0], h))


def _grads_fake(gate: torch.Tensor, up: Optional[torch.Tensor]) -> list[torch.Tensor]:
    return [gate.new_empty(gate.shape)] if up is None else [gate.new_empty(gate.shape), up.new_empty(up.shape)]


def _as_list(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple) else [out]


# ---- swiglu ------------------------------------------------------------------------------------
@torch.library.custom_op("warpsmith::swiglu", mutates_args=())
def swiglu_op(gate: torch.Tensor, up: Optional[torch.Tensor]) -> torch.Tensor:
    return launch(problem_of("swiglu", gate, up), VARIANTS, _inputs(gate, up))


@swiglu_op.register_fake
def _(gate, up):
    return _out_fake(gate, up)


@torch.library.custom_op("warpsmith::swiglu_backward", mutates_args=())
def swiglu_backward_op(dy: torch.Tensor, gate: torch.Tensor, up: Optional[torch.Tensor]) -> list[torch.Tensor]:
    return _as_list(launch(problem_of("swiglu_backward", gate, up), VARIANTS, {"dy": dy, **_inputs(gate, up)}))


@swiglu_backward_op.register_fake
def _(dy, gate, up):
    return _grads_fake(gate, up)


def _setup(ctx, inputs, output) -> None:
    gate, up = inputs[0], inputs[1]
    ctx.approximate = inputs[2] if len(inputs) > 2 else None
    ctx.packed = up is None
    ctx.save_for_backward(gate, up)


def _grads(ctx, grads: list[torch.Tensor]):
    return (grads[0], None) if ctx.packed else (grads[0], grads[1])


def _swiglu_backward(ctx, dy):
    gate, up = ctx.saved_tensors
    return _grads(ctx, swiglu_backward_op(_unit_cols(dy), gate, up))


swiglu_op.register_autograd(_swiglu_backward, setup_context=_setup)


# ---- geglu -------------------------------------------------------------------------------------
@torch.library.custom_op("warpsmith::geglu", mutates_args=())
def geglu_op(gate: torch.Tensor, up: Optional[torch.Tensor], approximate: str) -> torch.Tensor:
    return launch(problem_of("geglu", gate, up, approximate), VARIANTS, _inputs(gate, up))


@geglu_op.register_fake
def _(gate, up, approximate):
    return _out_fake(gate, up)


@torch.library.custom_op("warpsmith::geglu_backward", mutates_args=())
def geglu_backward_op(dy: torch.Tensor, gate: torch.Tensor, up: Optional[torch.Tensor],
                      approximate: str) -> list[torch.Tensor]:
    return _as_list(launch(problem_of("geglu_backward", gate, up, approximate), VARIANTS, {"dy": dy, **_inputs(gate, up)}))


@geglu_backward_op.register_fake
def _(dy, gate, up, approximate):
    return _grads_fake(gate, up)


def _geglu_backward(ctx, dy):
    gate, up = ctx.saved_tensors
    return _grads(ctx, geglu_backward_op(_unit_cols(dy), gate, up, ctx.approximate)) + (None,)


geglu_op.register_autograd(_geglu_backward, setup_context=_setup)


APPROXIMATE = ("none", "tanh")


def _prepare(gate: object, up: object) -> tuple[torch.Tensor, Optional[torch.Tensor], tuple[int, ...], int]:
    """2-D views (rows = flattened leading dims) with unit column stride; copies only where needed."""
    gate = check_tensor("gate", gate)
    if gate.dim() < 1 or gate.numel() == 0:
        raise InvalidInputError("gate", "a non-empty tensor of shape (..., H) (or (..., 2H) when up is None)",
                                f"shape {tuple(gate.shape)}")
    check_dtype("gate", gate, SWIGLU.dtypes)
    check_device("gate", gate)
    n = gate.shape[-1]
    if up is None:
        if n % 2:
            raise InvalidInputError("last dimension of gate (packed gate and up, up=None)",
                                    "an even size 2H (gate = x[..., :H], up = x[..., H:])", n)
        hidden = n // 2
    else:
        up = check_tensor("up", up)
        check_like("up", up, "gate", gate, shape=tuple(gate.shape))
        hidden = n
    lead = tuple(gate.shape[:-1])

    def flat(t: torch.Tensor) -> torch.Tensor:
        t = t.reshape(-1, t.shape[-1])  # a view where the strides allow, else a copy
        return t if t.shape[1] == 1 or t.stride(1) == 1 else t.contiguous()

    return flat(gate), (None if up is None else flat(up)), lead, hidden


def swiglu(gate: torch.Tensor, up: Optional[torch.Tensor] = None) -> torch.Tensor:
    """SwiGLU: ``silu(gate) * up``, computed in fp32, rounded once to the input dtype.

    Args:
        gate: (..., H); or, when ``up`` is None, the packed (..., 2H) tensor whose first half
            ``[..., :H]`` is the gate and second half ``[..., H:]`` is up (a fused gate/up projection).
        up: (..., H), same shape, dtype and device as ``gate``; or None (packed form).

    Returns:
        (..., H), contiguous, in the input dtype (float32, float16 or bfloat16). Differentiable:
        the gradient is computed by the ``warpsmith::swiglu_backward`` kernels.

    Any leading dims and row strides are used in place; an input whose last dimension is not
    contiguous (stride != 1), or whose leading dims cannot be flattened into one row stride, is
    copied first.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes or devices (nothing is computed).
    """
    g, u, lead, hidden = _prepare(gate, up)
    return swiglu_op(g, u).view(*lead, hidden)


def geglu(gate: torch.Tensor, up: Optional[torch.Tensor] = None, approximate: str = "none") -> torch.Tensor:
    """GeGLU: ``gelu(gate, approximate) * up``, computed in fp32, rounded once to the input dtype.

    Args:
        gate: (..., H); or, when ``up`` is None, the packed (..., 2H) tensor (gate first, then up).
        up: (..., H) like ``gate``, or None (packed form).
        approximate: "none" (the erf form) or "tanh", as :func:`torch.nn.functional.gelu`.

    Returns:
        (..., H), contiguous, in the input dtype (float32, float16 or bfloat16); differentiable.
        Inputs are handled as in :func:`swiglu`.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices or ``approximate`` (nothing is computed).
    """
    if approximate not in APPROXIMATE:
        raise InvalidInputError("approximate", "one of " + ", ".join(APPROXIMATE), approximate)
    g, u, lead, hidden = _prepare(gate, up)
    return geglu_op(g, u, approximate).view(*lead, hidden)


__all__ = ["swiglu_op", "swiglu_backward_op", "geglu_op", "geglu_backward_op", "problem_of", "swiglu", "geglu"]
