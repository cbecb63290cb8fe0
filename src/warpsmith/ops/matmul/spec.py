"""The GEMM op: ``C = act(A @ B + bias)``, optionally batched."""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ...core.error_contract import ErrorContract
from ...core.dtypes import EXACT_INT, UNIT_ROUNDOFF
from ...core.opspec import Axis, OpSpec, Problem, draw, on_device

ACTIVATIONS = ("none", "relu", "gelu", "silu")
LAYOUTS = ("nn", "tn", "nt", "tt")  # t: that operand is stored transposed (its .T is contiguous)
# Lipschitz constants of the epilogues (sup |act'|): gelu(erf) 1.129, silu 1.0998
_LIPSCHITZ = {"none": 1.0, "relu": 1.0, "gelu": 1.13, "silu": 1.1}


def activation(x: torch.Tensor, name: str) -> torch.Tensor:
    if name == "none":
        return x
    if name == "relu":
        return torch.relu(x)
    if name == "gelu":
        return torch.nn.functional.gelu(x)
    if name == "silu":
        return torch.nn.functional.silu(x)
    raise ValueError(name)


class MatmulSpec(OpSpec):
    name = "matmul"
    axes = (
        Axis("M", "rows of A and C"),
        Axis("N", "columns of B and C"),
        Axis("K", "reduction length", reduction=True),
        Axis("B", "batch size (A, B and C batched)", optional=True, max_size=65535),
    )
    dtypes = (torch.float16, torch.bfloat16, torch.float32)
    attr_choices = {
        "bias": (False, True),
        "activation": ACTIVATIONS,
        "layout": LAYOUTS,
        "allow_tf32": (False, True),
    }

    def _dims(self, p: Problem) -> tuple[tuple[int, ...], tuple[int, ...]]:
        M, N, K = p.shape["M"], p.shape["N"], p.shape["K"]
        lead = (p.shape["B"],) if "B" in p.shape else ()
        return lead + (M, K), lead + (K, N)

    def _lay_out(self, x: torch.Tensor, transposed: bool) -> torch.Tensor:
        """Store ``x`` transposed in memory (a view with swapped strides, no copy seen by the kernel)."""
        return x.transpose(-1, -2).contiguous().transpose(-1, -2) if transposed else x

    def _assemble(self, p: Problem, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> dict:
        lay = p.attrs["layout"]
        out = {"a": self._lay_out(a, lay[0] == "t"), "b": self._lay_out(b, lay[1] == "t")}
        if p.attrs["bias"]:
            out["bias"] = bias
        return out

    def large_scale(self, p: Problem) -> float:
        # |C| ~ sqrt(K) s^2 for normal entries of scale s: aim at an eighth of the dtype's maximum
        return (float(torch.finfo(p.dtype).max) / (8 * p.shape["K"] ** 0.5)) ** 0.5

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        sa, sb = self._dims(p)
        scale = self.large_scale(p) if dist == "large" else 1.0

        def x(shape: tuple[int, ...]) -> torch.Tensor:
            return draw(shape, dist, gen, p.dtype, device, scale)

        bias = x((p.shape["N"],)) if p.attrs["bias"] else None
        return self._assemble(p, x(sa), x(sb), bias)

    def exact_inputs(self, p: Problem, gen: torch.Generator,
                     device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        # |entries| <= r with K r^2 + r well inside fp32's exact integers, so every partial sum
        # in an fp32 accumulator is exact; the one final rounding to the output dtype is then
        # the same for any correct kernel, whatever its summation order.
        sa, sb = self._dims(p)
        r = 2 if p.shape["K"] * 4 + 2 < EXACT_INT["float32"] // 2 else 1

        g = on_device(gen, device)

        def ints(shape: tuple[int, ...]) -> torch.Tensor:
            return torch.randint(-r, r + 1, shape, generator=g, device=device).to(p.dtype)

        return self._assemble(p, ints(sa), ints(sb), ints((p.shape["N"],)) if p.attrs["bias"] else None)

    def identity_problem(self, p: Problem) -> Problem:
        # gelu and silu are not exact on integers; the identity test covers the linear part and
        # relu, the error contract covers the transcendental epilogues.
        if p.attrs["activation"] in ("gelu", "silu"):
            return self.problem(dict(p.shape), p.dtype, {**p.attrs, "activation": "none"})
        return p

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        lead = (p.shape["B"],) if "B" in p.shape else ()
        return ((lead + (p.shape["M"], p.shape["N"]), p.dtype),)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        c = torch.matmul(inputs["a"], inputs["b"])
        if attrs.get("bias"):
            c = c + inputs["bias"]
        return activation(c, attrs.get("activation", "none"))

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        s = torch.matmul(inputs64["a"].abs(), inputs64["b"].abs())
        if attrs.get("bias"):
            s = s + inputs64["bias"].abs()
        return s

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        tf32 = dt == "float32" and p.attrs["allow_tf32"]
        return ErrorContract(
            out_dtype=dt,
            u_out=UNIT_ROUNDOFF[dt],
            u_acc=UNIT_ROUNDOFF["float32"],  # every variant accumulates in fp32
            reduction_len=p.shape["K"] + (1 if p.attrs["bias"] else 0),
            u_operand=UNIT_ROUNDOFF["tf32"] if tf32 else 0.0,
            lipschitz=_LIPSCHITZ[p.attrs["activation"]],
            ref_factor=None if tf32 else 4.0,
        )

    def flops(self, p: Problem) -> float:
        return 2.0 * p.shape.get("B", 1) * p.shape["M"] * p.shape["N"] * p.shape["K"]

    def min_bytes(self, p: Problem) -> float:
        bsz, M, N, K = p.shape.get("B", 1), p.shape["M"], p.shape["N"], p.shape["K"]
        e = p.dtype.itemsize
        return float(e * bsz * (M * K + K * N + M * N) + (e * N if p.attrs["bias"] else 0))


MATMUL = MatmulSpec()
