"""``warpsmith::swiglu``, ``warpsmith::geglu`` and their ``_backward`` ops: torch.library custom ops,
fake (meta) kernels and autograd.

The ops take 2-D operands (the public functions in :mod:`warpsmith.ops.activation` flatten the
leading dims): ``gate`` and ``up`` (M, H) with unit column stride, or ``up=None`` and ``gate`` the
packed (M, 2H) tensor. The backwards return a list: ``[d gate, d up]``, or ``[d x]`` (M, 2H) for
the packed form.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..spec import Problem
from .dispatch import launch


def problem_of(op: str, gate: torch.Tensor, up: Optional[torch.Tensor], approximate: Optional[str] = None) -> Problem:
    """The Problem a (validated) call solves."""
    packed = up is None
    shape = {"M": gate.shape[0], "H": gate.shape[1] // 2 if packed else gate.shape[1]}
    attrs = {"packed": packed} | ({"approximate": approximate} if approximate is not None else {})
    return Problem(op, shape, gate.dtype, attrs)


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
    return launch(problem_of("swiglu", gate, up), _inputs(gate, up))


@swiglu_op.register_fake
def _(gate, up):
    return _out_fake(gate, up)


@torch.library.custom_op("warpsmith::swiglu_backward", mutates_args=())
def swiglu_backward_op(dy: torch.Tensor, gate: torch.Tensor, up: Optional[torch.Tensor]) -> list[torch.Tensor]:
    return _as_list(launch(problem_of("swiglu_backward", gate, up), {"dy": dy, **_inputs(gate, up)}))


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
    return launch(problem_of("geglu", gate, up, approximate), _inputs(gate, up))


@geglu_op.register_fake
def _(gate, up, approximate):
    return _out_fake(gate, up)


@torch.library.custom_op("warpsmith::geglu_backward", mutates_args=())
def geglu_backward_op(dy: torch.Tensor, gate: torch.Tensor, up: Optional[torch.Tensor],
                      approximate: str) -> list[torch.Tensor]:
    return _as_list(launch(problem_of("geglu_backward", gate, up, approximate), {"dy": dy, **_inputs(gate, up)}))


@geglu_backward_op.register_fake
def _(dy, gate, up, approximate):
    return _grads_fake(gate, up)


def _geglu_backward(ctx, dy):
    gate, up = ctx.saved_tensors
    return _grads(ctx, geglu_backward_op(_unit_cols(dy), gate, up, ctx.approximate)) + (None,)


geglu_op.register_autograd(_geglu_backward, setup_context=_setup)

__all__ = ["swiglu_op", "swiglu_backward_op", "geglu_op", "geglu_backward_op", "problem_of"]
