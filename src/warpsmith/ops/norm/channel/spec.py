"""Normalizations over channels: ``batch_norm`` and ``group_norm`` (instance norm is group norm with
one channel per group: :func:`warpsmith.ops.instance_norm` calls it) and their backwards.

The input is an (N, C, S) view of an (N, C, *spatial) tensor (S: the spatial sizes multiplied;
``channels_last`` draws it with channel stride 1). Statistics are fp32 (fp64 for the oracle):

``batch_norm`` (training): per channel over N x S elements, mean and the biased variance normalize;
(inference, ``training=False``): the running mean and variance given. ``group_norm``: per (n, group)
over C/G x S elements. ``y = (x - mean) / sqrt(var + eps) * w[c] + b[c]``, weight and bias optional
(fp32, as autocast keeps them). Outputs: y in x's dtype, then (training / group norm) the fp32
``mean`` and biased ``var`` per group: (C,) for batch norm, (N, G) for group norm. The running
statistics' update (momentum, unbiased variance) is done by the public op from these.

Backward: inputs dy, x, weight, and the statistics that normalized (saved mean and var, or the
running ones); outputs dx, then dw and db when present (fp32).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F

from ....core.error_contract import ErrorContract
from ....core.dtypes import UNIT_ROUNDOFF
from ....core.opspec import Axis, OpSpec, Problem, Scalar, draw
from ..spec import EXTRA_ROUNDINGS, U32

_AXES = (Axis("N", "batch"), Axis("C", "channels"), Axis("S", "spatial positions (the spatial sizes multiplied)",
                                                          reduction=True))
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def groups_of(p: Problem) -> int:
    """G: the number of channel groups (batch norm: every channel its own statistic over N)."""
    return p.attrs["groups"] if p.op.startswith("group") else p.shape["C"]


def group_len(p: Problem) -> int:
    """Elements one statistic reduces over."""
    N, C, S = p.shape["N"], p.shape["C"], p.shape["S"]
    return N * S if p.op.startswith("batch") else C // groups_of(p) * S


def stats_shape(p: Problem) -> tuple[int, ...]:
    return (p.shape["C"],) if p.op.startswith("batch") else (p.shape["N"], groups_of(p))


def batch_stats(p_training: bool, op: str) -> bool:
    return op.startswith("group") or p_training


def cdt(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _stats(x: torch.Tensor, op: str, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and biased variance (two-pass) per group, in x's dtype."""
    if op.startswith("batch"):
        mean = x.mean((0, 2))
        var = (x - mean[None, :, None]).square().mean((0, 2))
        return mean, var
    g = x.reshape(x.shape[0], groups, -1)
    mean = g.mean(-1)
    return mean, (g - mean[..., None]).square().mean(-1)


def forward_ref(x: torch.Tensor, op: str, attrs: Mapping[str, Any], w, b, rm=None, rv=None) -> torch.Tensor:
    """torch.nn.functional's batch_norm / group_norm in x's dtype (differentiable)."""
    if op.startswith("batch"):
        return F.batch_norm(x, rm, rv, w, b, training=bool(attrs["training"]), eps=attrs["eps"])
    return F.group_norm(x, attrs["groups"], w, b, attrs["eps"])


def _channels_last(t: torch.Tensor, on: bool) -> torch.Tensor:
    return t.transpose(1, 2).contiguous().transpose(1, 2) if on else t


