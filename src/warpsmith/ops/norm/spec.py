"""The normalization ops: RMSNorm and LayerNorm over the last dimension, and their backwards.

``rms_norm``:   ``y = x * rstd * w``,              ``rstd = 1 / sqrt(mean(x^2) + eps)``
``layer_norm``: ``y = (x - mean) * rstd * w + b``, ``rstd = 1 / sqrt(mean((x - mean)^2) + eps)``

over rows of length N (M rows: the flattened leading dimensions). Statistics are always computed
in fp32 (fp64 for the oracle) and ``y`` is rounded once to the input's dtype. Attributes: the
weight ``w`` and bias ``b`` are optional; ``weight_dtype`` is ``"input"`` (w and b in x's dtype)
or ``"float32"`` (fp32 parameters with a half-precision x); ``residual`` fuses the add
``s = x + residual`` (rounded to x's dtype, as ``x + residual`` in PyTorch) which is then
normalized and returned too; ``eps`` is continuous (a :class:`Scalar`, outside the tuning key).

Outputs, in order: ``y``, then ``s`` when the residual is fused, then the saved statistics as
fp32 (M,) tensors: ``rstd`` for RMSNorm, ``mean, rstd`` for LayerNorm (torch's
``native_layer_norm`` order). The backward ops take the upstream gradient ``dy``, the normalized
input ``x`` (``s`` when the forward fused the residual), ``weight`` and those statistics, plus
``ds`` (the gradient flowing into the returned sum) when ``residual`` is set, and return ``dx``
(``+ ds``: then it is also the gradient of the residual), then ``dw`` and ``db`` when present.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ...core.error_contract import ErrorContract
from ...core.dtypes import PARAM_DTYPES, UNIT_ROUNDOFF, dtype_name, param_dtype
from ...core.opspec import Axis, OpSpec, Problem, Scalar, draw

U32 = UNIT_ROUNDOFF["float32"]
# Roundings outside the length-N sums, counted in the error analysis (NormSpec.contract's
# docstring): the 1/N scaling (fp32 division is within 2 ulp on the GPU), + eps, the
# approximate rsqrt (rsqrt.approx.f32: relative error below 2^-22.9, about 2.2 u), the
# products by rstd and w, the + b. Half of the eps/rsqrt/mean roundings reach y through the
# square root; 8 covers them with room.
EXTRA_ROUNDINGS = 8

_AXES = (Axis("M", "rows (the flattened leading dimensions)"),
         Axis("N", "row length (the normalized dimension)", reduction=True))
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
WEIGHT_DTYPES = PARAM_DTYPES


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Statistics and arithmetic run in fp32 (fp64 for the oracle's float64 inputs)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def statistics(xs: torch.Tensor, kind: str, eps: float) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(mean or None, rstd) over the last dimension of ``xs`` (already in the compute dtype)."""
    if kind == "rms":
        return None, torch.rsqrt(xs.square().mean(-1) + eps)
    mean = xs.mean(-1)
    return mean, torch.rsqrt((xs - mean[..., None]).square().mean(-1) + eps)


def normalize(xs: torch.Tensor, kind: str, eps: float, w: torch.Tensor | None, b: torch.Tensor | None):
    """``(y, mean, rstd)`` in the compute dtype of ``xs`` (differentiable)."""
    mean, rstd = statistics(xs, kind, eps)
    y = (xs * rstd[..., None]) if mean is None else (xs - mean[..., None]) * rstd[..., None]
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mean, rstd


def _param_dtype(p: Problem) -> torch.dtype:
    return param_dtype(p.attrs["weight_dtype"], p.dtype)


def _fwd_large_scale(p: Problem) -> float:
    """x near its dtype's limit, with x + residual (each below 5 s for normal draws) and the fp32
    sum of squares (N terms, each below 25 s^2) still finite."""
    fmax = float(torch.finfo(p.dtype).max)
    return min(fmax / 16, (float(torch.finfo(torch.float32).max) / (32 * p.shape["N"])) ** 0.5)


