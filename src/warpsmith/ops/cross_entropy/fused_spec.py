"""The fused linear cross-entropy: ``cross_entropy(hidden @ weight.T + bias, target)`` and its gradients.

``fused_linear_cross_entropy`` outputs the loss (hidden's dtype, as torch returns for the unfused
``F.cross_entropy(F.linear(...))``) and, per the ``grads`` attribute, the gradients of the loss
(of the sum of the row losses for ``none``) for a unit upstream gradient, in hidden's dtype:
``grads="all"``: grad_hidden, grad_weight[, grad_bias]; ``"hidden"``: grad_hidden (a frozen head);
``"none"``: none (inference). Autograd scales them by the upstream gradient.
``fused_linear_cross_entropy_backward`` outputs the gradients for a given upstream gradient (scalar
for mean/sum, (M,) for none) in hidden's dtype, recomputing the logits.

The reference is torch's unfused path: ``F.linear`` in the input dtype (its logits rounded to it),
``F.cross_entropy`` in fp32 (fp64 for the oracle), autograd for the gradients.

Error contract (composition; u = 2^-24, u_d the input dtype's unit roundoff, fl its subnormal step;
every term is a worst-case bound (the cross-entropy kernel's to first order), and the error scale
returned is that absolute budget
divided by the contract's rate gamma(V) + u, so ``allowed = u_out |ref| + budget``):

- logits ``z~`` (the GEMM's contract, ops/matmul/spec.py): ``e_z = u_d |z| + (gamma(H') + u) |h||W|^T + fl``,
  H' = H (+1 with a bias);
- loss: lse is monotone and shift-equivariant, so ``|lse(z~) - lse(z)| <= max_i e_z,i``; the row
  loss moves by at most ``max e_z + (1 - eps) e_z,t + eps mean e_z``, plus the cross-entropy
  kernel's own error (spec.py) on the perturbed logits; reductions as in spec.py;
- the gradient of the logits (in place in the chunk, input dtype): ``|log p~_i - log p_i| <=
  kappa_i = e_z,i + max e_z``, so ``p~`` lies in ``[p e^-kappa, min(1, p e^kappa)]``; plus the
  kernel's own error and the rounding to the input dtype: ``e_dz``;
- dz carries the mean's 1/count (as torch's gradient does), so every rounding to the input dtype
  happens at the gradients' own magnitude;
- grad_hidden ``= dz @ W``: ``e_dz @ |W| + (gamma(V) + u)(|dz| + e_dz) @ |W|``, rounded to the input
  dtype by the GEMM (the output's own rounding, ``u_out``);
- grad_weight ``= dz^T h``, one GEMM per vocabulary chunk over all M rows (fp32 accumulation, rounded
  once to the input dtype, ``u_out``), its dz recomputed from logits computed again (each within
  ``e_z`` of the exact logits) and the row statistics of the first pass (within ``max e_z``), so the
  same ``kappa`` and ``e_dz`` hold: the GEMM needs ``e_dz^T |h| + (gamma(M) + u)(|dz| + e_dz)^T |h|``;
  the budget kept, ``e_dz^T |h| + (gamma(M + 1) + 2u + 1.01 u_d)(|dz| + e_dz)^T |h| + M fl`` (written
  for an fp32 sum of per-chunk products rounded to the input dtype), is larger and still bounds it;
- grad_bias ``= sum over rows of dz`` in fp32: ``sum e_dz + (gamma(M) + u) sum (|dz| + e_dz)``,
  rounded once to the input dtype (``u_out``).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F

from ...core.errors import WarpsmithError
from ...core.error_contract import _SUBNORMAL_STEP, ErrorContract, gamma
from ...core.dtypes import UNIT_ROUNDOFF, dtype_name
from ...core.opspec import Axis, OpSpec, Problem, draw
from .spec import (U32, XENT_ATTRS, cross_entropy_ref, draw_targets, grad_scale_rows, grad_terms, loss_contract,
    rate, row_stats, row_terms, working)

GRADS = ("all", "hidden", "none")


def _needs(attrs: Mapping[str, Any]) -> tuple[bool, bool]:
    """(gradient of hidden, gradients of weight and bias)."""
    return attrs["grads"] in ("all", "hidden"), attrs["grads"] == "all"


def _reference(inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], grad: torch.Tensor | None):
    """Loss and gradients through torch's unfused path (grad None: of the loss' sum, else of ``grad``)."""
    h, w, t, b = inputs["hidden"], inputs["weight"], inputs["target"], inputs.get("bias")
    hid, wgt = _needs(attrs)
    with torch.enable_grad():
        hh = h.detach().requires_grad_(hid)
        ww = w.detach().requires_grad_(wgt)
        bb = b.detach().requires_grad_(wgt) if b is not None else None
        loss = cross_entropy_ref(working(F.linear(hh, ww, bb)), t, attrs)
        wrt = [hh] + ([ww] + ([bb] if bb is not None else []) if wgt else [])
        if not hid:
            return loss.detach().to(h.dtype)
        if grad is None:
            grads = torch.autograd.grad(loss.sum(), wrt)
        else:
            grads = torch.autograd.grad(loss, wrt, grad.to(loss.dtype))
    if grad is not None:
        return tuple(grads) if len(grads) > 1 else grads[0]
    return (loss.detach().to(h.dtype),) + tuple(grads)


def _budgets(x64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], dt: torch.dtype, backward: bool) -> list:
    """Absolute error budgets of each output, in output order (see the module docstring)."""
    h, w, t, b = x64["hidden"], x64["weight"], x64["target"], x64.get("bias")
    name = dtype_name(dt)
    u, ud, fl = U32, UNIT_ROUNDOFF[name], _SUBNORMAL_STEP[name]
    (M, H), V = h.shape, w.shape[0]
    eps = float(attrs["label_smoothing"])
    hid, wgt = _needs(attrs)
    z, zabs = h @ w.T, h.abs() @ w.abs().T
    if b is not None:
        z, zabs = z + b, zabs + b.abs()
    zero = torch.zeros((), dtype=z.dtype, device=z.device)
    # a non-finite exact logit is computed exactly (the same infinity, or NaN where the reference has NaN)
    e_z = torch.where(z.isfinite(), ud * z.abs() + rate(H + (b is not None)) * zabs + fl, zero)
    ignored, x_t, onehot = row_terms(z, t, attrs["ignore_index"])
    emax = e_z.amax(-1)
    out = []
    count = (~ignored).sum()
    if not backward:
        e_t = (e_z * onehot).sum(-1)
        m, ls = row_stats(z)
        # the kernel's own error (spec.py) on the perturbed logits: m moves by at most emax,
        # ls by 2 emax, x_t by e_t
        ls_up = ls.abs() + 2 * emax
        kernel = 6 * ((m - x_t).abs() + emax + e_t + ls_up) + 16
        row = emax + (1 - eps) * e_t
        if eps > 0:
            spread = (z - m[:, None]).abs().mean(-1) + 2 * emax
            kernel = kernel + 6 * eps * (spread + (z.abs() + e_z).mean(-1) + ls_up)
            row = row + eps * e_z.mean(-1)
        row = torch.where(ignored, zero, row + rate(V) * kernel)
        if attrs["reduction"] != "none":
            rows = cross_entropy_ref(z, t, attrs, "none")
            row = row.sum() + rate(M) * 2 * rows.abs().sum()
            row = row / count if attrs["reduction"] == "mean" else row
        out.append(row)
        if not hid:
            return out
    p, c, _, ls = grad_terms(z, t, attrs)
    kappa = e_z + emax[:, None]
    logp = (z - row_stats(z)[0][:, None]) - ls[:, None]
    p_up = torch.exp(logp + kappa).clamp_max(1.0).nan_to_num(0.0)  # p~ lies in [p e^-kappa, min(1, p e^kappa)]
    dp = torch.maximum(p_up - p, p - torch.exp(logp - kappa).nan_to_num(0.0))
    dist = torch.where(p_up > 0, logp.abs() + kappa, zero)
    terms = (p_up * (2 * (ls.abs() + 2 * emax)[:, None] + 21) + 3 * p_up * dist + 4 * c + onehot
             + 2 * ((p - c).abs() + dp))
    # the forward's gradients are for a unit upstream gradient: s = 1 (sum, none) or 1/count (mean)
    s = grad_scale_rows(x64["grad"] if backward else torch.ones((), dtype=z.dtype, device=z.device), t,
                        {**attrs, "reduction": "sum" if not backward and attrs["reduction"] == "none"
                         else attrs["reduction"]})
    s = s.abs()[:, None]
    pre = torch.where(s > 0, s * (dp + rate(V) * terms), zero)
    dz = torch.where(s > 0, s * (p - c).abs(), zero)
    e_dz = torch.where(s > 0, pre + ud * (dz + pre) + fl, zero)
    a = dz + e_dz
    wa = w.abs()
    pre_h = e_dz @ wa + rate(V) * (a @ wa)
    # each gradient's last rounding to the input dtype is the contract's u_out |ref|: (1 + u_d) on the rest
    out.append(pre_h * (1 + ud) + fl)
    if wgt:
        ha = h.abs()
        exact_w = a.T @ ha
        pre_w = e_dz.T @ ha + (gamma(M + 1, u) + 2 * u + 1.01 * ud) * exact_w + M * fl
        out.append(pre_w * (1 + ud))
        if b is not None:
            exact_b = a.sum(0)
            pre_b = e_dz.sum(0) + rate(M) * exact_b
            out.append(pre_b * (1 + ud))
    return out


class FusedLinearCrossEntropySpec(OpSpec):
    name = "fused_linear_cross_entropy"
    axes = (Axis("M", "rows (flattened leading dimensions of hidden)"),
            Axis("H", "hidden size (the GEMM's reduction)", reduction=True),
            Axis("V", "classes (the weight's rows; the cross-entropy's reduction)", reduction=True))
    dtypes = (torch.float16, torch.bfloat16, torch.float32)
    attr_choices = {"reduction": XENT_ATTRS["reduction"], "bias": (False, True), "grads": GRADS,
                    "ignore_index": XENT_ATTRS["ignore_index"], "label_smoothing": XENT_ATTRS["label_smoothing"]}
    backward = False

    def large_scale(self, p: Problem) -> float:
        # logits ~ sqrt(H) s^2 reach the cross-entropy's large scale; sums over M rows stay finite
        fmax = float(torch.finfo(p.dtype).max)
        logits = min(fmax**0.5 / 4, fmax / (64 * p.shape["M"]))
        return (logits / p.shape["H"] ** 0.5) ** 0.5

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal", device="cpu") -> dict:
        M, H, V = p.shape["M"], p.shape["H"], p.shape["V"]
        scale = self.large_scale(p) if dist == "large" else 1.0
        inputs = {"hidden": draw((M, H), dist, gen, p.dtype, device, scale),
                  "weight": draw((V, H), dist, gen, p.dtype, device, scale)}
        if p.attrs["bias"]:
            inputs["bias"] = draw((V,), dist, gen, p.dtype, device, scale)
        inputs["target"] = draw_targets(M, V, p.attrs["ignore_index"], gen, device)
        if self.backward:
            shape = () if p.attrs["reduction"] != "none" else (M,)
            inputs["grad"] = draw(shape, dist, gen, p.dtype, device)
        return inputs

    def outputs(self, p: Problem):
        M, H, V = p.shape["M"], p.shape["H"], p.shape["V"]
        hid, wgt = _needs(p.attrs)
        dt = p.dtype
        out = [] if self.backward else [(() if p.attrs["reduction"] != "none" else (M,), p.dtype)]
        out += [((M, H), dt)] if hid else []
        out += [((V, H), dt)] if wgt else []
        out += [((V,), dt)] if wgt and p.attrs["bias"] else []
        return tuple(out)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]):
        return _reference(inputs, attrs, inputs["grad"] if self.backward else None)

    def oracle(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]):
        """The error scale depends on the working dtype (the logits are rounded to it), which the
        float64 copies no longer carry: it is passed here."""
        x64 = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in inputs.items()}
        return self.reference(x64, attrs), self.error_scale(x64, attrs, working_dtype=inputs["hidden"].dtype)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any],
                    working_dtype: torch.dtype | None = None):
        if working_dtype is None:
            raise WarpsmithError(f"{self.name}: the error scale needs the working dtype (use oracle())")
        scales = [bud / rate(inputs64["weight"].shape[0]) for bud in _budgets(inputs64, attrs, working_dtype,
                                                                                self.backward)]
        return tuple(scales) if len(scales) > 1 else scales[0]

    def contract(self, p: Problem):
        V = p.shape["V"]
        out = [ErrorContract(dtype_name(d), UNIT_ROUNDOFF[dtype_name(d)], U32, V) for _, d in self.outputs(p)]
        if not self.backward:
            out[0] = loss_contract(p.dtype_name, V, p.attrs["reduction"] != "none")
        return tuple(out) if len(out) > 1 else out[0]

    def flops(self, p: Problem) -> float:
        hid, wgt = _needs(p.attrs)
        M, H, V = p.shape["M"], p.shape["H"], p.shape["V"]
        return 2.0 * M * V * H * (1 + hid + wgt) + 5.0 * M * V  # logits, grad_hidden, grad_weight GEMMs

    def min_bytes(self, p: Problem) -> float:
        M, H, V, e = p.shape["M"], p.shape["H"], p.shape["V"], p.dtype.itemsize
        ins = (M * H + V * H + (V if p.attrs["bias"] else 0)) * e + 8 * M
        return float(ins + sum(e * torch.Size(s).numel() for s, _ in self.outputs(p)))


class FusedLinearCrossEntropyBackwardSpec(FusedLinearCrossEntropySpec):
    name = "fused_linear_cross_entropy_backward"
    attr_choices = {**FusedLinearCrossEntropySpec.attr_choices, "grads": ("all", "hidden")}
    backward = True


FUSED_LINEAR_CROSS_ENTROPY = FusedLinearCrossEntropySpec()
FUSED_LINEAR_CROSS_ENTROPY_BACKWARD = FusedLinearCrossEntropyBackwardSpec()