class _ChannelBase(OpSpec):
    axes = _AXES
    dtypes = _DTYPES
    backward = False

    def __init__(self, kind: str, backward: bool = False) -> None:
        self.kind, self.backward = kind, backward
        self.name = f"{kind}_norm" + ("_backward" if backward else "")
        ch: dict[str, Any] = {}
        if kind == "batch":
            ch["training"] = (True, False)
        else:
            ch["groups"] = Scalar(1, 1, 2**16, integer=True)
        ch.update(weight=(True, False), bias=(True, False), channels_last=(False, True), eps=Scalar(1e-5, 0.0, 1.0))
        self.attr_choices = ch

    def uses_batch_stats(self, attrs: Mapping[str, Any]) -> bool:
        return self.kind == "group" or bool(attrs["training"])

    def large_scale(self, p: Problem) -> float:
        """x near its dtype's limit with the fp32 sum of squared deviations over one statistic's
        ``group_len`` elements (each below 25 s^2 for normal draws) still finite: the statistics are
        accumulated in fp32, as torch accumulates them for 16-bit inputs (the rule of the last-dim
        norms, ``ops/norm/spec.py``). Above it the sum overflows, rstd is 0, and so is torch's."""
        fmax = float(torch.finfo(p.dtype).max)
        return min(fmax ** 0.5 / 8, (float(torch.finfo(torch.float32).max) / (32 * group_len(p))) ** 0.5)

    def _x(self, p: Problem, gen, dist, device) -> torch.Tensor:
        scale = self.large_scale(p) if dist == "large" else 1.0
        x = draw((p.shape["N"], p.shape["C"], p.shape["S"]), dist, gen, p.dtype, device, scale)
        return _channels_last(x, p.attrs["channels_last"])

    def _params(self, p: Problem, gen, dist, device) -> dict[str, torch.Tensor]:
        out = {}
        C = p.shape["C"]
        d = "normal" if dist in ("large", "specials") else dist
        if p.attrs["weight"]:
            out["weight"] = draw((C,), d, gen, torch.float32, device)
        if p.attrs["bias"]:
            out["bias"] = draw((C,), d, gen, torch.float32, device)
        if not self.uses_batch_stats(p.attrs):
            out["running_mean"] = draw((C,), "normal", gen, torch.float32, device) * 0.1
            out["running_var"] = torch.rand((C,), generator=gen).to(device) + 0.5
        return out

    def flops(self, p: Problem) -> float:
        return float(8 * p.shape["N"] * p.shape["C"] * p.shape["S"])

    def min_bytes(self, p: Problem) -> float:
        e = p.dtype.itemsize
        return float((3 if self.backward else 2) * p.shape["N"] * p.shape["C"] * p.shape["S"] * e)

    def _refs(self, inputs, attrs, cd):
        w = inputs["weight"].to(cd) if attrs["weight"] else None
        b = inputs["bias"].to(cd) if attrs["bias"] and "bias" in inputs else None
        rm = inputs["running_mean"].to(cd).clone() if "running_mean" in inputs else None
        rv = inputs["running_var"].to(cd).clone() if "running_var" in inputs else None
        return w, b, rm, rv


class ChannelNormSpec(_ChannelBase):
    """Forward batch / group norm (module docstring)."""

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        return {"x": self._x(p, gen, dist, device), **self._params(p, gen, dist, device)}

    def outputs(self, p: Problem):
        N, C, S = p.shape["N"], p.shape["C"], p.shape["S"]
        outs = [((N, C, S), p.dtype)]
        if self.uses_batch_stats(p.attrs):
            outs += [(stats_shape(p), torch.float32)] * 2
        return tuple(outs)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        x = inputs["x"]
        cd = cdt(x.dtype)
        w, b, rm, rv = self._refs(inputs, attrs, cd)
        y = forward_ref(x.to(cd), self.name, attrs, w, b, rm, rv).to(x.dtype)
        if not self.uses_batch_stats(attrs):
            return (y,)
        mean, var = _stats(x.to(cd), self.name, attrs.get("groups", 1))
        return y, mean, var

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        x = inputs64["x"]
        w = inputs64["weight"].abs()[None, :, None] if attrs["weight"] else 1.0
        b = inputs64["bias"].abs()[None, :, None] if attrs["bias"] else 0.0
        if not self.uses_batch_stats(attrs):
            rstd = (inputs64["running_var"] + attrs["eps"]).rsqrt()[None, :, None]
            return ((x - inputs64["running_mean"][None, :, None]).abs() * rstd * w + b,)
        mean, var = _stats(x, self.name, attrs.get("groups", 1))
        mabs, _ = _stats(x.abs(), self.name, attrs.get("groups", 1))
        rstd = (var + attrs["eps"]).rsqrt()
        if self.kind == "batch":
            e = lambda t: t[None, :, None]  # noqa: E731
        else:
            G = attrs["groups"]
            e = lambda t: t.repeat_interleave(x.shape[1] // G, dim=1)[:, :, None]  # noqa: E731
        sy = ((x - e(mean)).abs() + e(mabs)) * e(rstd) * w + b
        return sy, mabs, var + 2 * mabs * mabs

    def contract(self, p: Problem) -> tuple[ErrorContract, ...]:
        """As the row LayerNorm's (:meth:`warpsmith.ops.norm.spec.NormSpec.contract`) with the reduction
        length of one statistic (N S for batch norm, C/G S for group norm) plus the group merge
        (Chan's identity: a few roundings per plane, counted as C/G + N more terms). var: the
        two-pass sum of squares, gamma(n) relative, plus the mean's error squared: S = var + 2 mean|x|^2."""
        dt, n = p.dtype_name, group_len(p) + p.shape["N"] + p.shape["C"] + EXTRA_ROUNDINGS
        y = ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, n)
        if not self.uses_batch_stats(p.attrs):
            return (ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, 8),)
        st = ErrorContract("float32", U32, U32, n)
        return y, st, st


