"""Softmax and log-softmax over the last dimension, and their backward ops.

A problem is ``M`` rows (the flattened leading dimensions) of length ``N``. Every kernel computes
in fp32 and rounds once to the output dtype (the input's).

- ``softmax``: ``y_i = exp(x_i - m) / s`` with ``m = max_j x_j``, ``s = sum_j exp(x_j - m)``.
- ``log_softmax``: ``y_i = (x_i - m) - log s``.
- ``softmax_backward``: inputs the saved output ``y`` and the upstream gradient ``dy``:
  ``dx_i = y_i (dy_i - sum_j dy_j y_j)``.
- ``log_softmax_backward``: ``dx_i = dy_i - exp(y_i) sum_j dy_j``.

Non-finite inputs follow torch: a row holding a NaN or a +inf, or made only of -inf, is NaN
throughout; a -inf entry among finite ones gives 0 (log-softmax: -inf).

Error contracts (why the bounds hold). Let ``u = 2^-24`` (fp32, where every kernel computes),
``g = gamma(N, u) / u`` (the classical bound of an N-term summation in any order, about N),
``d_i = x_i - m <= 0`` and ``K <= N`` the number of running-max rescalings of the looped
(online) kernels. The kernels may use the GPU's approximate fp32 ``exp``/``log``/division
(``ex2.approx``, ``lg2.approx``, ``div.full``: at most 2 ulp = 4u each) and may flush fp32
subnormal intermediates (each flush changes a value by less than ``2^-126``). To first order:

- ``exp(fl(x_i - m))``: relative error ``<= 3u|d_i| + 4u`` (the rounding of ``x_i - m`` and
  of the multiplication by ``log2 e`` are amplified by ``|d_i|``: exp's condition number).
- ``s``: the summation contributes ``g u``; each term's exp error, weighted by
  ``exp(d_j) <= 1`` and with ``exp(d_j)|d_j| <= 1/e``, adds at most ``(3N/e + 4)u`` relative to
  ``s >= 1`` (the maximum contributes exactly 1); each online rescaling by
  ``exp(m_old - m_new)`` adds ``5u`` (exp and product) per rescaling a term goes through, and its
  argument's rounding telescopes into the ``3u|d_j|`` already counted. So
  ``rel(s) <= u (g + 1.11 N + 4 + 5K) <= u (7.11 g + 4)``.
- softmax ``y_i = e_i / s`` (4u for the division, or 5u for a reciprocal and a product):
  ``|err| <= u |y_i| (3|d_i| + 7.11 g + 13)``; we allow ``B_i = |y_i| (3|d_i| + 8g + 16)``.
- log-softmax ``y_i = fl(fl(x_i - m) - fl(log s))``: ``u|d_i|`` + ``rel(s)`` + ``log``'s own
  ``6u log s + 2u`` + ``u|y_i|``; we allow ``B_i = |d_i| + |y_i| + 6 log s + 8g + 16``.
- softmax backward ``c = sum dy_j y_j`` (``g u sum|dy_j y_j|``), then ``dy_i - c`` and the
  product (``2u``): ``B_i = (g + 4) |y_i| (|dy_i| + sum_j |dy_j y_j|)``.
- log-softmax backward ``S = sum dy_j`` (``g u sum|dy_j|``), ``exp(y_i)`` (``3u|y_i| + 4u``),
  the product and the subtraction: ``B_i = |dy_i| + exp(y_i) (g + 8 + 3|y_i|) sum_j |dy_j|``.

Each ``B_i`` also gets ``(N + 2) 2^-126 / u`` for flushed subnormals, and the margins in the
constants (8g for 7.11g, ...) cover the second-order terms and the final rounding's
``(1 + u_out)`` factor. The generic contract (core/error_contract.py) allows
``u_out |y| + (gamma(N, u) + u) * scale + subnormal step``: the error scale is
``B_i / (g + 1)``, so its product with ``gamma(N, u) + u = (g + 1) u`` is exactly ``u B_i``.
The rounding to the output dtype is the ``u_out |y|`` term. The contract's second criterion
(at most 4x the reference's own error in the working dtype, plus one ulp) keeps the loose
worst-case constants from hiding a sloppy kernel.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ...core.error_contract import ErrorContract, gamma
from ...core.dtypes import UNIT_ROUNDOFF
from ...core.opspec import Axis, OpSpec, Problem, draw

_U = UNIT_ROUNDOFF["float32"]
_FLUSH = 2.0**-126  # the smallest normal fp32: what one flushed subnormal can change


def _g(n: int) -> float:
    return gamma(n, _U) / _U


def _compute_dtype(t: torch.Tensor) -> torch.dtype:
    """float64 for the oracle, else fp32 (the kernels' working precision)."""
    return torch.float64 if t.dtype == torch.float64 else torch.float32


class _RowSpec(OpSpec):
    """Shared by the four ops: ``M`` rows of length ``N``, one output shaped like the input."""

    axes = (
        # below 2^31 with room for a last partial block of rows: row indices are int32 in the kernels
        Axis("M", "rows (the flattened leading dimensions)", max_size=2**31 - 256),
        Axis("N", "row length (the softmax dimension)", reduction=True),
    )
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    attr_choices: Mapping[str, Any] = {}
    LOG = False

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["M"], p.shape["N"]), p.dtype),)

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        return ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=_U, reduction_len=p.shape["N"])

    def _scale(self, bound: torch.Tensor, n: int) -> torch.Tensor:
        """The error scale whose product with the contract's ``gamma(N, u) + u`` is ``u * bound``."""
        return (bound + (n + 2) * _FLUSH / _U) / (_g(n) + 1.0)


