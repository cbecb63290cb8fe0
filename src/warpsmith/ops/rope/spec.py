"""Rotary position embedding: ``rope`` and ``rope_backward``.

q (B, Hq, S, D) and k (B, Hk, S, D) (Hugging Face's layout; Hq != Hk allowed) are rotated in
their first ``R = 2 R2`` dims by the angles whose cosines and sines are given; dims ``R..D`` are
copied unchanged. Pair i (``0 <= i < R2``) of token (b, s) is rotated by ``cos[row, i]``,
``sin[row, i]``::

    out1 = x1 cos - x2 sin,   out2 = x2 cos + x1 sin

with (attribute ``layout``) ``neox``: ``x1 = x[i]``, ``x2 = x[i + R2]`` (halves of the rotary
part, as GPT-NeoX and Llama); ``gptj``: ``x1 = x[2i]``, ``x2 = x[2i + 1]`` (interleaved pairs).

The angles (attribute ``cos_sin``): ``table``: cos and sin are (P, R2) tables and the row is the
token's position — ``positions`` (B, S) integers in [0, P) (attribute ``positions="given"``) or
the token's index s (``"implied"``, needs P >= S); ``per_token``: cos and sin are (B, S, R2), row
(b, s). The table holds float32 or the input dtype (attribute ``table_dtype``); the rotation is
computed in fp32 (fp64 for the oracle) and rounded once to the input dtype.

Backward: the rotation by -theta (``out1 = g1 cos + g2 sin``, ``out2 = g2 cos - g1 sin``) of the
upstream gradients ``dq_out``, ``dk_out``; its reference is torch.autograd through the forward.

Axes: B, S, Hq, Hk, R2 (rotary pairs: rotary_dim / 2), E (optional: the dims past the rotary
part, D = 2 R2 + E), P (optional: table rows, default S).

Error contract: ``fl(fl(x1 c) - fl(x2 s))`` (or one fused multiply-add) errs by at most
``u |x1 c| + u |x2 s| + u |out| <= 2 u (|x1 c| + |x2 s|)`` in fp32 (inputs, cos and sin are exact
in fp32): scale ``|x1 c| + |x2 s|`` on the rotary dims, reduction length 2 (the contract allows
``(gamma(2, u) + u) * scale ~ 3 u * scale``), then one rounding to the output dtype. Dims past the
rotary part are copies: scale 0, they must be exact.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ...core.errors import InvalidInputError
from ...core.error_contract import ErrorContract
from ...core.dtypes import PARAM_DTYPES, UNIT_ROUNDOFF, param_dtype
from ...core.opspec import INTEGERS, Axis, OpSpec, Problem, draw, on_device

LAYOUTS = ("neox", "gptj")
_AXES = (
    Axis("B", "batch size", max_size=65535),
    Axis("S", "sequence length (tokens per batch entry)"),
    Axis("Hq", "query heads"),
    Axis("Hk", "key heads"),
    Axis("R2", "rotary pairs: rotary_dim / 2"),
    Axis("E", "head dims past the rotary part (D = 2 R2 + E); absent: none", optional=True),
    Axis("P", "rows of the cos/sin table (absent: S)", optional=True),
)


def head_dim(p: Problem) -> int:
    return 2 * p.shape["R2"] + p.shape.get("E", 0)


def table_rows(p: Problem) -> int:
    return p.shape.get("P", p.shape["S"])


def rows_of(inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], batch: int, seq: int):
    """The (B or 1, S, R2) cos and sin rows of every token."""
    cos, sin = inputs["cos"], inputs["sin"]
    if attrs["cos_sin"] == "per_token":
        return cos, sin
    if attrs["positions"] == "given":
        pos = inputs["positions"]
        return cos[pos], sin[pos]
    return cos[:seq].unsqueeze(0), sin[:seq].unsqueeze(0)


def pairs(x: torch.Tensor, layout: str, r2: int) -> tuple[torch.Tensor, torch.Tensor]:
    if layout == "neox":
        return x[..., :r2], x[..., r2:2 * r2]
    return x[..., 0:2 * r2:2], x[..., 1:2 * r2:2]


def unpair(o1: torch.Tensor, o2: torch.Tensor, rest: torch.Tensor, layout: str) -> torch.Tensor:
    rot = torch.cat([o1, o2], dim=-1) if layout == "neox" else torch.stack([o1, o2], dim=-1).flatten(-2)
    return torch.cat([rot, rest], dim=-1)


def rotate(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor, layout: str, r2: int,
           inverse: bool = False) -> torch.Tensor:
    """Rotate pairs of ``x`` (B, H, S, D) by (c, s) of shape (B or 1, S, R2); ``inverse``: by -theta."""
    c, s = c.unsqueeze(1), s.unsqueeze(1)
    x1, x2 = pairs(x, layout, r2)
    if inverse:
        o1, o2 = x1 * c + x2 * s, x2 * c - x1 * s
    else:
        o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
    return unpair(o1, o2, x[..., 2 * r2:], layout)


def rotation_scale(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor, layout: str, r2: int) -> torch.Tensor:
    """``|x1 c| + |x2 s|`` (first of a pair) and ``|x2 c| + |x1 s|`` (second); 0 on the copied dims."""
    c, s = c.unsqueeze(1).abs(), s.unsqueeze(1).abs()
    a1, a2 = (t.abs() for t in pairs(x, layout, r2))
    return unpair(a1 * c + a2 * s, a2 * c + a1 * s, torch.zeros_like(x[..., 2 * r2:]), layout)


class _Rope(OpSpec):
    axes = _AXES
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    attr_choices = {
        "layout": LAYOUTS,
        "positions": ("implied", "given"),
        "cos_sin": ("table", "per_token"),
        "table_dtype": PARAM_DTYPES,
    }
    backward = False
    names = ("q", "k")

    def problem(self, shape, dtype, attrs=None) -> Problem:
        p = super().problem(shape, dtype, attrs)
        if p.attrs["cos_sin"] == "per_token" and (p.attrs["positions"] == "given" or "P" in p.shape):
            raise InvalidInputError(f"attributes of {self.name}", "positions='implied' and no P axis with "
                                    "per-token cos/sin (they are already one row per token)",
                                    f"positions={p.attrs['positions']}, P={p.shape.get('P')}")
        if p.attrs["cos_sin"] == "table" and p.attrs["positions"] == "implied" and table_rows(p) < p.shape["S"]:
            raise InvalidInputError(f"axis P of {self.name}", f"P >= S = {p.shape['S']} (implied positions read "
                                    "table row s for token s)", table_rows(p))
        return p

    # ---- inputs -----------------------------------------------------------------------------
    def large_scale(self, p: Problem) -> float:
        # linear in x with |cos|, |sin| <= 1: |out| <= |x1| + |x2|
        return float(torch.finfo(p.dtype).max) / 64

    def _tables(self, p: Problem, gen: torch.Generator, dist: str, device) -> dict[str, torch.Tensor]:
        B, S, r2 = p.shape["B"], p.shape["S"], p.shape["R2"]
        tdt = param_dtype(p.attrs["table_dtype"], p.dtype)
        shape = (B, S, r2) if p.attrs["cos_sin"] == "per_token" else (table_rows(p), r2)
        out: dict[str, torch.Tensor] = {}
        if dist in ("normal", "uniform", "large"):  # real angles: position * base^(-i / R2)
            if p.attrs["cos_sin"] == "per_token":
                pos = torch.randint(0, 1 << 16, (B, S, 1), generator=on_device(gen, device), device=device)
            else:
                pos = torch.arange(shape[0], device=device).unsqueeze(-1)
            inv_freq = 10000.0 ** (-torch.arange(r2, device=device, dtype=torch.float64) / r2)
            theta = pos.to(torch.float64) * inv_freq
            out["cos"], out["sin"] = theta.cos().to(tdt), theta.sin().to(tdt)
        else:  # outliers, tiny, specials (NaN/Inf in the tables too), integers
            out["cos"], out["sin"] = draw(shape, dist, gen, tdt, device), draw(shape, dist, gen, tdt, device)
        if p.attrs["positions"] == "given":
            out["positions"] = torch.randint(0, table_rows(p), (B, S), generator=on_device(gen, device), device=device)
        return out

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        B, S, hq, hk, D = p.shape["B"], p.shape["S"], p.shape["Hq"], p.shape["Hk"], head_dim(p)
        scale = self.large_scale(p) if dist == "large" else 1.0
        a, b = self.names
        # the first as Hugging Face makes it (a (B, S, H, D) projection viewed as (B, H, S, D)), the second contiguous
        x1 = draw((B, S, hq, D), dist, gen, p.dtype, device, scale).transpose(1, 2)
        x2 = draw((B, hk, S, D), dist, gen, p.dtype, device, scale)
        return {a: x1, b: x2, **self._tables(p, gen, dist, device)}

    def exact_inputs(self, p, gen, device="cpu"):
        return self.make_inputs(p, gen, INTEGERS, device)  # products and sums of small integers: exact

    # ---- semantics ----------------------------------------------------------------------------
    def outputs(self, p: Problem):
        B, S, D = p.shape["B"], p.shape["S"], head_dim(p)
        return (((B, p.shape["Hq"], S, D), p.dtype), ((B, p.shape["Hk"], S, D), p.dtype))

    def _rows(self, inputs, attrs, x):
        return rows_of(inputs, attrs, x.shape[0], x.shape[2])

    def error_scale(self, inputs64, attrs):
        a, b = self.names
        c, s = self._rows(inputs64, attrs, inputs64[a])
        r2 = c.shape[-1]
        return tuple(rotation_scale(inputs64[n], c, s, attrs["layout"], r2) for n in (a, b))

    def contract(self, p: Problem):
        dt = p.dtype_name
        c = ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=UNIT_ROUNDOFF["float32"], reduction_len=2)
        return c, c

    def flops(self, p: Problem) -> float:
        return 6.0 * p.shape["B"] * p.shape["S"] * (p.shape["Hq"] + p.shape["Hk"]) * p.shape["R2"]

    def min_bytes(self, p: Problem) -> float:
        B, S, r2 = p.shape["B"], p.shape["S"], p.shape["R2"]
        e = p.dtype.itemsize
        te = param_dtype(p.attrs["table_dtype"], p.dtype).itemsize
        x = 2 * B * S * (p.shape["Hq"] + p.shape["Hk"]) * head_dim(p) * e  # read and write q and k
        if p.attrs["cos_sin"] == "per_token":
            rows = B * S
        else:
            rows = S if p.attrs["positions"] == "implied" else min(table_rows(p), B * S)
        pos = 8 * B * S if p.attrs["positions"] == "given" else 0
        return float(x + 2 * rows * r2 * te + pos)


def _work(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


class RopeSpec(_Rope):
    """Forward: ``(q_out, k_out)``."""

    name = "rope"

    def reference(self, inputs, attrs):
        q, k = inputs["q"], inputs["k"]
        w = _work(q)
        c, s = (t.to(w) for t in self._rows(inputs, attrs, q))
        r2 = c.shape[-1]
        return tuple(rotate(x.to(w), c, s, attrs["layout"], r2).to(x.dtype) for x in (q, k))


class RopeBackwardSpec(_Rope):
    """Backward: ``(dq, dk)`` from the upstream gradients ``dq_out``, ``dk_out`` (torch.autograd
    through the forward reference)."""

    name = "rope_backward"
    backward = True
    names = ("dq_out", "dk_out")

    def reference(self, inputs, attrs):
        gq, gk = inputs["dq_out"], inputs["dk_out"]
        w = _work(gq)
        c, s = (t.to(w) for t in self._rows(inputs, attrs, gq))
        r2 = c.shape[-1]
        with torch.enable_grad():
            q = torch.zeros(gq.shape, dtype=w, device=gq.device, requires_grad=True)
            k = torch.zeros(gk.shape, dtype=w, device=gk.device, requires_grad=True)
            outs = [rotate(x, c, s, attrs["layout"], r2) for x in (q, k)]
            dq, dk = torch.autograd.grad(outs, (q, k), (gq.to(w), gk.to(w)))
        return dq.to(gq.dtype), dk.to(gk.dtype)


ROPE = RopeSpec()
ROPE_BACKWARD = RopeBackwardSpec()
ROPE_OPS = (ROPE, ROPE_BACKWARD)
