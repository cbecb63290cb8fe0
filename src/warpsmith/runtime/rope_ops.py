"""``warpsmith::rope`` and ``warpsmith::rope_backward``: torch.library custom ops, fake (meta)
kernels and autograd (the gradient of q and k is the rotation by -theta; cos, sin and positions get
no gradient — the public op refuses cos/sin that require one).
"""
from __future__ import annotations

from typing import Optional

import torch

from ..spec import Problem
from .dispatch import launch


def problem_of(op: str, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, positions: Optional[torch.Tensor],
               layout: str, rotary_dim: int) -> Problem:
    """The Problem a (validated) call solves: q (B, Hq, S, D), k (B, Hk, S, D), cos (P, R/2) or (B|1, S, R/2)."""
    B, hq, S, D = q.shape
    shape = {"B": B, "S": S, "Hq": hq, "Hk": k.shape[1], "R2": rotary_dim // 2}
    if D > rotary_dim:
        shape["E"] = D - rotary_dim
    per_token = cos.dim() == 3
    if not per_token:
        shape["P"] = cos.shape[0]
    attrs = {"layout": layout, "positions": "given" if positions is not None else "implied",
             "cos_sin": "per_token" if per_token else "table",
             "table_dtype": "float32" if cos.dtype == torch.float32 and q.dtype != torch.float32 else "input"}
    return Problem(op, shape, q.dtype, attrs)


def _inputs(names: tuple[str, str], x: torch.Tensor, y: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            positions: Optional[torch.Tensor]) -> dict[str, torch.Tensor]:
    d = {names[0]: x, names[1]: y, "cos": cos, "sin": sin}
    if positions is not None:
        d["positions"] = positions
    return d


@torch.library.custom_op("warpsmith::rope", mutates_args=())
def rope_op(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: Optional[torch.Tensor],
            layout: str, rotary_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    p = problem_of("rope", q, k, cos, positions, layout, rotary_dim)
    return launch(p, _inputs(("q", "k"), q, k, cos, sin, positions))


@rope_op.register_fake
def _(q, k, cos, sin, positions, layout, rotary_dim):
    return q.new_empty(q.shape), k.new_empty(k.shape)


@torch.library.custom_op("warpsmith::rope_backward", mutates_args=())
def rope_backward_op(dq_out: torch.Tensor, dk_out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     positions: Optional[torch.Tensor], layout: str,
                     rotary_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    p = problem_of("rope_backward", dq_out, dk_out, cos, positions, layout, rotary_dim)
    return launch(p, _inputs(("dq_out", "dk_out"), dq_out, dk_out, cos, sin, positions))


@rope_backward_op.register_fake
def _(dq_out, dk_out, cos, sin, positions, layout, rotary_dim):
    return dq_out.new_empty(dq_out.shape), dk_out.new_empty(dk_out.shape)


def _setup(ctx, inputs, output) -> None:
    q, k, cos, sin, positions, layout, rotary_dim = inputs
    ctx.save_for_backward(cos, sin, positions)
    ctx.layout, ctx.rotary_dim = layout, rotary_dim
    ctx.shapes = (q.shape, k.shape)


def _backward(ctx, dq_out, dk_out):
    cos, sin, positions = ctx.saved_tensors
    if dq_out is None or dk_out is None:  # an output that did not reach the loss
        ref = dq_out if dq_out is not None else dk_out
        dq_out = dq_out if dq_out is not None else ref.new_zeros(ctx.shapes[0])
        dk_out = dk_out if dk_out is not None else ref.new_zeros(ctx.shapes[1])
    dq, dk = rope_backward_op(dq_out, dk_out, cos, sin, positions, ctx.layout, ctx.rotary_dim)
    return dq, dk, None, None, None, None, None


rope_op.register_autograd(_backward, setup_context=_setup)

__all__ = ["rope_op", "rope_backward_op", "problem_of"]