class ChannelNormBackwardSpec(_ChannelBase):
    """Backward: torch.autograd through the forward's reference (in training mode it recomputes the
    statistics; the kernels use the saved ones, which ``make_inputs`` computes as the forward does)."""

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        x = self._x(p, gen, dist, device)
        scale = float(torch.finfo(p.dtype).max) ** 0.5 / 8 if dist == "large" else 1.0
        dy = _channels_last(draw(tuple(x.shape), dist, gen, p.dtype, device, scale), p.attrs["channels_last"])
        out = {"dy": dy, "x": x, **self._params(p, gen, dist, device)}
        out.pop("bias", None)
        if self.uses_batch_stats(p.attrs):
            mean, var = _stats(x.float(), self.name, p.attrs.get("groups", 1))
            out["mean"], out["var"] = mean, var
        return out

    def outputs(self, p: Problem):
        N, C, S = p.shape["N"], p.shape["C"], p.shape["S"]
        return tuple([((N, C, S), p.dtype)] + [((C,), torch.float32)] * (int(p.attrs["weight"]) + int(p.attrs["bias"])))

    def _grads(self, inputs, attrs, dy_abs: bool = False):
        x, dy = inputs["x"], inputs["dy"]
        cd = cdt(x.dtype)
        leaves = {"x": x.to(cd).detach().requires_grad_()}
        if attrs["weight"]:
            leaves["weight"] = inputs["weight"].to(cd).detach().requires_grad_()
        if attrs["bias"]:
            leaves["bias"] = torch.zeros(x.shape[1], dtype=cd, device=x.device, requires_grad=True)
        _, _, rm, rv = self._refs(inputs, attrs, cd)
        with torch.enable_grad():
            y = forward_ref(leaves["x"], self.name, attrs, leaves.get("weight"), leaves.get("bias"), rm, rv)
            grads = torch.autograd.grad(y, list(leaves.values()), dy.to(cd))
        return dict(zip(leaves, grads))

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        g = self._grads(inputs, attrs)
        x = inputs["x"]
        pd = torch.float64 if x.dtype == torch.float64 else torch.float32
        return tuple([g["x"].to(x.dtype)] + [g[k].to(pd) for k in ("weight", "bias") if k in g])

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        """As the row LayerNorm backward's, per group: S = rstd (|g| + mean|g| + a mean(|g| a)) for dx,
        a = |xhat| + mean|x| rstd; sum |dy| a for dw; sum |dy| for db."""
        x, dy = inputs64["x"], inputs64["dy"]
        N, C = x.shape[0], x.shape[1]
        w = inputs64["weight"][None, :, None] if attrs["weight"] else torch.ones((1, C, 1), dtype=x.dtype)
        if self.uses_batch_stats(attrs):
            groups = attrs.get("groups", 1)
            mean, var = _stats(x, self.name, groups)
            mabs, _ = _stats(x.abs(), self.name, groups)
            if self.kind == "batch":
                e = lambda t: t[None, :, None]  # noqa: E731
            else:
                e = lambda t: t.repeat_interleave(C // groups, dim=1)[:, :, None]  # noqa: E731
            rstd = e((var + attrs["eps"]).rsqrt())
            a = (x - e(mean)).abs() * rstd + e(mabs) * rstd
            g = (dy * w).abs()
            if self.kind == "batch":
                gm = lambda t: t.mean((0, 2))[None, :, None]  # noqa: E731
            else:
                gm = lambda t: e(t.reshape(N, groups, -1).mean(-1))  # noqa: E731
            sdx = rstd * (g + gm(g) + a * gm(g * a))
        else:
            rstd = (inputs64["running_var"] + attrs["eps"]).rsqrt()[None, :, None]
            a = (x - inputs64["running_mean"][None, :, None]).abs() * rstd
            sdx = rstd * (dy * w).abs()
        outs = [sdx]
        if attrs["weight"]:
            outs.append((dy.abs() * a).sum((0, 2)))
        if attrs["bias"]:
            outs.append(dy.abs().sum((0, 2)))
        return tuple(outs)

    def contract(self, p: Problem) -> tuple[ErrorContract, ...]:
        """LayerNorm backward's analysis with n = one statistic's length (module docstring of
        :mod:`warpsmith.ops.norm.spec`); dw, db sum N S terms in two levels (per plane, then over N)."""
        dt, n = p.dtype_name, group_len(p) + p.shape["N"] + p.shape["C"]
        NS = p.shape["N"] * p.shape["S"]
        outs = [ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, 4 * n + 24)]
        if p.attrs["weight"]:
            outs.append(ErrorContract("float32", U32, U32, NS + 2 * n + 8))
        if p.attrs["bias"]:
            outs.append(ErrorContract("float32", U32, U32, NS + 8))
        return tuple(outs)


BATCH_NORM, GROUP_NORM = ChannelNormSpec("batch"), ChannelNormSpec("group")
BATCH_NORM_BACKWARD, GROUP_NORM_BACKWARD = ChannelNormBackwardSpec("batch", True), ChannelNormBackwardSpec("group", True)
CHANNEL_SPECS = (BATCH_NORM, BATCH_NORM_BACKWARD, GROUP_NORM, GROUP_NORM_BACKWARD)
