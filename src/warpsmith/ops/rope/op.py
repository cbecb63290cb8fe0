"""``warpsmith.ops.rope`` (rotary position embedding of q and k in one launch) and ``rope_hf``, an
adapter with the signature of Hugging Face's ``apply_rotary_pos_emb``.

``warpsmith::rope`` and ``warpsmith::rope_backward``: torch.library custom ops, fake (meta)
kernels and autograd (the gradient of q and k is the rotation by -theta; cos, sin and positions get
no gradient — the public op refuses cos/sin that require one).
"""
from __future__ import annotations

from typing import Optional

import torch

from ...core.dtypes import param_dtype_attr
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...dispatch import launch
from ..shared.validate import check_device, check_dtype, check_like, check_tensor
from .spec import LAYOUTS, ROPE, ROPE_OPS
from .variant import VARIANTS

_SPECS = {s.name: s for s in ROPE_OPS}


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
             "table_dtype": param_dtype_attr(cos.dtype, q.dtype)}
    return _SPECS[op].problem(shape, q.dtype, attrs)


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
    return launch(p, VARIANTS, _inputs(("q", "k"), q, k, cos, sin, positions))


@rope_op.register_fake
def _(q, k, cos, sin, positions, layout, rotary_dim):
    return q.new_empty(q.shape), k.new_empty(k.shape)


