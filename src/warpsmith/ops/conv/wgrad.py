"""The convolution's weight gradient as a pipeline op (``conv_weight_grad``): spec, the searched variant.

``dw[g, k, c, t] = sum over n and output pixels o of dy[n, g KG + k, o] x[n, g CG + c, o s - p + t d]``:
an implicit GEMM whose reduction runs over N x output pixels (long: 100k terms for a ResNet layer at
batch 32) into a small weight (few tiles), so split-K is what fills a GPU. The problem is the forward
conv's geometry (``ConvSpec``: the same axes and attributes, direct only); inputs ``x`` and ``dy``; the
output is the weight's shape. The weight gradient of a transposed conv is the weight gradient of the
direct conv from its output to its input (x and dy swap roles), so this one op serves both.

Variant ``implicit_gemm`` (``conv_wgrad_kernel``): tiles BLOCK_M over KG, BLOCK_N over CG x window,
BLOCK_K over pixels, SPLIT_K slices of the pixel loop summed in a fixed order by the matmul family's
reduction (deterministic), warps, precision. The default is :func:`~.variant.wgrad_config` (the launch
the custom op had before records existed).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import INTERPRET, triton
from ...core.config import Knobs
from ...core.error_contract import ErrorContract
from ...core.errors import InvalidInputError
from ...core.dtypes import UNIT_ROUNDOFF
from ...core.opspec import Problem
from ...core.variant import Config, Variant
from ...space import Enum, Pow2, Space, fixed
from ...targets import Target
from ..matmul.variant import tile_resources
from ..shared import kernel as common
from . import kernel as K
from .spec import SPATIAL, ConvSpec, _geometry_attrs, geometry
from .variant import _pow2_cap, gather_gemm_registers, launch_wgrad, wgrad_config


class ConvWeightGradSpec(ConvSpec):
    name = "conv_weight_grad"
    attr_choices = {"transposed": (False,), "channels_last": (False, True), "allow_tf32": (False, True),
                    **_geometry_attrs()}

    def problem(self, shape: Mapping[str, int] | str, dtype: str | torch.dtype,
                attrs: Mapping[str, Any] | None = None) -> Problem:
        """As the forward conv's; the window sizes are recorded among the attributes (``win_d``,
        ``win_h``, ``win_w``: the reference builds the weight's shape from them, as ``groups``)."""
        p = super().problem(shape, dtype, {k: v for k, v in (attrs or {}).items() if not k.startswith("win_")})
        win = {f"win_{a}": k for a, k in zip(SPATIAL, geometry(p)["KS"])}
        return dataclasses.replace(p, attrs={**p.attrs, **win})

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return ((self.shapes(p)["w"], p.dtype),)

    def _assemble(self, p: Problem, make) -> dict[str, torch.Tensor]:
        sh = self.shapes(p)
        return {"x": self._lay_out(make(sh["x"]), p), "dy": self._lay_out(make(sh["y"]), p)}

    def identity_problem(self, p: Problem) -> Problem:
        return p

    def reduction_len(self, p: Problem) -> int:
        """Terms per weight element: N x output pixels."""
        o = geometry(p)["O"]
        return p.shape["N"] * o[0] * o[1] * o[2]

    def _weight_grad(self, x: torch.Tensor, dy: torch.Tensor, attrs: Mapping[str, Any]) -> torch.Tensor:
        nd = x.dim() - 2
        window = tuple(attrs[f"win_{a}"] for a in SPATIAL[3 - nd:])
        w0 = torch.zeros((dy.shape[1], x.shape[1] // int(attrs["groups"])) + window, dtype=x.dtype,
                         device=x.device, requires_grad=True)
        with torch.enable_grad():
            y = self._conv({}, attrs, w0, x, None)
            (dw,) = torch.autograd.grad(y, w0, dy)
        return dw

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return self._weight_grad(inputs["x"], inputs["dy"], attrs)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return self._weight_grad(inputs64["x"].abs(), inputs64["dy"].abs(), attrs)

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        tf32 = dt == "float32" and p.attrs["allow_tf32"]
        return ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=UNIT_ROUNDOFF["float32"],
                             reduction_len=self.reduction_len(p), u_operand=UNIT_ROUNDOFF["tf32"] if tf32 else 0.0,
                             lipschitz=1.0, ref_factor=None if tf32 else 4.0)

    def flops(self, p: Problem) -> float:
        return 2.0 * self.reduction_len(p) * math.prod(self.shapes(p)["w"])

    def min_bytes(self, p: Problem) -> float:
        sh = self.shapes(p)
        return float(p.dtype.itemsize * sum(math.prod(sh[k]) for k in ("x", "y", "w")))


CONV_WEIGHT_GRAD = ConvWeightGradSpec()


@dataclass(frozen=True, kw_only=True)
class WgradKnobs(Knobs):
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    SPLIT_K: int
    num_warps: int
    num_stages: int
    PRECISION: str = "ieee"