class _NormBase(OpSpec):
    axes = _AXES
    dtypes = _DTYPES
    kind = "rms"  # or "layer"
    suffix = ""  # "_backward" for the backward specs

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = ("rms_norm" if kind == "rms" else "layer_norm") + self.suffix
        choices: dict[str, Any] = {"weight": (True, False)}
        if kind == "layer":
            choices["bias"] = (True, False)
        choices.update(weight_dtype=WEIGHT_DTYPES, residual=(False, True),
                       eps=Scalar(1e-6 if kind == "rms" else 1e-5, 0.0, 1.0))
        self.attr_choices = choices

    def large_scale(self, p: Problem) -> float:
        return _fwd_large_scale(p)

    @property
    def has_bias_attr(self) -> bool:
        return self.kind == "layer"

    def _params(self, p: Problem, gen: torch.Generator, dist: str, device, bias: bool = True) -> dict[str, torch.Tensor]:
        """Weight and bias: drawn from ``dist`` at unit scale (``large`` stresses x, not them)."""
        out = {}
        pd = _param_dtype(p)
        if p.attrs["weight"]:
            out["weight"] = draw((p.shape["N"],), dist, gen, pd, device)
        if bias and p.attrs.get("bias"):
            out["bias"] = draw((p.shape["N"],), dist, gen, pd, device)
        return out

    def flops(self, p: Problem) -> float:
        return float((4 if self.kind == "rms" else 7) * p.shape["M"] * p.shape["N"])


class NormSpec(_NormBase):
    """Forward RMSNorm / LayerNorm (see the module docstring)."""

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        M, N = p.shape["M"], p.shape["N"]
        scale = self.large_scale(p) if dist == "large" else 1.0
        out = {"x": draw((M, N), dist, gen, p.dtype, device, scale)}
        if p.attrs["residual"]:
            out["residual"] = draw((M, N), dist, gen, p.dtype, device, scale)
        out.update(self._params(p, gen, dist, device))
        return out

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        M, N = p.shape["M"], p.shape["N"]
        outs = [((M, N), p.dtype)]
        if p.attrs["residual"]:
            outs.append(((M, N), p.dtype))
        outs += [((M,), torch.float32)] * (1 if self.kind == "rms" else 2)
        return tuple(outs)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        x = inputs["x"]
        s = x + inputs["residual"] if attrs["residual"] else x  # rounded to x's dtype, as in PyTorch
        cdt = compute_dtype(x.dtype)
        w = inputs["weight"] if attrs["weight"] else None
        b = inputs["bias"] if attrs.get("bias") else None
        y, mean, rstd = normalize(s.to(cdt), self.kind, attrs["eps"], None if w is None else w.to(cdt),
                                  None if b is None else b.to(cdt))
        outs = [y.to(x.dtype)] + ([s] if attrs["residual"] else [])
        return tuple(outs + ([] if mean is None else [mean]) + [rstd])

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        x = inputs64["x"]
        s = x + inputs64["residual"] if attrs["residual"] else x
        mean, rstd = statistics(s, self.kind, attrs["eps"])
        w = inputs64["weight"].abs() if attrs["weight"] else 1.0
        mean_abs = s.abs().mean(-1)
        if mean is None:
            sy = s.abs() * rstd[:, None] * w
        else:
            sy = ((s - mean[:, None]).abs() + mean_abs[:, None]) * rstd[:, None] * w
            if attrs.get("bias"):
                sy = sy + inputs64["bias"].abs()
        outs = [sy]
        if attrs["residual"]:
            outs.append(x.abs() + inputs64["residual"].abs())
        return tuple(outs + ([] if mean is None else [mean_abs]) + [rstd])

    def contract(self, p: Problem) -> tuple[ErrorContract, ...]:
        """Per output, from a first-order rounding analysis (u = fp32's unit roundoff, n = N).

        rstd: the sum of n squares (positive terms) has relative error at most gamma(n); the 1/N,
        + eps and rsqrt add a few u; through the square root rstd's relative error is at most
        gamma(n)/2 + about 4u. For LayerNorm the mean's error e <= (gamma(n) + 2u) mean|x| enters
        the variance only as e^2 (the centred sum of x - mean is zero), a second-order term for
        rows whose mean is not ~1/(gamma(n) sqrt(n)) times their spread (the contract assumes it).
        So with S = rstd, reduction length n + EXTRA_ROUNDINGS bounds rstd; mean: S = mean|x|.
        (This is the analysis of the two-pass variance the row kernels use. The looped kernel's
        per-lane Welford update rounds a fixed few times per element and its Chan merge is the
        exact identity for the sum of squared deviations, which keeps it within the same order;
        the verifier holds it to the same contract.)

        y: its error is |x_i rstd w_i| (rstd's error + 2u for the products) for RMSNorm; for
        LayerNorm also |e| rstd |w_i| from the mean and u |b_i| from the add, hence
        S = (|x_i - mean| + mean|x|) rstd |w_i| + |b_i|; plus one rounding u_out |y| to the output
        dtype. With the residual fused, the kernel (like the reference) normalizes s rounded to
        x's dtype while the oracle uses the exact sum: a relative perturbation u_in of each s_i,
        which moves y_i (and rstd) by at most ~2 u_in relative: u_operand = u_in covers it.
        s itself: one rounding of x + residual (u_out |s|).
        """
        dt, n = p.dtype_name, p.shape["N"]
        u_in = UNIT_ROUNDOFF[dt] if p.attrs["residual"] else 0.0
        y = ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, n + EXTRA_ROUNDINGS, u_operand=u_in)
        stat = ErrorContract("float32", U32, U32, n + EXTRA_ROUNDINGS, u_operand=u_in)
        outs = [y] + ([ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, 1)] if p.attrs["residual"] else [])
        return tuple(outs + [stat] * (1 if self.kind == "rms" else 2))

    def min_bytes(self, p: Problem) -> float:
        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        pe = _param_dtype(p).itemsize
        streams = 2 + (2 if p.attrs["residual"] else 0)  # x, y (+ residual, s)
        params = (int(p.attrs["weight"]) + int(bool(p.attrs.get("bias")))) * N * pe
        return float(streams * M * N * e + params + 4 * M * (1 if self.kind == "rms" else 2))


