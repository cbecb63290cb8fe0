"""Gated activations: ``swiglu`` / ``geglu`` and their backwards.

``out = act(gate) * up``, computed in fp32 (fp64 for the oracle), rounded once to the input dtype;
``act`` is silu (SwiGLU) or gelu (GeGLU: ``approximate="none"`` is the erf form, ``"tanh"`` the tanh
form, as :func:`torch.nn.functional.gelu`).

Axes: ``M`` rows (the flattened leading dims), ``H`` the hidden size (columns of ``out``).
Input forms (the ``packed`` attribute):

- ``packed=False``: ``gate`` and ``up``, each (M, H);
- ``packed=True``: one tensor ``x`` (M, 2H) whose first half (``x[:, :H]``) is the gate and whose
  second half is up (the layout of a fused gate/up projection).

Backward (``<op>_backward``): inputs ``dy`` (M, H) and the forward's inputs; outputs
``d gate = dy * up * act'(gate)`` and ``d up = dy * act(gate)`` — two (M, H) tensors, or, packed,
one (M, 2H) tensor holding both halves.

Error contracts (``u = 2^-24``, the fp32 unit roundoff; each bound is per element, before the
one rounding to the output dtype that ``ErrorContract`` adds as ``u_out |ref|``). The
contract allows ``(gamma(n, u) + u) * scale ~ (n + 1) u * scale``; the scale holds the
conditioning of the formula, the constant ``n`` counts the roundings. Operation errors assumed
(the GPU's fast paths): ``exp`` ``(4 + 2|x|) u`` relative (ex2.approx after multiplying by log2 e:
the rounded argument costs ``2|x| u``), ``erf`` and division ``4 u`` relative, + - * ``u``.

- silu, ``s = sigmoid(g) = exp(min(g, 0)) / (1 + exp(-|g|))`` (no exp overflows) and
  ``t = sigmoid(-g)`` likewise (= 1 - s without cancellation). The numerator's exp has argument
  ``-|g|`` where g < 0 (weight 1; exactly 1 otherwise), the denominator's enters with weight
  ``sigmoid(-|g|) <= 1/2``: ``rel(s) <= (12 + 6|g| t) u``. Forward ``y = g s up`` (2 products):
  ``rel <= (14 + 6|g| t) u`` → scale ``|y| (1 + |g| t)``, n = 13 (backward ``d up`` likewise).
  ``silu' = s (1 + g t)``, then ``(dy up) * silu'``:
  ``abs <= |dy up| s (|g| t (14 + 6|g| s) + |1 + g t| (16 + 6|g| t)) u`` → scale
  ``|dy up| s (|g| t (1 + |g| s) + |1 + g t| (1 + |g| t))``, n = 15.
- gelu (erf): ``Phi = 0.5 (1 + erf(g / sqrt 2))`` has an *absolute* error ``<= 3.5 u`` (the
  argument's rounding ~u, erf 4 u, the sum 2 u: erf near -1 cancels in 1 + erf, as in the reference
  itself), so ``y = (0.5 g)(1 + erf) up`` has ``abs <= (3.5 |g| + 2 |gelu(g)|) u |up|`` → scale
  ``|up| (|g| + |gelu(g)|)``, n = 3 (backward ``d up`` likewise). ``gelu' = Phi + g phi``,
  ``phi = exp(-g^2/2) / sqrt(2 pi)`` with ``rel(g phi) <= (7 + 1.5 g^2) u``:
  ``abs <= |dy up| (3.5 + |g| phi (7 + 1.5 g^2) + 3 |gelu'|) u`` → scale
  ``|dy up| (1 + |gelu'| + |g| phi (1 + g^2))``, n = 7.
- gelu (tanh), ``w = 2 k (g + c g^3)`` (``rel(w) <= 7 u``), computed as ``g * sigmoid(w)``
  (= ``0.5 g (1 + tanh(w/2))``) with the sigmoid of silu: ``rel(S) <= (12 + 27|w| T) u`` for
  ``S = sigmoid(w)``, ``T = sigmoid(-w)``. Forward: ``rel <= (14 + 27|w| T) u`` → ``|y| (1 + 2|w| T)``.
  The reference's formula ``0.5 g (1 + tanh)`` cancels like the erf form (absolute error ~``|g| u``;
  in fp64 the oracle itself is 0 where the exact value is below ``|g| 2^-53``), so the scale also
  holds that term: ``|up| (|y| (1 + 2|w| T) + |g|)``, n = 14. Backward ``gelu' = S + g S T w'``,
  ``w' = 2 k (1 + 3 c g^2)`` (rel 5 u), ``rel(g S T w') <= (32 + 27|w|) u``: scale ``|dy up| (|gelu'| +
  S (1 + 2|w| T) + |g| S T |w'| (1 + |w|) + |g| (1 + |w'|))``, n = 31 (the last term: the reference's
  ``1 - tanh^2`` cancellation, ~``|g| |w'| u`` absolute).

Underflow: where sigmoid's exp of ``-|g|`` (silu) makes a subnormal intermediate, its absolute
error is up to ``2^-150`` (subnormals assumed kept, not flushed to zero), amplified by the factors
that multiply it: the silu scales add ``2^-126 |up| (1 + |g|)`` (forward, ``d up`` with ``|dy|``)
and ``2^-126 |dy up| (2 + |g|)`` (``d gate``) — ``(n + 1) u`` times these is ``(n + 1) 2^-150 ...``.
The gelu scales already hold an absolute ``|g|`` term that covers it.

Products of the upstream gradient are formed as the reference does (``(dy * up) * act'``). The
fp32 contracts drop the second criterion (ref_factor): see ``_contract``.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch

from ...core.error_contract import ErrorContract
from ...core.dtypes import UNIT_ROUNDOFF
from ...core.opspec import Axis, OpSpec, Problem, draw

_U32 = UNIT_ROUNDOFF["float32"]
_TINY = 2.0**-126  # fp32 underflow: a subnormal result errs by up to 2^-150 = _TINY * u absolute
_K = math.sqrt(2.0 / math.pi)  # tanh-form gelu: tanh(k (x + c x^3))
_C = 0.044715
_AXES = (Axis("M", "rows: the flattened leading dims"),
         Axis("H", "hidden size: columns of the output (the packed input has 2H)"))
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def kernel_activation(op: str, attrs: Mapping[str, Any]) -> str:
    """The kernels' ACT constexpr: "silu", "gelu" (erf) or "gelu_tanh"."""
    if op.startswith("swiglu"):
        return "silu"
    return "gelu_tanh" if attrs.get("approximate") == "tanh" else "gelu"