class WeightGradImplicitGemm(Variant):
    op = "conv_weight_grad"
    name = "implicit_gemm"
    cost_model = "conv"
    knobs = WgradKnobs
    kernel_modules = (K, common)

    @staticmethod
    def gemm_shape(p: Problem) -> tuple[int, int, int, int]:
        """(M, N, K, groups): KG output channels, CG x window columns, N x output pixels reduced."""
        KG, CG, *win = CONV_WEIGHT_GRAD.shapes(p)["w"]
        return KG, CG * math.prod(win), CONV_WEIGHT_GRAD.reduction_len(p), p.shape.get("G", 1)

    def gemm_problem(self, p: Problem) -> Problem:
        """The equivalent GEMM for the cost model, batched over groups; its B operand is gathered."""
        from ..matmul.spec import MATMUL

        M, N, Kr, G = self.gemm_shape(p)
        attrs = {"allow_tf32": bool(p.attrs["allow_tf32"])}
        return MATMUL.problem({"M": M, "N": N, "K": Kr, "B": G} if G > 1 else {"M": M, "N": N, "K": Kr}, p.dtype, attrs)

    def space(self, p: Problem, target: Target) -> Space:
        M, N, Kr, G = self.gemm_shape(p)
        d = wgrad_config(Kr, M, N, G, target, INTERPRET)
        cap = {"BLOCK_M": _pow2_cap(M, 16, 128), "BLOCK_N": _pow2_cap(N, 16, 128), "BLOCK_K": _pow2_cap(Kr, 16, 128)}
        return Space({
            **{k: Pow2(16, hi, min(d[k], hi)) for k, hi in cap.items()},
            "SPLIT_K": Enum((1, 2, 4, 8, 16), d["SPLIT_K"]),
            "num_warps": Enum((2, 4, 8), 4),
            "num_stages": fixed(1),  # gathered loads: not pipelined (as the forward's)
            "PRECISION": Enum(("ieee", "tf32"), "ieee") if p.dtype == torch.float32 and p.attrs["allow_tf32"]
            else fixed("ieee"),
        })

    def smem_bytes(self, p: Problem, c: Mapping[str, Any]) -> int:
        return c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * p.dtype.itemsize

    def regs_per_thread(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        """Accumulator, operand fragments, and the gathered tile's addresses, coordinates and masks
        (about 8 registers per element of b, 3 per element of a), plus the index math."""
        return gather_gemm_registers(p.dtype, c, target, 3, 8)

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        why = tile_resources(self, p, c, target)
        if why:
            return why
        iters = triton.cdiv(self.gemm_shape(p)[2], c["BLOCK_K"])
        if c["SPLIT_K"] > iters:
            return f"SPLIT_K={c['SPLIT_K']} exceeds the {iters} pixel blocks of BLOCK_K={c['BLOCK_K']}"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        cfg = self.space(p, target).default()
        for _ in range(16):  # shrink what the first reason names: warps for a small tile, else BLOCK_K, then tiles
            why = self.invalid(p, cfg, target) or ""
            if why.startswith("tile") and cfg["num_warps"] > 2:
                cfg["num_warps"] //= 2
            elif "registers" in why and cfg["BLOCK_K"] > 16:
                cfg["BLOCK_K"] //= 2
            elif "registers" in why and max(cfg["BLOCK_M"], cfg["BLOCK_N"]) > 16:
                cfg["BLOCK_M" if cfg["BLOCK_M"] >= cfg["BLOCK_N"] else "BLOCK_N"] //= 2
            else:
                break
        return cfg

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"K": config["BLOCK_M"]}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import wgrad_for_config

        return wgrad_for_config(config, problem)

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
               out: Any = None) -> torch.Tensor:
        p = problem
        x, dy = inputs["x"], inputs["dy"]
        shape = CONV_WEIGHT_GRAD.shapes(p)["w"]
        dw = out if out is not None else torch.empty(shape, dtype=p.dtype, device=x.device)
        g = geometry(p)
        return launch_wgrad(dy, x, dw, groups=p.shape.get("G", 1), transposed=False, stride=g["S"], pad=g["P"],
                            dil=g["DL"], config=dict(config))


def weight_grad_problem(x: torch.Tensor, dy: torch.Tensor, weight_shape: list[int], stride, pad, dilation,
                        groups: int) -> Problem | None:
    """The ``conv_weight_grad`` problem of a direct conv from ``x`` to ``dy`` with this geometry, or None
    where the spec's geometry does not give dy's spatial sizes (the trailing padding is inferred)."""
    nd = x.dim() - 2
    axes = SPATIAL[3 - nd:]
    shape = {"N": x.shape[0], "C": x.shape[1], "K": dy.shape[1], "G": groups}
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
    attrs: dict[str, Any] = {"channels_last": bool(fmt and not x.is_contiguous() and x.is_contiguous(memory_format=fmt))}
    for i, a in enumerate(axes):
        A = a.upper()
        I, O, k = x.shape[2 + i], dy.shape[2 + i], weight_shape[2 + i]
        shape[A], shape["K" + A] = I, k
        need = (O - 1) * stride[i] + dilation[i] * (k - 1) + 1 - I - pad[i]
        attrs.update({f"stride_{a}": stride[i], f"pad_{a}": pad[i], f"pad_end_{a}": max(0, need),
                      f"dil_{a}": dilation[i]})
    try:
        p = CONV_WEIGHT_GRAD.problem(shape, x.dtype, attrs)
    except InvalidInputError:  # outside the spec's ranges: the caller launches directly
        return None
    sh = CONV_WEIGHT_GRAD.shapes(p)
    return p if tuple(sh["y"]) == tuple(dy.shape) and list(sh["w"]) == list(weight_shape) else None


VARIANTS: tuple[Variant, ...] = (WeightGradImplicitGemm(),)