class SoftmaxSpec(_RowSpec):
    """``softmax`` (or ``log_softmax`` with ``LOG``) over the last dimension; see the module docstring."""

    def __init__(self, log: bool) -> None:
        self.LOG = log
        self.name = "log_softmax" if log else "softmax"

    def large_scale(self, p: Problem) -> float:
        # exp(x) overflows fp32 beyond 88.7, so a kernel that skips the max subtraction fails,
        # while x_i - m stays far from overflow and rows are not all one-hot.
        return min(float(torch.finfo(p.dtype).max) ** 0.5 / 4, 2.0**14)

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        scale = self.large_scale(p) if dist == "large" else 1.0
        return {"x": draw((p.shape["M"], p.shape["N"]), dist, gen, p.dtype, device, scale)}

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        x = inputs["x"]
        fn = torch.log_softmax if self.LOG else torch.softmax
        return fn(x.to(_compute_dtype(x)), dim=-1).to(x.dtype)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        x = inputs64["x"]
        n = x.shape[-1]
        d = (x - x.amax(dim=-1, keepdim=True)).abs()
        g = _g(n)
        if self.LOG:
            y = torch.log_softmax(x, dim=-1)
            log_s = torch.logsumexp(x, dim=-1, keepdim=True) - x.amax(dim=-1, keepdim=True)
            bound = d + y.abs() + 6 * log_s + 8 * g + 16
        else:
            bound = torch.softmax(x, dim=-1) * (3 * d + 8 * g + 16)
        return self._scale(bound, n)

    def flops(self, p: Problem) -> float:
        return 5.0 * p.shape["M"] * p.shape["N"]  # max, subtract, exp, add, divide (or subtract)

    def min_bytes(self, p: Problem) -> float:
        return 2.0 * p.shape["M"] * p.shape["N"] * p.dtype.itemsize  # read x, write y


class SoftmaxBackwardSpec(_RowSpec):
    """``softmax_backward`` (or ``log_softmax_backward`` with ``LOG``): ``dx`` from ``y`` and ``dy``.

    The reference is the derivative autograd applies for ``torch.softmax`` /
    ``torch.log_softmax`` (``_softmax_backward_data`` / ``_log_softmax_backward_data`` on the
    saved output, as in torch's derivatives.yaml), in fp32 for every working dtype and in
    float64 for the oracle. The tests also check the public ops' gradients end to end against
    ``torch.autograd`` through the forward reference in float64.
    """

    def __init__(self, log: bool) -> None:
        self.LOG = log
        self.name = ("log_softmax" if log else "softmax") + "_backward"
        self.forward = SoftmaxSpec(log)

    def large_scale(self, p: Problem) -> float:
        # |dx| <= (N + 1) max|dy|: keep the gradient's output finite
        fmax = float(torch.finfo(p.dtype).max)
        return min(fmax**0.5 / 4, fmax / (16 * (p.shape["N"] + 1)))

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """``y`` is the forward's output (in the dtype) on ``x`` drawn from ``dist``; ``dy`` from ``dist``."""
        x = self.forward.make_inputs(p, gen, dist, device)
        y = self.forward.reference(x, {})
        scale = self.large_scale(p) if dist == "large" else 1.0
        return {"y": y, "dy": draw((p.shape["M"], p.shape["N"]), dist, gen, p.dtype, device, scale)}

    def exact_inputs(self, p: Problem, gen: torch.Generator,
                     device: str | torch.device = "cpu") -> dict[str, torch.Tensor] | None:
        """Small integers for ``y`` and ``dy``: the softmax backward is polynomial in them, so it is
        exact in fp32 there (the verifier detects it). The log-softmax backward has an ``exp``: none."""
        if self.LOG:
            return None
        shape = (p.shape["M"], p.shape["N"])
        return {"y": draw(shape, "integers", gen, p.dtype, device), "dy": draw(shape, "integers", gen, p.dtype, device)}

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        y, dy = inputs["y"], inputs["dy"]
        ct = _compute_dtype(y)
        fn = torch.ops.aten._log_softmax_backward_data if self.LOG else torch.ops.aten._softmax_backward_data
        return fn(dy.to(ct), y.to(ct), -1, ct).to(y.dtype)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        y, dy = inputs64["y"], inputs64["dy"]
        n = y.shape[-1]
        g = _g(n)
        if self.LOG:
            e = torch.exp(y)
            bound = dy.abs() + e * (g + 8 + 3 * y.abs()) * dy.abs().sum(dim=-1, keepdim=True)
        else:
            bound = (g + 4) * y.abs() * (dy.abs() + (dy * y).abs().sum(dim=-1, keepdim=True))
        return self._scale(bound, n)

    def flops(self, p: Problem) -> float:
        return 4.0 * p.shape["M"] * p.shape["N"]

    def min_bytes(self, p: Problem) -> float:
        return 3.0 * p.shape["M"] * p.shape["N"] * p.dtype.itemsize  # read y and dy, write dx


SOFTMAX = SoftmaxSpec(log=False)
LOG_SOFTMAX = SoftmaxSpec(log=True)
SOFTMAX_BACKWARD = SoftmaxBackwardSpec(log=False)
LOG_SOFTMAX_BACKWARD = SoftmaxBackwardSpec(log=True)
SPECS = (SOFTMAX, LOG_SOFTMAX, SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD)

__all__ = ["SoftmaxSpec", "SoftmaxBackwardSpec", "SOFTMAX", "LOG_SOFTMAX", "SOFTMAX_BACKWARD",
           "LOG_SOFTMAX_BACKWARD", "SPECS"]
