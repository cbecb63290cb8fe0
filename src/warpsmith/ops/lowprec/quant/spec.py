"""The quantization ops as pipeline ops: ``quantize`` (dynamic per row / per 1x128 block / per tensor, to
e4m3, e5m2 or int8, optionally after an RMSNorm), ``quantize_static`` (a given per-tensor scale), ``dequantize``
(``q * scale``: a continuous result, judged by an ordinary error contract) and ``stochastic_round``
(fp32 -> bf16 or e4m3, Philox(seed, i)).

References are reference.py's plain-PyTorch quantization (the single source of truth; the scaled
GEMM's inputs use the same functions). The outputs are discrete, so a rounding difference upstream of a
cast moves a quantized value by a whole step: the per-element error contract of the other families does
not fit. Each spec instead states an exact criterion over its outputs together (:meth:`judge`, which the
verifier calls in place of the per-output contracts), derived in judge.py:

- ``quantize``: the scales within a relative bound of the exact ``amax / QMAX`` (amax is exact without
  the norm; the GPU's fp32 division is within 2 ulps; the norm's error is bounded from N), exactly 1
  for an all-zero group; every quantized value equal to a saturating round-to-nearest of the exact
  ``y / s`` with the kernel's *own* scale ``s``, moved by at most the kernel's relative error of that
  quotient (so two neighbours are allowed only within that distance of a rounding tie). The
  dequantized value is then within half a step of the format (plus that relative error) of the fp64 y.
- ``stochastic_round``: every value one of the two neighbours of x in the target format (x itself where
  representable; e4m3 saturating at ±448, NaN kept, bf16 keeping ±inf), and the number of upward
  roundings within 6 standard deviations of its expectation (unbiased); bit-reproducibility for a seed
  is the verifier's determinism check.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch

from ....core.error_contract import ErrorContract
from ....core.dtypes import UNIT_ROUNDOFF
from ....core.opspec import Axis, OpSpec, Problem, Scalar, draw
from . import judge as J
from .reference import (BLOCK, DTYPE_OF, FORMATS, QMAX, expand_scale, quantize_blocks, quantize_rows,
                              quantize_tensor, saturate_cast)

GRANULARITIES = ("row", "block", "tensor")
SCALINGS = ("row", "block", "tensor")  # dequantize: the scale's shape (1,), (M, 1) or (M, ceil(N/128))
SR_TARGETS = ("bf16", "e4m3")
SR_DTYPE = {"bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn}
SEED = Scalar(0, 0, 2**31 - 1, integer=True)


def scale_columns(granularity: str, N: int) -> int:
    """Scales per row: 1 (``row``) or ceil(N / 128) (``block``)."""
    return 1 if granularity == "row" else -(-N // BLOCK)


def prequantized(inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
    """What is quantized: x, or ``x / sqrt(mean(x^2) + eps) * w`` (``norm``), in fp32, or in fp64 for fp64
    inputs (the oracle)."""
    x = inputs["x"]
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    y = x.to(work)
    if attrs["norm"]:
        y = y * torch.rsqrt(y.pow(2).mean(dim=1, keepdim=True) + attrs["eps"]) * inputs["weight"].to(work)
    return y


class QuantizeSpec(OpSpec):
    name = "quantize"
    axes = (Axis("M", "rows (tokens)"), Axis("N", "columns (channels)", reduction=True))
    dtypes = (torch.bfloat16, torch.float16, torch.float32)
    attr_choices = {"format": FORMATS, "granularity": GRANULARITIES, "norm": (False, True),
                    "eps": Scalar(1e-6, 0.0, 1.0)}

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """x from ``dist``; the norm's weight (x's dtype) normal (specials in it would reach every row)."""
        M, N = p.shape["M"], p.shape["N"]
        out = {"x": draw((M, N), dist, gen, p.dtype, device, self.large_scale(p))}
        if p.attrs["norm"]:
            out["weight"] = draw((N,), "normal", gen, p.dtype, device)
        return out

    def large_scale(self, p: Problem) -> float:
        """Near the dtype's limit; with the norm, small enough that the fp32 sum of a row's N squares stays
        finite (the kernel, like the fp32 reference, sums x^2 unscaled: a larger row overflows to inf, its
        rstd to 0 and the row quantizes to zeros)."""
        big = super().large_scale(p)
        return min(big, (float(torch.finfo(torch.float32).max) / (64 * p.shape["N"])) ** 0.5) if p.attrs["norm"] else big

    def exact_inputs(self, p: Problem, gen: torch.Generator, device: str | torch.device = "cpu") -> None:
        """None: :meth:`judge` is already an exact criterion (no separate identity test)."""
        return None

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        M, N = p.shape["M"], p.shape["N"]
        return (((M, N), DTYPE_OF[p.attrs["format"]]),
                (scale_shape(p.attrs["granularity"], M, N), torch.float32))

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """(q, scale) by reference.py's quantize_rows / quantize_blocks(1, 128) / quantize_tensor of
        :func:`prequantized`."""
        y = prequantized(inputs, attrs)
        if attrs["granularity"] == "row":
            return quantize_rows(y, attrs["format"])
        if attrs["granularity"] == "tensor":
            return quantize_tensor(y, attrs["format"])
        return quantize_blocks(y, attrs["format"], 1, BLOCK)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        y = prequantized(inputs64, attrs).abs()
        return y, y.amax().reshape(1) if attrs["granularity"] == "tensor" else y.amax(dim=1, keepdim=True)

    def contract(self, p: Problem) -> tuple[ErrorContract, ...]:
        """Not used by the verifier (see :meth:`judge`); stated for callers that ask: the quantized values
        within one step of the format (u_out = the format's relative step), the scales as :func:`judge`."""
        step = {"e4m3": 2.0**-3, "e5m2": 2.0**-2, "int8": 1.0 / 127}[p.attrs["format"]]
        rel = J.quantize_bounds(p).scale_rel
        return (ErrorContract("float32", step, 0.0, 0, ref_factor=None),
                ErrorContract("float32", rel, 0.0, 0, ref_factor=None))

    def judge(self, p: Problem, inputs: Mapping[str, torch.Tensor], outs: tuple[torch.Tensor, ...]) -> str | None:
        return J.judge_quantize(p, inputs, outs)

    def flops(self, p: Problem) -> float:
        return float(p.shape["M"] * p.shape["N"] * (4 if p.attrs["norm"] else 2))

    def min_bytes(self, p: Problem) -> float:
        """Read x (and the weight), write q (one byte an element) and the fp32 scales."""
        M, N = p.shape["M"], p.shape["N"]
        e = p.dtype.itemsize
        n_scales = math.prod(scale_shape(p.attrs["granularity"], M, N))
        return float(M * N * e + (N * e if p.attrs["norm"] else 0) + M * N + 4 * n_scales)


class StochasticRoundSpec(OpSpec):
    name = "stochastic_round"
    axes = (Axis("N", "elements (any shape, flattened)", max_size=2**48),)  # the variant states the real limit
    dtypes = (torch.float32,)
    attr_choices = {"target": SR_TARGETS, "seed": SEED}

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        return {"x": draw((p.shape["N"],), dist, gen, torch.float32, device, self.large_scale(p))}

    def large_scale(self, p: Problem) -> float:
        """e4m3: far past 448 (saturation); bf16: near fp32's limit (rounding up may reach inf)."""
        return 1e4 if p.attrs["target"] == "e4m3" else 1e38

    def exact_inputs(self, p: Problem, gen: torch.Generator, device: str | torch.device = "cpu") -> None:
        return None

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["N"],), SR_DTYPE[p.attrs["target"]]),)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        """The round-down neighbour (toward zero) of each x, a representative of the two :meth:`judge`
        accepts (a stochastic result has no single reference value)."""
        return J.neighbours(inputs["x"].float(), attrs["target"])[0]

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return inputs64["x"].abs()

    def contract(self, p: Problem) -> ErrorContract:
        """Not used by the verifier (see :meth:`judge`): within one step of the format of x."""
        step = {"bf16": 2.0**-7, "e4m3": 2.0**-3}[p.attrs["target"]]
        return ErrorContract("float32", step, 0.0, 0, ref_factor=None)

    def judge(self, p: Problem, inputs: Mapping[str, torch.Tensor], outs: tuple[torch.Tensor, ...]) -> str | None:
        return J.judge_stochastic(p, inputs, outs)

    def flops(self, p: Problem) -> float:
        return float(4 * p.shape["N"])

    def min_bytes(self, p: Problem) -> float:
        return float(p.shape["N"] * (4 + SR_DTYPE[p.attrs["target"]].itemsize))


