"""Cross-entropy on logits, its backward, and the fused linear cross-entropy (fused_spec.py).

Semantics are exactly ``torch.nn.functional.cross_entropy``'s with class indices: rows of logits
(M, V), targets (M,) int64, ``ignore_index`` rows contribute nothing (``mean`` divides by the number
of rows whose target is not ``ignore_index``: NaN when there is none), label smoothing eps gives
each row ``(1 - eps) nll + eps mean_i(-log p_i)``. The math is in fp32 for half-precision logits;
the loss is returned in the logits' dtype (as torch does).

Error analysis (u = 2^-24, fp32 arithmetic; a kernel's exp/log within 4 ulps, as Triton's are):

- the statistics: the row max ``m = max(max_i x_i, -FLT_MAX)`` is exact; ``ls = log s``,
  ``s = sum_i exp(x_i - m)`` in [1, V]: the rounding of ``x_i - m`` and of exp's argument perturb
  each term by ``2 u |x_i - m|`` relative, and ``sum_i e^{-d_i} d_i <= (V - 1)/e``; exp's own error
  (4u), each online rescaling (5u per BLOCK_V >= 16 chunk) and the summation (gamma(V)) keep the
  relative error of ``s`` below ``gamma(V) + 1.06 V u + 9 u``; log adds ``4 u log V + 2 u`` and its
  rounding ``u |ls|``. So ``|ls~ - ls| <= u |ls| + 16 gamma(V)`` for every V >= 1. The logsumexp is
  saved as the pair (m, ls), not as one fp32 ``m + ls``, which would lose ``u |m|`` (all of ls when
  |m| >> 1) and with it the accuracy of every probability in the backward.
- the row loss ``(1 - eps)((m - x_t) + ls) + eps ((m - mean x) + ls)`` adds the roundings of the
  subtractions and sums, of ``1 - eps`` (eps itself is rounded to fp32), of the products and of the
  mean (``gamma(V) mean|x|``): ``|loss~ - loss| <= (gamma(V) + u)(6 (|m - x_t| + |ls|)
  + 6 eps (mean|x - m| + mean|x| + |ls|) + 16)`` before the one rounding to the output dtype
  (``u_out |loss|``). Ignored rows are exactly 0.
- ``mean``/``sum``: the row errors add up, the sum of M rows costs ``gamma(M) sum|loss_r|`` and the
  division ``u``; reduction length V + M covers both gammas.
- the gradient ``dx_i = p_i s - c_i s``: ``p_i = exp((x_i - m) - ls~)`` carries ls' error (above)
  and ``(3 |x_i - lse| + 2 |ls|) u + 4 u`` relative; the products, the subtraction, ``c_i`` (3u) and
  a mean's ``g / count`` (u) add ``u (4 c_i + [i = t] + 2 |p_i - c_i|)`` times |s|. With
  ``p |x - lse| = -p log p`` the scale is ``|s| (p (2 |ls| + 21) + 3 (-p log p) + 4 c + [i = t]
  + 2 |p - c|)`` at reduction length V.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F

from ...core.error_contract import ErrorContract, gamma
from ...core.dtypes import UNIT_ROUNDOFF
from ...core.opspec import Axis, OpSpec, Problem, Scalar, draw, on_device

REDUCTIONS = ("mean", "sum", "none")
U32 = UNIT_ROUNDOFF["float32"]
IGNORE_INDEX = Scalar(-100, -(2**63), 2**63 - 1, integer=True)
LABEL_SMOOTHING = Scalar(0.0, 0.0, 1.0)
IGNORED_FRACTION = 0.25  # of the rows make_inputs draws, on average, with target = ignore_index
XENT_ATTRS = {"reduction": REDUCTIONS, "ignore_index": IGNORE_INDEX, "label_smoothing": LABEL_SMOOTHING}


def rate(n: int) -> float:
    """The multiplier of an error scale in a contract of reduction length n (fp32 accumulation)."""
    return gamma(n, U32) + U32


def working(x: torch.Tensor) -> torch.Tensor:
    """The precision the math runs in: fp32 for fp32/fp16/bf16, fp64 for the oracle."""
    return x if x.dtype == torch.float64 else x.float()


FLT_MAX = float(torch.finfo(torch.float32).max)


def row_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(m, ls)``: ``m = max(max x, -FLT_MAX)`` (in every precision, so the fp64 oracle agrees with an
    fp32 kernel on an all -inf row) and ``ls = log(sum exp(x - m))``; the logsumexp is ``m + ls``.
    Both are NaN for a row holding NaN or +inf (as torch's log_softmax, which the loss follows)."""
    m = x.amax(-1).clamp_min(-FLT_MAX)
    ls = torch.log(torch.exp(x - m[..., None]).sum(-1))
    return m + (ls - ls).where(ls.isnan(), torch.zeros_like(ls)), ls