def act(g: torch.Tensor, name: str) -> torch.Tensor:
    if name == "silu":
        return torch.nn.functional.silu(g)
    return torch.nn.functional.gelu(g, approximate="tanh" if name == "gelu_tanh" else "none")


def _work(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def split(inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(gate, up) from either input form."""
    if "x" in inputs:
        x = inputs["x"]
        h = x.shape[-1] // 2
        return x[..., :h], x[..., h:]
    return inputs["gate"], inputs["up"]


def _conditioning(g: torch.Tensor, name: str) -> dict[str, torch.Tensor]:
    """Per-element factors of the error scales (float64 in, float64 out)."""
    if name == "silu":
        s, t = torch.sigmoid(g), torch.sigmoid(-g)
        gt = g.abs() * t
        return {"y": 1 + gt, "y_abs": _TINY * (1 + g.abs()),
                "dact": s * (gt * (1 + g.abs() * s) + (1 + g * t).abs() * (1 + gt)) + _TINY * (2 + g.abs())}
    if name == "gelu":
        phi = torch.exp(-0.5 * g * g) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + torch.erf(g / math.sqrt(2)))
        return {"y": torch.ones_like(g), "y_abs": g.abs(),
                "dact": 1 + (cdf + g * phi).abs() + g.abs() * phi * (1 + g * g)}
    w = 2 * _K * (g + _C * g ** 3)
    S, T = torch.sigmoid(w), torch.sigmoid(-w)
    dw = 2 * _K * (1 + 3 * _C * g * g)
    d = S + g * S * T * dw
    return {"y": 1 + 2 * w.abs() * T, "y_abs": g.abs(),
            "dact": (d.abs() + S * (1 + 2 * w.abs() * T) + g.abs() * S * T * dw.abs() * (1 + w.abs())
                     + g.abs() * (1 + dw.abs()))}


_N = {"silu": (13, 15), "gelu": (3, 7), "gelu_tanh": (14, 31)}  # roundings counted: (forward / d up, d gate)


class _Gated(OpSpec):
    axes = _AXES
    dtypes = _DTYPES
    backward = False

    def __init__(self, name: str, has_approximate: bool) -> None:
        self.name = name
        self.attr_choices = ({"approximate": ("none", "tanh")} if has_approximate else {}) | {"packed": (False, True)}

    def act_name(self, attrs: Mapping[str, Any]) -> str:
        return kernel_activation(self.name, attrs)

    def large_scale(self, p: Problem) -> float:
        # outputs are products of two (backward: three) inputs; gelu-tanh squares the gate: keep
        # |g|^2 and |dy up| well below the dtype's maximum for normal draws up to ~6 sigma
        return float(torch.finfo(p.dtype).max) ** 0.5 / 32

    def _gate_up(self, p: Problem, gen: torch.Generator, dist: str, device) -> dict[str, torch.Tensor]:
        M, H = p.shape["M"], p.shape["H"]
        scale = self.large_scale(p) if dist == "large" else 1.0
        if p.attrs["packed"]:
            return {"x": draw((M, 2 * H), dist, gen, p.dtype, device, scale)}
        return {"gate": draw((M, H), dist, gen, p.dtype, device, scale),
                "up": draw((M, H), dist, gen, p.dtype, device, scale)}

    def flops(self, p: Problem) -> float:
        per = {"silu": 6, "gelu": 8, "gelu_tanh": 12}[self.act_name(p.attrs)]
        return float(p.shape["M"] * p.shape["H"] * (per * (2 if self.backward else 1) + 1))

    def _contract(self, p: Problem, n: int) -> ErrorContract:
        dt = p.dtype_name
        # fp32 outputs: no second criterion (at most ref_factor x the reference's own error): the fp32
        # reference uses accurate libm calls while a kernel may use the GPU's fast exp (the bound above
        # allows for it), and over a small tensor the reference's worst error can be ~0 by luck.
        return ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=_U32, reduction_len=n,
                             ref_factor=None if p.dtype == torch.float32 else 4.0)


class GatedSpec(_Gated):
    """``out = act(gate) * up`` (see the module docstring)."""

    def make_inputs(self, p, gen, dist="normal", device="cpu"):
        return self._gate_up(p, gen, dist, device)

    def outputs(self, p):
        return (((p.shape["M"], p.shape["H"]), p.dtype),)

    def reference(self, inputs, attrs):
        g, u = split(inputs)
        w = _work(g)
        return (act(g.to(w), self.act_name(attrs)) * u.to(w)).to(g.dtype)

    def error_scale(self, inputs64, attrs):
        g, u = split(inputs64)
        name = self.act_name(attrs)
        c = _conditioning(g, name)
        return u.abs() * (act(g, name).abs() * c["y"] + c["y_abs"])

    def contract(self, p):
        return self._contract(p, _N[self.act_name(p.attrs)][0])

    def min_bytes(self, p):
        return float(3 * p.shape["M"] * p.shape["H"] * p.dtype.itemsize)


class GatedBackwardSpec(_Gated):
    """``d gate = dy * up * act'(gate)``, ``d up = dy * act(gate)``: the reference is torch.autograd
    through the forward reference (float64 for the oracle)."""

    backward = True

    def make_inputs(self, p, gen, dist="normal", device="cpu"):
        scale = self.large_scale(p) if dist == "large" else 1.0
        return {"dy": draw((p.shape["M"], p.shape["H"]), dist, gen, p.dtype, device, scale),
                **self._gate_up(p, gen, dist, device)}

    def outputs(self, p):
        M, H = p.shape["M"], p.shape["H"]
        if p.attrs["packed"]:
            return (((M, 2 * H), p.dtype),)
        return (((M, H), p.dtype), ((M, H), p.dtype))

    def reference(self, inputs, attrs):
        g, u = split(inputs)
        w = _work(g)
        with torch.enable_grad():
            g_, u_ = (t.detach().to(w).clone().requires_grad_() for t in (g, u))
            y = act(g_, self.act_name(attrs)) * u_
            dg, du = torch.autograd.grad(y, (g_, u_), inputs["dy"].to(w))
        if "x" in inputs:
            return torch.cat([dg, du], dim=-1).to(g.dtype)
        return dg.to(g.dtype), du.to(g.dtype)

    def error_scale(self, inputs64, attrs):
        g, u = split(inputs64)
        dy = inputs64["dy"]
        name = self.act_name(attrs)
        c = _conditioning(g, name)
        dg = (dy * u).abs() * c["dact"]
        du = dy.abs() * (act(g, name).abs() * c["y"] + c["y_abs"])
        return torch.cat([dg, du], dim=-1) if "x" in inputs64 else (dg, du)

    def contract(self, p):
        n_up, n_gate = _N[self.act_name(p.attrs)]
        if p.attrs["packed"]:
            return self._contract(p, max(n_up, n_gate))
        return self._contract(p, n_gate), self._contract(p, n_up)

    def min_bytes(self, p):
        return float(5 * p.shape["M"] * p.shape["H"] * p.dtype.itemsize)


SWIGLU = GatedSpec("swiglu", has_approximate=False)
SWIGLU_BACKWARD = GatedBackwardSpec("swiglu_backward", has_approximate=False)
GEGLU = GatedSpec("geglu", has_approximate=True)
GEGLU_BACKWARD = GatedBackwardSpec("geglu_backward", has_approximate=True)
ACTIVATION_OPS = (SWIGLU, SWIGLU_BACKWARD, GEGLU, GEGLU_BACKWARD)