class QuantizeStaticSpec(OpSpec):
    """``q = saturate(round(x / scale))`` with a given per-tensor scale (1,). The criterion
    (:func:`~.judge.judge_quantize_static`): q in the saturating round-to-nearest interval around the
    exact x / scale, 4u relative (the GPU's division), NaN kept in fp8, ±inf saturated."""

    name = "quantize_static"
    axes = (Axis("M", "rows"), Axis("N", "columns"))
    dtypes = (torch.bfloat16, torch.float16, torch.float32)
    attr_choices = {"format": FORMATS}

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """x from ``dist`` and a scale putting a quarter of its finite amax at QMAX: larger values saturate."""
        x = draw((p.shape["M"], p.shape["N"]), dist, gen, p.dtype, device, self.large_scale(p))
        a = x.float().abs()
        amax = float(a.where(torch.isfinite(a), torch.zeros(())).max())
        s = amax / (QMAX[p.attrs["format"]] / 4) if amax > 0 else 1.0
        return {"x": x, "scale": torch.tensor([s], dtype=torch.float32, device=device)}

    def exact_inputs(self, p: Problem, gen: torch.Generator, device: str | torch.device = "cpu") -> None:
        return None

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["M"], p.shape["N"]), DTYPE_OF[p.attrs["format"]]),)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return saturate_cast(inputs["x"].float() / inputs["scale"].float(), attrs["format"])

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return inputs64["x"].abs()

    def contract(self, p: Problem) -> ErrorContract:
        """Not used by the verifier (see :meth:`judge`)."""
        return ErrorContract("float32", {"e4m3": 2.0**-3, "e5m2": 2.0**-2, "int8": 1.0 / 127}[p.attrs["format"]],
                             0.0, 0, ref_factor=None)

    def judge(self, p: Problem, inputs: Mapping[str, torch.Tensor], outs: tuple[torch.Tensor, ...]) -> str | None:
        return J.judge_quantize_static(p, inputs, outs)

    def flops(self, p: Problem) -> float:
        return float(p.shape["M"] * p.shape["N"])

    def min_bytes(self, p: Problem) -> float:
        return float(p.shape["M"] * p.shape["N"] * (p.dtype.itemsize + 1) + 4)