class NormBackwardSpec(_NormBase):
    """Backward of RMSNorm / LayerNorm: the reference is torch.autograd through the forward's
    reference (exact in float64 for the oracle), which recomputes the statistics; the kernels use
    the saved ones (``make_inputs`` supplies them as the forward computes them, in fp32)."""

    suffix = "_backward"

    def grad_scale(self, p: Problem) -> float:
        """Scale of ``dy`` (and ``ds``) under ``large``: as large as keeps dw = sum over M rows of
        dy * xhat, and the fp32 row sums of dy * w * xhat, finite."""
        fmax = float(torch.finfo(p.dtype).max)
        return min(fmax ** 0.5 / 4, fmax / (256 * (p.shape["M"] + p.shape["N"])))

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        M, N = p.shape["M"], p.shape["N"]
        big = dist == "large"
        x = draw((M, N), dist, gen, p.dtype, device, self.large_scale(p) if big else 1.0)
        dy = draw((M, N), dist, gen, p.dtype, device, self.grad_scale(p) if big else 1.0)
        out = {"dy": dy, "x": x}
        out.update(self._params(p, gen, dist, device, bias=False))  # db = sum(dy) needs no bias
        mean, rstd = statistics(x.to(compute_dtype(x.dtype)), self.kind, p.attrs["eps"])  # the forward's
        if mean is not None:
            out["mean"] = mean.float()
        out["rstd"] = rstd.float()
        if p.attrs["residual"]:
            out["ds"] = draw((M, N), dist, gen, p.dtype, device, self.grad_scale(p) if big else 1.0)
        return out

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        M, N = p.shape["M"], p.shape["N"]
        pd = _param_dtype(p)
        outs = [((M, N), p.dtype)]
        if p.attrs["weight"]:
            outs.append(((N,), pd))
        if p.attrs.get("bias"):
            outs.append(((N,), pd))
        return tuple(outs)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        x, dy = inputs["x"], inputs["dy"]
        cdt = compute_dtype(x.dtype)
        leaves = {"x": x.to(cdt).detach().requires_grad_()}
        if attrs["weight"]:
            leaves["weight"] = inputs["weight"].to(cdt).detach().requires_grad_()
        if attrs.get("bias"):  # its value does not enter any gradient
            leaves["bias"] = torch.zeros(x.shape[-1], dtype=cdt, device=x.device, requires_grad=True)
        with torch.enable_grad():
            y, _, _ = normalize(leaves["x"], self.kind, attrs["eps"], leaves.get("weight"), leaves.get("bias"))
            grads = torch.autograd.grad(y, list(leaves.values()), dy.to(cdt))
        g = dict(zip(leaves, grads))
        dx = g["x"] + inputs["ds"].to(cdt) if attrs["residual"] else g["x"]
        pdt = x.dtype if x.dtype == torch.float64 else param_dtype(attrs["weight_dtype"], x.dtype)
        return tuple([dx.to(x.dtype)] + [g[k].to(pdt) for k in ("weight", "bias") if k in leaves])

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        x, dy = inputs64["x"], inputs64["dy"]
        mean, rstd = statistics(x, self.kind, attrs["eps"])
        r = rstd[:, None]
        g = (dy * inputs64["weight"]).abs() if attrs["weight"] else dy.abs()
        if mean is None:
            a = (x * r).abs()
            sdx = r * (g + a * (g * a).mean(-1, keepdim=True))
        else:
            a = ((x - mean[:, None]) * r).abs() + x.abs().mean(-1, keepdim=True) * r
            sdx = r * (g + g.mean(-1, keepdim=True) + a * (g * a).mean(-1, keepdim=True))
        if attrs["residual"]:
            sdx = sdx + inputs64["ds"].abs()
        outs = [sdx]
        if attrs["weight"]:
            outs.append((dy.abs() * a).sum(0))
        if attrs.get("bias"):
            outs.append(dy.abs().sum(0))
        return tuple(outs)

    def contract(self, p: Problem) -> tuple[ErrorContract, ...]:
        """First-order rounding analysis, u = fp32's unit roundoff, n = N, rho = gamma(n)/2 + 4u
        the saved rstd's relative error (see :meth:`NormSpec.contract`), a = |xhat| (+ mean|x| rstd
        for LayerNorm, the saved mean's error in units of xhat).

        dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w: xhat carries rho (RMSNorm) or
        1.5 gamma(n) + 6u (LayerNorm: the mean's and rstd's errors); the length-n dot product
        mean(g xhat) adds gamma(n); rstd multiplies the xhat term a third time. Summing:
        |error| <= S (2.5 gamma(n) + 18u) for RMSNorm and S (3.5 gamma(n) + 24u) for LayerNorm
        with S = rstd (|g| + mean|g| + a mean(|g| a)) (+ |ds|), covered by reduction lengths
        3n + 24 and 4n + 24. dw = sum over M rows of dy xhat: gamma(M) for the (two-level,
        fixed-order) sum plus xhat's error: S = sum |dy| a, length M + n + 8 (RMSNorm),
        M + 2n + 8 (LayerNorm). db = sum of dy: gamma(M) sum |dy|. Each output then rounds once.
        """
        dt, M, n = p.dtype_name, p.shape["M"], p.shape["N"]
        pd = dtype_name(_param_dtype(p))
        rms = self.kind == "rms"
        outs = [ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, (3 if rms else 4) * n + 24)]
        if p.attrs["weight"]:
            outs.append(ErrorContract(pd, UNIT_ROUNDOFF[pd], U32, M + (1 if rms else 2) * n + 8))
        if p.attrs.get("bias"):
            outs.append(ErrorContract(pd, UNIT_ROUNDOFF[pd], U32, M))
        return tuple(outs)

    def flops(self, p: Problem) -> float:
        return float((8 if self.kind == "rms" else 11) * p.shape["M"] * p.shape["N"])

    def min_bytes(self, p: Problem) -> float:
        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        pe = _param_dtype(p).itemsize
        streams = 3 + (1 if p.attrs["residual"] else 0)  # dy, x, dx (+ ds)
        params = (2 * int(p.attrs["weight"]) + int(bool(p.attrs.get("bias")))) * N * pe  # w in, dw, db out
        return float(streams * M * N * e + params + 4 * M * (1 if self.kind == "rms" else 2))


RMS_NORM = NormSpec("rms")
LAYER_NORM = NormSpec("layer")
RMS_NORM_BACKWARD = NormBackwardSpec("rms")
LAYER_NORM_BACKWARD = NormBackwardSpec("layer")
NORM_SPECS = (RMS_NORM, RMS_NORM_BACKWARD, LAYER_NORM, LAYER_NORM_BACKWARD)