def cross_entropy_ref(x: torch.Tensor, t: torch.Tensor, attrs: Mapping[str, Any], reduction: str | None = None):
    return F.cross_entropy(x, t, ignore_index=int(attrs["ignore_index"]),
                           label_smoothing=float(attrs["label_smoothing"]), reduction=reduction or attrs["reduction"])


def draw_targets(M: int, V: int, ignore_index: int, gen: torch.Generator, device) -> torch.Tensor:
    """Class indices in [0, V), about IGNORED_FRACTION of them replaced by ``ignore_index``."""
    g = on_device(gen, device)
    t = torch.randint(0, V, (M,), generator=g, device=device)
    return torch.where(torch.rand(M, generator=g, device=device) < IGNORED_FRACTION,
                       torch.full_like(t, int(ignore_index)), t)


def row_terms(x: torch.Tensor, t: torch.Tensor, ignore_index: int):
    """(ignored mask, x at the target (0 where ignored), one-hot of the target (0 rows where ignored))."""
    ignored = t == int(ignore_index)
    tt = torch.where(ignored, torch.zeros_like(t), t)
    onehot = torch.zeros_like(x).scatter_(1, tt[:, None], 1.0) * (~ignored)[:, None]
    return ignored, torch.where(ignored, torch.zeros_like(x[:, 0]), x.gather(1, tt[:, None])[:, 0]), onehot


def loss_row_scale(x: torch.Tensor, t: torch.Tensor, attrs: Mapping[str, Any]) -> torch.Tensor:
    """Per row: ``6 (|m - x_t| + |ls|) + 6 eps (mean|x - m| + mean|x| + |ls|) + 16`` (0 where ignored)."""
    ignored, x_t, _ = row_terms(x, t, attrs["ignore_index"])
    m, ls = row_stats(x)
    s = 6 * ((m - x_t).abs() + ls.abs()) + 16
    eps = float(attrs["label_smoothing"])
    if eps > 0:
        s = s + 6 * eps * ((x - m[:, None]).abs().mean(-1) + x.abs().mean(-1) + ls.abs())
    return torch.where(ignored, torch.zeros_like(s), s)


def reduce_scale(row_scale: torch.Tensor, row_loss: torch.Tensor, t: torch.Tensor, attrs: Mapping[str, Any]):
    """Scale of the reduced loss: the row scales plus the summation's ``2 sum |loss_r|``; / count for mean."""
    total = row_scale.sum() + 2 * row_loss.abs().sum()
    if attrs["reduction"] == "mean":
        total = total / (t != int(attrs["ignore_index"])).sum()
    return total


def loss_contract(dt: str, n: int, scalar: bool) -> ErrorContract:
    """The loss' contract. A reduced fp32 loss is one number: its error and the fp32 reference's are one
    sample each (measured over 30 draws: the same median, 0.9 vs 0.8 ulp, yet about one draw in 30 has
    ours above 4x torch's + 1 ulp), so the reference-factor criterion, a statistic over many elements,
    is not applied to it; the worst-case bound still is. In fp16/bf16 the final rounding dominates both."""
    return ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, n, ref_factor=None if scalar and dt == "float32" else 4.0)


def grad_scale_rows(g: torch.Tensor, t: torch.Tensor, attrs: Mapping[str, Any]) -> torch.Tensor:
    """The per-row factor of the gradient: g (none), g (sum), g / count (mean); 0 on ignored rows."""
    M = t.shape[0]
    ignored = t == int(attrs["ignore_index"])
    if attrs["reduction"] == "none":
        s = g
    elif attrs["reduction"] == "sum":
        s = g.expand(M)
    else:
        s = (g / (~ignored).sum()).expand(M)
    return torch.where(ignored, torch.zeros_like(s), s)


def grad_terms(x: torch.Tensor, t: torch.Tensor, attrs: Mapping[str, Any]):
    """(p, c, onehot, ls): softmax, smoothed one-hot, one-hot, log of the shifted sum of each row."""
    _, _, onehot = row_terms(x, t, attrs["ignore_index"])
    eps, V = float(attrs["label_smoothing"]), x.shape[1]
    m, ls = row_stats(x)
    p = torch.exp((x - m[:, None]) - ls[:, None])
    return p, (1 - eps) * onehot + eps / V, onehot, ls


def neg_plogp(p: torch.Tensor) -> torch.Tensor:
    return torch.where(p > 0, -p * torch.log(p.clamp_min(1e-300)), torch.zeros_like(p))


