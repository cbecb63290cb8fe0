"""The scaled GEMM op: ``C = act((A * sa) @ (B * sb) + bias)`` on fp8 or int8 operands.

The scale convention is part of the op's type (the ``scaling`` attribute), validated against the
shapes given; the public op reads it off the shapes where the caller does not name it (shapes that fit
two scalings describe the same product: op.infer_scaling). Multiply to dequantize
(``real = q * scale``), scales fp32:

========= ======================== ==============================
scaling   scale_a                  scale_b
========= ======================== ==============================
tensor    (1,)                     (1,)
row       (M, 1): per row/token    (1, N): per column/channel
block     (M, ceil(K/128)): 1x128  (ceil(K/128), ceil(N/128)): 128x128
========= ======================== ==============================

``block`` is DeepSeek-V3's scheme with B = W^T for a weight W of shape (N, K): our ``scale_b`` is the
transpose of a (ceil(N/128), ceil(K/128)) weight-scale grid. ``A[m, k]`` is scaled by
``scale_a[m, k // 128]`` and ``B[k, n]`` by ``scale_b[k // 128, n // 128]``. ``int8`` takes ``tensor``
and ``row`` (W8A8, exact int32 accumulation); ``e4m3`` and ``e5m2`` take all three.

``format`` is A's format; ``format_b`` is B's: ``"same"`` (the default), or the other fp8 format for
mixed operands, e4m3 x e5m2 or e5m2 x e4m3 (fp8 training's *hybrid* recipe: e4m3 activations and
weights, e5m2 gradients; an fp8 x fp8 product of either pair is exact in fp32, and Hopper's wgmma
takes the two types independently). int8 pairs only with int8. A ``format_b`` equal to ``format``
is the same problem as ``"same"`` and is stored as ``"same"`` (one name per problem).

The reference dequantizes both operands (fp32, or fp64 for the oracle) and multiplies; the error
contract is against the fp64 product of the *dequantized* operands, so quantization error (measured
by :func:`~warpsmith.ops.lowprec.quant.reference.snr_db` and
:func:`~warpsmith.ops.lowprec.quant.reference.calc_diff` against the unquantized product) is told apart
from the kernel's error.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ....core.error_contract import ErrorContract
from ....core.dtypes import UNIT_ROUNDOFF
from ....core.errors import InvalidInputError
from ....core.opspec import Axis, OpSpec, Problem, draw, on_device
from ...matmul.spec import _LIPSCHITZ, ACTIVATIONS, LAYOUTS, activation
from ..quant.reference import BLOCK, DTYPE_OF, FORMATS, expand_scale, quantize_blocks, quantize_rows, quantize_tensor

SCALINGS = ("tensor", "row", "block")
# Hopper's fp8 tensor cores accumulate a wgmma's products in about 22 significant bits before they
# reach the fp32 accumulator (DeepGEMM's finding): the contract's accumulation unit for fp8 formats.
U_ACC_FP8_TENSOR_CORE = 2.0**-22


def scale_shapes(scaling: str, M: int, N: int, K: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes ``scaling`` requires of (scale_a, scale_b)."""
    if scaling == "tensor":
        return (1,), (1,)
    if scaling == "row":
        return (M, 1), (1, N)
    kb = -(-K // BLOCK)
    return (M, kb), (kb, -(-N // BLOCK))


FORMATS_B = ("same", *FORMATS)  # B's format: "same" as A's (or A's named), or the other fp8 format (mixed)


def operand_formats(attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The formats of (A, B) a problem's attributes name."""
    fmt = attrs["format"]
    fmt_b = attrs.get("format_b", "same")
    return fmt, fmt if fmt_b == "same" else fmt_b


def check_combination(fmt: str, scaling: str, fmt_b: str = "same") -> None:
    if fmt == "int8" and scaling == "block":
        raise InvalidInputError("scaling for int8 operands", "tensor or row (W8A8)", scaling)
    if fmt_b not in ("same", fmt) and "int8" in (fmt, fmt_b):
        raise InvalidInputError("formats of a and b", "int8 with int8, or fp8 (e4m3/e5m2) with fp8",
                                f"{fmt} and {fmt_b}")


def dequantize(q: torch.Tensor, scale: torch.Tensor, rows_block: int, cols_block: int,
               dtype: torch.dtype) -> torch.Tensor:
    """``q * scale`` in ``dtype``: a (1,) scale for the whole tensor, else a 2-D grid whose entry (i, j)
    scales the block of rows_block x cols_block elements at (i, j) (a grid of one row or column
    broadcasts, as a per-column or per-row scale does)."""
    r, c = q.shape
    s = scale.to(dtype)
    if s.dim() == 2 and not (s.shape[0] in (1, r) and s.shape[1] in (1, c)):
        s = expand_scale(s, r, c, rows_block, cols_block)
    return q.to(dtype) * s


def plant_specials(q: torch.Tensor, fmt: str, gen: torch.Generator) -> torch.Tensor:
    """``q`` (quantized, format ``fmt``) with the format's special values at random places: a NaN, and for
    e5m2 also +inf and -inf (as many as fit); int8 has none and is returned as is."""
    if fmt == "int8":
        return q
    vals = [float("nan")] + ([float("inf"), float("-inf")] if fmt == "e5m2" else [])
    flat = q.float().reshape(-1)
    where = torch.randperm(flat.numel(), generator=on_device(gen, "cpu"))[:len(vals)]
    flat[where] = torch.tensor(vals)[:where.numel()]
    return flat.reshape(q.shape).to(q.dtype)


class ScaledMatmulSpec(OpSpec):
    name = "scaled_matmul"
    axes = (
        Axis("M", "rows of A and C (tokens)"),
        Axis("N", "columns of B and C (output channels)"),
        Axis("K", "reduction length", reduction=True),
    )
    dtypes = (torch.bfloat16, torch.float16, torch.float32)  # the output dtype
    attr_choices = {
        "format": FORMATS,
        "format_b": FORMATS_B,
        "scaling": SCALINGS,
        "bias": (False, True),
        "activation": ACTIVATIONS,
        "layout": ("nt",) + tuple(x for x in LAYOUTS if x != "nt"),  # nt: B K-major (a weight W, B = W^T)
    }

    def problem(self, shape, dtype, attrs=None) -> Problem:
        p = super().problem(shape, dtype, attrs)
        check_combination(p.attrs["format"], p.attrs["scaling"], p.attrs["format_b"])
        if p.attrs["format_b"] == p.attrs["format"]:
            return super().problem(shape, dtype, {**p.attrs, "format_b": "same"})
        return p

    # ---- inputs ----------------------------------------------------------------------------
    def _quantize(self, p: Problem, a: torch.Tensor, b: torch.Tensor):
        (fa, fb), scaling = operand_formats(p.attrs), p.attrs["scaling"]
        if scaling == "tensor":
            (qa, sa), (qb, sb) = quantize_tensor(a, fa), quantize_tensor(b, fb)
        elif scaling == "row":
            (qa, sa), (qbt, sbt) = quantize_rows(a, fa), quantize_rows(b.t(), fb)
            qb, sb = qbt.t(), sbt.t().contiguous()
        else:
            (qa, sa), (qb, sb) = quantize_blocks(a, fa, 1, BLOCK), quantize_blocks(b, fb, BLOCK, BLOCK)
        return qa.contiguous(), qb.contiguous(), sa.contiguous(), sb.contiguous()

    def _assemble(self, p: Problem, qa, qb, sa, sb, bias) -> dict:
        lay = p.attrs["layout"]

        def lay_out(x: torch.Tensor, t: bool) -> torch.Tensor:
            return x.t().contiguous().t() if t else x

        out = {"a": lay_out(qa, lay[0] == "t"), "b": lay_out(qb, lay[1] == "t"), "scale_a": sa, "scale_b": sb}
        if p.attrs["bias"]:
            out["bias"] = bias
        return out

    def large_scale(self, p: Problem) -> float:
        return (float(torch.finfo(p.dtype).max) / (8 * p.shape["K"] ** 0.5)) ** 0.5

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Unquantized operands drawn from ``dist``, then quantized with dynamic scales of the problem's
        granularity. ``specials``: normal operands, quantized, then special values of the formats planted in
        the quantized operands (a NaN in a and in b; e5m2 also +inf and -inf), the scales finite (a special
        value before quantization would make its whole scale group NaN: that tests the scales, not the GEMM;
        int8 has no special values); the bias gets ``draw``'s NaN and infinities."""
        M, N, K = p.shape["M"], p.shape["N"], p.shape["K"]
        specials = dist == "specials"
        dist = "normal" if specials else dist
        scale = self.large_scale(p) if dist == "large" else 1.0
        a = draw((M, K), dist, gen, torch.float32, "cpu", scale)
        b = draw((K, N), dist, gen, torch.float32, "cpu", scale)
        bias = draw((N,), "specials" if specials else dist, gen, p.dtype, "cpu", scale) if p.attrs["bias"] else None
        qa, qb, sa, sb = self._quantize(p, a, b)
        if specials:
            fa, fb = operand_formats(p.attrs)
            qa, qb = plant_specials(qa, fa, gen), plant_specials(qb, fb, gen)
        d = torch.device(device)
        return {k: v.to(d) for k, v in self._assemble(p, qa, qb, sa, sb, bias).items()}

    def exact_inputs(self, p: Problem, gen: torch.Generator,
                     device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Operands in [-2, 2] and power-of-two scales: every product, partial sum and scaling is exact
        in fp32 (and the int32 accumulation exact), so a correct kernel matches the oracle bit for bit."""
        M, N, K = p.shape["M"], p.shape["N"], p.shape["K"]
        g = on_device(gen, "cpu")
        fa, fb = operand_formats(p.attrs)
        qa = torch.randint(-2, 3, (M, K), generator=g).to(DTYPE_OF[fa])
        qb = torch.randint(-2, 3, (K, N), generator=g).to(DTYPE_OF[fb])
        sa_shape, sb_shape = scale_shapes(p.attrs["scaling"], M, N, K)
        sa = 2.0 ** torch.randint(-2, 3, sa_shape, generator=g).float()
        sb = 2.0 ** torch.randint(-2, 3, sb_shape, generator=g).float()
        bias = torch.randint(-2, 3, (N,), generator=g).to(p.dtype) if p.attrs["bias"] else None
        d = torch.device(device)
        return {k: v.to(d) for k, v in self._assemble(p, qa, qb, sa, sb, bias).items()}

    def identity_problem(self, p: Problem) -> Problem:
        if p.attrs["activation"] in ("gelu", "silu"):
            return self.problem(dict(p.shape), p.dtype, {**p.attrs, "activation": "none"})
        return p

    # ---- what is computed --------------------------------------------------------------------
    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["M"], p.shape["N"]), p.dtype),)

    @staticmethod
    def dequantized(inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(A * sa, B * sb) in the scales' dtype (fp32; fp64 for the oracle)."""
        a, b, sa, sb = inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"]
        dt = sa.dtype
        return dequantize(a, sa, 1, BLOCK, dt), dequantize(b, sb, BLOCK, BLOCK, dt)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        a, b = self.dequantized(inputs)
        c = a @ b
        if attrs.get("bias"):
            c = c + inputs["bias"].to(c.dtype)
        # in the scales' dtype (fp32, fp64 for the oracle): the working precision of every kernel
        return activation(c, attrs.get("activation", "none"))

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        a, b = self.dequantized(inputs64)
        s = a.abs() @ b.abs()
        if attrs.get("bias"):
            s = s + inputs64["bias"].abs()
        return s

    def contract(self, p: Problem) -> ErrorContract:
        """fp32 accumulation of exact products (fp8 x fp8 products are exact in fp32; int8 accumulates
        exactly in int32), then two scale multiplications (block scaling: per 128-block partial sums
        scaled, then summed: K + 2 terms bounds both). The CPU interpreter accumulates fp8 products
        exactly in fp32; Hopper's fp8 tensor cores accumulate with limited precision (about 22 bits,
        :data:`U_ACC_FP8_TENSOR_CORE`), which the fp8 contract allows, and which the GPU benchmark
        (benchmarks/lowprec.py) checks on the device. The fp8 contracts have no reference-factor
        criterion (the fp32 reference accumulates more precisely than the tensor cores may)."""
        dt = p.dtype_name
        fp8 = p.attrs["format"] != "int8"
        return ErrorContract(
            out_dtype=dt, u_out=UNIT_ROUNDOFF[dt],
            u_acc=U_ACC_FP8_TENSOR_CORE if fp8 else UNIT_ROUNDOFF["float32"],
            reduction_len=p.shape["K"] + 2 + (1 if p.attrs["bias"] else 0),
            lipschitz=_LIPSCHITZ[p.attrs["activation"]], ref_factor=None if fp8 else 4.0)

    def flops(self, p: Problem) -> float:
        return 2.0 * p.shape["M"] * p.shape["N"] * p.shape["K"]

    def min_bytes(self, p: Problem) -> float:
        M, N, K = p.shape["M"], p.shape["N"], p.shape["K"]
        sa, sb = scale_shapes(p.attrs["scaling"], M, N, K)
        n_scales = int(torch.tensor(sa).prod()) + int(torch.tensor(sb).prod())
        e = p.dtype.itemsize
        return float(M * K + K * N + e * M * N + 4 * n_scales + (e * N if p.attrs["bias"] else 0))


SCALED_MATMUL = ScaledMatmulSpec()