def scale_shape(scaling: str, M: int, N: int) -> tuple[int, ...]:
    """The scales of a granularity (quantize) or scaling (dequantize): (1,) per tensor, (M, 1) per row,
    (M, ceil(N / 128)) per 1x128 block."""
    return (1,) if scaling == "tensor" else (M, 1) if scaling == "row" else (M, -(-N // BLOCK))


class DequantizeSpec(OpSpec):
    """``out = q * scale`` in the output dtype (the problem's dtype): one fp32 product rounded once, so the
    contract is the rigorous ``u_out |y| + 2u |y|`` (no reference-factor criterion: the bound is already
    one rounding of the output and one of the product)."""

    name = "dequantize"
    axes = (Axis("M", "rows"), Axis("N", "columns"))
    dtypes = (torch.bfloat16, torch.float16, torch.float32)
    attr_choices = {"format": FORMATS, "scaling": SCALINGS}

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """q and scale: x drawn from ``dist`` (fp32), quantized by reference.py at the problem's scaling."""
        x = draw((p.shape["M"], p.shape["N"]), dist, gen, torch.float32, "cpu", self.large_scale(p))
        fmt, sc = p.attrs["format"], p.attrs["scaling"]
        q, s = (quantize_tensor(x, fmt) if sc == "tensor" else quantize_rows(x, fmt) if sc == "row"
                else quantize_blocks(x, fmt, 1, BLOCK))
        return {"q": q.to(device), "scale": s.contiguous().to(device)}

    def exact_inputs(self, p: Problem, gen: torch.Generator, device: str | torch.device = "cpu") -> None:
        return None

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["M"], p.shape["N"]), p.dtype),)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        """q * scale in the scale's dtype (fp32; fp64 for the oracle)."""
        q, s = inputs["q"], inputs["scale"]
        M, N = q.shape
        if attrs["scaling"] == "block":
            s = expand_scale(s, M, N, 1, BLOCK)
        return q.to(s.dtype) * s

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return self.reference(inputs64, attrs).abs()

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        return ErrorContract(dt, UNIT_ROUNDOFF[dt], UNIT_ROUNDOFF["float32"], 1, ref_factor=None)

    def flops(self, p: Problem) -> float:
        return float(p.shape["M"] * p.shape["N"])

    def min_bytes(self, p: Problem) -> float:
        M, N = p.shape["M"], p.shape["N"]
        n_s = 1 if p.attrs["scaling"] == "tensor" else M * (1 if p.attrs["scaling"] == "row" else -(-N // BLOCK))
        return float(M * N * (1 + p.dtype.itemsize) + 4 * n_s)


QUANTIZE = QuantizeSpec()
QUANTIZE_STATIC = QuantizeStaticSpec()
DEQUANTIZE = DequantizeSpec()
STOCHASTIC_ROUND = StochasticRoundSpec()