class CrossEntropySpec(OpSpec):
    """``cross_entropy``: outputs the loss (logits' dtype; scalar for mean/sum, (M,) for none) and the
    per-row statistics (M, 2) fp32: the row max m and ls = log(sum exp(x - m)) (logsumexp = m + ls),
    which the backward reuses."""

    name = "cross_entropy"
    axes = (Axis("M", "rows (flattened leading dimensions)"), Axis("V", "classes", reduction=True))
    dtypes = (torch.float16, torch.bfloat16, torch.float32)
    attr_choices = XENT_ATTRS

    def large_scale(self, p: Problem) -> float:
        # |loss| <~ 10 x the scale per row: a sum over M rows stays finite
        fmax = float(torch.finfo(p.dtype).max)
        return min(fmax**0.5 / 4, fmax / (64 * p.shape["M"]))

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal", device="cpu") -> dict:
        M, V = p.shape["M"], p.shape["V"]
        scale = self.large_scale(p) if dist == "large" else 1.0
        return {"logits": draw((M, V), dist, gen, p.dtype, device, scale),
                "target": draw_targets(M, V, p.attrs["ignore_index"], gen, device)}

    def outputs(self, p: Problem):
        loss_shape = () if p.attrs["reduction"] != "none" else (p.shape["M"],)
        return ((loss_shape, p.dtype), ((p.shape["M"], 2), torch.float32))

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]):
        x = inputs["logits"]
        w = working(x)
        return cross_entropy_ref(w, inputs["target"], attrs).to(x.dtype), torch.stack(row_stats(w), -1)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]):
        x, t = inputs64["logits"], inputs64["target"]
        rows = loss_row_scale(x, t, attrs)
        if attrs["reduction"] != "none":
            rows = reduce_scale(rows, cross_entropy_ref(x, t, attrs, "none"), t, attrs)
        stats = torch.zeros((x.shape[0], 2), dtype=torch.float64, device=x.device)
        stats[:, 1] = 16.0  # m is exact; ls within u |ls| + 16 gamma(V)
        return rows, stats

    def contract(self, p: Problem):
        dt, V = p.dtype_name, p.shape["V"]
        reduced = p.attrs["reduction"] != "none"
        return (loss_contract(dt, V + p.shape["M"] if reduced else V, reduced),
                ErrorContract("float32", U32, U32, V))

    def flops(self, p: Problem) -> float:
        return 5.0 * p.shape["M"] * p.shape["V"]

    def min_bytes(self, p: Problem) -> float:
        M, V, e = p.shape["M"], p.shape["V"], p.dtype.itemsize
        return float(M * V * e + 8 * M + 8 * M + (e * M if p.attrs["reduction"] == "none" else e))


class CrossEntropyBackwardSpec(OpSpec):
    """``cross_entropy_backward``: dlogits (logits' dtype) from the logits, targets, the forward's
    statistics ((M, 2) fp32) and the upstream gradient (scalar for mean/sum, (M,) for none)."""

    name = "cross_entropy_backward"
    axes = CrossEntropySpec.axes
    dtypes = CrossEntropySpec.dtypes
    attr_choices = XENT_ATTRS

    def large_scale(self, p: Problem) -> float:
        return CrossEntropySpec.large_scale(self, p)

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal", device="cpu") -> dict:
        inputs = CrossEntropySpec.make_inputs(self, p, gen, dist, device)
        inputs["stats"] = torch.stack(row_stats(inputs["logits"].float()), -1)
        shape = () if p.attrs["reduction"] != "none" else (p.shape["M"],)
        inputs["grad"] = draw(shape, dist, gen, p.dtype, device)
        return inputs

    def outputs(self, p: Problem):
        return (((p.shape["M"], p.shape["V"]), p.dtype),)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        x = inputs["logits"]
        with torch.enable_grad():
            w = working(x).detach().requires_grad_()
            loss = cross_entropy_ref(w, inputs["target"], attrs)
            (dx,) = torch.autograd.grad(loss, w, inputs["grad"].to(w.dtype))
        return dx.to(x.dtype)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        x, t = inputs64["logits"], inputs64["target"]
        p, c, onehot, ls = grad_terms(x, t, attrs)
        terms = p * (2 * ls.abs()[:, None] + 21) + 3 * neg_plogp(p) + 4 * c + onehot + 2 * (p - c).abs()
        s = grad_scale_rows(inputs64["grad"], t, attrs).abs()[:, None]
        return torch.where(s > 0, s * terms, torch.zeros_like(terms))

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        return ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, p.shape["V"])

    def flops(self, p: Problem) -> float:
        return 4.0 * p.shape["M"] * p.shape["V"]

    def min_bytes(self, p: Problem) -> float:
        M, V, e = p.shape["M"], p.shape["V"], p.dtype.itemsize
        return float(2 * M * V * e + 16 * M + e * (M if p.attrs["reduction"] == "none" else 1))


CROSS_ENTROPY = CrossEntropySpec()
CROSS_ENTROPY_BACKWARD = CrossEntropyBackwardSpec()

from .fused_spec import FUSED_LINEAR_CROSS_ENTROPY, FUSED_LINEAR_CROSS_ENTROPY_BACKWARD  # noqa: E402

__all__ = ["CROSS_ENTROPY", "CROSS_ENTROPY_BACKWARD", "FUSED_LINEAR_CROSS_ENTROPY",
           "FUSED_LINEAR_CROSS_ENTROPY_BACKWARD", "CrossEntropySpec", "CrossEntropyBackwardSpec", "REDUCTIONS",
           "row_stats"]