@torch.library.custom_op("warpsmith::rope_backward", mutates_args=())
def rope_backward_op(dq_out: torch.Tensor, dk_out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     positions: Optional[torch.Tensor], layout: str,
                     rotary_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    p = problem_of("rope_backward", dq_out, dk_out, cos, positions, layout, rotary_dim)
    return launch(p, VARIANTS, _inputs(("dq_out", "dk_out"), dq_out, dk_out, cos, sin, positions))


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


def _check_qk(q: object, k: object) -> tuple[torch.Tensor, torch.Tensor]:
    q, k = check_tensor("q", q), check_tensor("k", k)
    for name, t in (("q", q), ("k", k)):
        if t.dim() != 4 or t.numel() == 0:
            raise InvalidInputError(name, "a non-empty 4-D tensor (B, H, S, D)", f"shape {tuple(t.shape)}")
    check_dtype("q", q, ROPE.dtypes)
    check_like("k", k, "q", q)
    check_device("q", q)
    if (k.shape[0], k.shape[2], k.shape[3]) != (q.shape[0], q.shape[2], q.shape[3]):
        raise InvalidInputError("shape of k", f"(B, Hk, S, D) = ({q.shape[0]}, Hk, {q.shape[2]}, {q.shape[3]}) as q",
                                tuple(k.shape))
    return q, k


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
         positions: Optional[torch.Tensor] = None, layout: str = "neox",
         rotary_dim: Optional[int] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary position embedding of q and k (one kernel launch for both).

    Pair i of a head's first ``rotary_dim`` dims is rotated by (``c = cos[row, i]``,
    ``s = sin[row, i]``): ``(x1, x2) -> (x1 c - x2 s, x2 c + x1 s)``, computed in fp32; the dims
    past ``rotary_dim`` are copied unchanged.

    Args:
        q: (B, Hq, S, D), Hugging Face's layout; any strides (e.g. the transpose of a (B, S, Hq, D)
            projection) are read in place, no copy.
        k: (B, Hk, S, D), same dtype, device, B, S and D as q (Hk != Hq allowed, e.g. GQA).
        cos: (P, R/2) table, row = the token's position; or per-token (B, S, R/2) (or (1, S, R/2),
            shared by the batch). float32 or q's dtype; R = rotary_dim. Any strides.
        sin: like cos (same shape and dtype).
        positions: optional (B, S) (or (1, S), or (S,)) int32/int64 positions into the table; None:
            token s uses row s (needs P >= S). Only with a 2-D table. A position outside [0, P) is
            not read (it is memory-safe): that token's rotary dims come out NaN.
        layout: "neox" (pairs (i, i + R/2): halves of the rotary part, GPT-NeoX / Llama) or
            "gptj" (pairs (2i, 2i + 1), interleaved).
        rotary_dim: R, even, 2 <= R <= D; None: D.

    Returns:
        (q_out, k_out): new contiguous (B, Hq, S, D) and (B, Hk, S, D) tensors in q's dtype
        (float32, float16 or bfloat16). Differentiable in q and k (the backward is the rotation by
        -theta, ``warpsmith::rope_backward``); cos and sin get no gradient.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices, sizes or attributes, or cos/sin that
            require grad (nothing is computed).
    """
    q, k = _check_qk(q, k)
    B, _, S, D = q.shape
    if layout not in LAYOUTS:
        raise InvalidInputError("layout", "one of " + ", ".join(LAYOUTS), layout)
    R = D if rotary_dim is None else rotary_dim
    if isinstance(R, bool) or not isinstance(R, int) or R < 2 or R > D or R % 2:
        raise InvalidInputError("rotary_dim", f"an even integer in [2, D={D}]", rotary_dim)
    cos, sin = check_tensor("cos", cos), check_tensor("sin", sin)
    if cos.dtype not in (torch.float32, q.dtype):
        raise InvalidInputError("dtype of cos", f"torch.float32 or {q.dtype} (as q)", str(cos.dtype))
    check_like("sin", sin, "cos", cos, shape=tuple(cos.shape))
    check_like("cos", cos, "q", q, dtype=False)
    if cos.requires_grad or sin.requires_grad:
        raise InvalidInputError("cos and sin", "tensors that do not require grad (no gradient flows to them)",
                                "requires_grad=True")
    if cos.dim() == 3:
        if cos.shape[0] not in (1, B) or tuple(cos.shape[1:]) != (S, R // 2):
            raise InvalidInputError("shape of per-token cos", f"({B} or 1, {S}, {R // 2})", tuple(cos.shape))
        if positions is not None:
            raise InvalidInputError("positions", "None with per-token cos/sin (one row per token already)",
                                    f"a tensor of shape {tuple(positions.shape)}")
    elif cos.dim() == 2:
        if cos.shape[1] != R // 2 or cos.shape[0] < 1:
            raise InvalidInputError("shape of the cos table", f"(P, {R // 2}) with P >= 1", tuple(cos.shape))
        if positions is None and cos.shape[0] < S:
            raise InvalidInputError("rows of the cos table", f"P >= S = {S} (token s reads row s when positions "
                                    "is None)", cos.shape[0])
    else:
        raise InvalidInputError("cos", f"a (P, {R // 2}) table or a per-token ({B}, {S}, {R // 2}) tensor",
                                f"shape {tuple(cos.shape)}")
    if positions is not None:
        positions = check_tensor("positions", positions)
        if positions.dim() == 1:
            positions = positions.unsqueeze(0)
        if positions.dim() != 2 or positions.shape[0] not in (1, B) or positions.shape[1] != S:
            raise InvalidInputError("shape of positions", f"({B}, {S}), (1, {S}) or ({S},)", tuple(positions.shape))
        if positions.dtype not in (torch.int32, torch.int64):
            raise InvalidInputError("dtype of positions", "torch.int32 or torch.int64", str(positions.dtype))
        check_like("positions", positions, "q", q, dtype=False)
    return rope_op(q, k, cos, sin, positions, layout, R)


def rope_hf(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1,
            check: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop-in for Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)`` (GPT-NeoX layout).

    Hugging Face passes cos and sin of shape (B, S, R) (or (S, R)) whose two halves are equal
    (``cat((freqs, freqs), -1)``, as Llama's rotary embedding builds them); R = D, or R < D for a
    partial rotary model (the dims past R are copied, as its ``q[..., :R]`` split does). This takes
    ``cos[..., :R/2]`` (a view, no copy) as per-token values and calls :func:`rope`.

    Args:
        q: (B, Hq, S, D), any strides; (B, S, Hq, D) with ``unsqueeze_dim=2``.
        k: (B, Hk, S, D), or (B, S, Hk, D) with ``unsqueeze_dim=2``.
        cos: (B, S, R) or (1, S, R) or (S, R), R even and <= D, halves equal.
        sin: like cos.
        unsqueeze_dim: 1 (heads before tokens, Llama's call) or 2 (tokens before heads: the results
            are then (B, S, H, D) views of contiguous (B, H, S, D) tensors).
        check: verify that the halves are equal (reads cos and sin once more and synchronizes with
            the device; off by default — the duplication is Hugging Face's convention and is
            assumed otherwise).

    Returns:
        (q_embed, k_embed) as ``apply_rotary_pos_emb`` returns them (computed in fp32, then
        rounded to q's dtype).

    Raises:
        InvalidInputError: as :func:`rope`; or, with ``check``, halves that differ.
    """
    cos, sin = check_tensor("cos", cos), check_tensor("sin", sin)
    if cos.dim() not in (2, 3) or cos.shape[-1] % 2 or cos.shape[-1] < 2:
        raise InvalidInputError("cos", "(B, S, R) or (S, R) with an even R (Hugging Face's duplicated halves)",
                                f"shape {tuple(cos.shape)}")
    half = cos.shape[-1] // 2
    if check:
        for name, t in (("cos", cos), ("sin", sin)):
            if t.shape == cos.shape and not torch.equal(t[..., :half], t[..., half:]):
                raise InvalidInputError(f"halves of {name}", "equal (t[..., :R/2] == t[..., R/2:], GPT-NeoX layout)",
                                        "halves that differ")
    if unsqueeze_dim not in (1, 2):
        raise InvalidInputError("unsqueeze_dim", "1 ((B, H, S, D) inputs) or 2 ((B, S, H, D) inputs)", unsqueeze_dim)
    c, s = cos[..., :half], sin[..., :half]
    if unsqueeze_dim == 2:
        q_out, k_out = rope(check_tensor("q", q).transpose(1, 2), check_tensor("k", k).transpose(1, 2), c, s,
                            None, "neox", 2 * half)
        return q_out.transpose(1, 2), k_out.transpose(1, 2)
    return rope(q, k, c, s, None, "neox", 2 * half)


__all__ = ["rope_op", "rope_backward_op", "problem_of", "rope", "rope_hf"]
