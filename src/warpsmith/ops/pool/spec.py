"""The pooling ops: ``max_pool``, ``avg_pool``, ``adaptive_avg_pool`` (1-D, 2-D, 3-D) and their backwards.

Every problem is an (N, C, D, H, W) input (``dims`` = 1: D = H = 1; 2: D = 1) and the options of
``torch.nn.functional``: per spatial dimension ``kernel_*``, ``stride_*`` (0: the kernel size, as
torch's ``stride=None``), ``padding_*`` and, for max, ``dilation_*``; ``ceil_mode``; for avg
``count_include_pad`` and ``divisor_override`` (0: none). Output sizes follow torch exactly::

    O = floor_or_ceil((L + 2p - d (k - 1) - 1) / s) + 1,   and with ceil_mode, O -= 1 when
    (O - 1) s >= L + p  (the last window must start inside the input or the left padding).

``adaptive_avg_pool`` has output sizes ``out_*``; window o of a length-L dimension is
``[floor(o L / O), ceil((o + 1) L / O))``. ``channels_last`` draws the input (and the gradient) in
channels-last memory format; the kernels read any strides in place and write outputs in the
input's format, as torch does.

Outputs: ``y`` in x's dtype, then (``max_pool`` with ``return_indices``) the int64 indices, flat over
the spatial dimensions of the unpadded input (``(id H + ih) W + iw``), as torch returns them. The
backward ops take ``dy``, ``x`` (read by the reference only: torch's backward takes it; the
kernels need its shape) and, for max, the forward's ``indices``, and return ``dx``.

Error contracts: max (and its indices) is exact; its backward sums the gradients of the windows
that chose one input (at most the kernel volume of them, in fp32); avg sums kernel-volume terms in
fp32 and divides once: ``S = sum |x| / divisor``, reduction length volume + 2.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch
import torch.nn.functional as F

from ...core.error_contract import ErrorContract
from ...core.dtypes import UNIT_ROUNDOFF
from ...core.errors import InvalidInputError
from ...core.opspec import Axis, OpSpec, Problem, Scalar, draw

U32 = UNIT_ROUNDOFF["float32"]
DIMS = ("d", "h", "w")
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_AXES = (Axis("N", "batch"), Axis("C", "channels"), Axis("D", "depth (1 unless dims=3)"),
         Axis("H", "height (1 unless dims >= 2)"), Axis("W", "width", reduction=True))
EXACT = ErrorContract("float64", 0.0, 0.0, 0, ref_factor=None)  # a copied input element, an index


def _int(default: int, lo: int, hi: int) -> Scalar:
    return Scalar(default, lo, hi, integer=True)


def out_size(L: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling output length (may be < 1 for a window larger than the padded input)."""
    span = L + 2 * p - d * (k - 1) - 1
    o = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= L + p:
        o -= 1
    return o


def window(p: Problem) -> dict[str, tuple[int, ...]]:
    """Per-dimension (d, h, w) kernel, stride, padding and dilation of a max/avg pool problem;
    the dimensions a ``dims`` < 3 problem lacks are (1, 1, 0, 1)."""
    a, used = p.attrs, DIMS[3 - p.attrs["dims"]:]
    k = tuple(a[f"kernel_{x}"] if x in used else 1 for x in DIMS)
    s = tuple((a[f"stride_{x}"] or a[f"kernel_{x}"]) if x in used else 1 for x in DIMS)
    pad = tuple(a[f"padding_{x}"] if x in used else 0 for x in DIMS)
    dil = tuple(a.get(f"dilation_{x}", 1) if x in used else 1 for x in DIMS)
    return {"kernel": k, "stride": s, "padding": pad, "dilation": dil}


def spatial(p: Problem) -> tuple[int, int, int]:
    return p.shape["D"], p.shape["H"], p.shape["W"]


def output_spatial(p: Problem) -> tuple[int, int, int]:
    """(OD, OH, OW) of the forward."""
    if p.op.startswith("adaptive"):
        used = DIMS[3 - p.attrs["dims"]:]
        return tuple(p.attrs[f"out_{x}"] if x in used else 1 for x in DIMS)  # type: ignore[return-value]
    w = window(p)
    return tuple(out_size(L, k, s, pd, d, p.attrs["ceil_mode"])  # type: ignore[return-value]
                 for L, k, s, pd, d in zip(spatial(p), w["kernel"], w["stride"], w["padding"], w["dilation"]))


def problem_error(p: Problem) -> str | None:
    """Why a problem is not a valid pooling (as torch would refuse it), or None."""
    dims = p.attrs["dims"]
    if dims < 3 and p.shape["D"] != 1 or dims < 2 and p.shape["H"] != 1:
        return f"dims={dims} needs D = 1{' and H = 1' if dims == 1 else ''}"
    if p.op.startswith("adaptive"):
        return None
    w = window(p)
    for x, k, pd, d in zip(DIMS, w["kernel"], w["padding"], w["dilation"]):
        if pd > (d * (k - 1) + 1) // 2 if p.op.startswith("max") else pd > k // 2:
            return f"padding_{x}={pd} exceeds half the (effective) kernel"
    if min(output_spatial(p)) < 1:
        return f"output size {output_spatial(p)} is empty: the window is larger than the padded input"
    return None


def _shape(p: Problem, spatial_sizes: tuple[int, int, int]) -> tuple[int, ...]:
    return (p.shape["N"], p.shape["C"]) + tuple(spatial_sizes)[3 - p.attrs["dims"]:]


def _fn(kind: str, dims: int):
    return getattr(F, f"{kind}{dims}d")


def _kwargs(p_attrs: Mapping[str, Any], kind: str) -> dict[str, Any]:
    dims = p_attrs["dims"]
    used = DIMS[3 - dims:]
    if kind == "adaptive_avg_pool":
        return {"output_size": tuple(p_attrs[f"out_{x}"] for x in used)}
    kw: dict[str, Any] = {"kernel_size": tuple(p_attrs[f"kernel_{x}"] for x in used),
                          "stride": tuple(p_attrs[f"stride_{x}"] or p_attrs[f"kernel_{x}"] for x in used),
                          "padding": tuple(p_attrs[f"padding_{x}"] for x in used), "ceil_mode": p_attrs["ceil_mode"]}
    if kind == "max_pool":
        kw["dilation"] = tuple(p_attrs[f"dilation_{x}"] for x in used)
    else:
        kw["count_include_pad"] = p_attrs["count_include_pad"]
        if p_attrs["divisor_override"]:
            if dims == 1:
                raise InvalidInputError("divisor_override", "0 for a 1-D avg_pool (torch's avg_pool1d has none)",
                                        p_attrs["divisor_override"])
            kw["divisor_override"] = p_attrs["divisor_override"]
    return kw


def torch_pool(kind: str, x: torch.Tensor, attrs: Mapping[str, Any], return_indices: bool = False):
    """torch.nn.functional's pooling of ``x`` with the problem's attributes (the reference)."""
    kw = _kwargs(attrs, kind)
    if kind == "max_pool":
        kw["return_indices"] = return_indices
    try:
        return _fn(kind, attrs["dims"])(x, **kw)
    except NotImplementedError:  # e.g. avg_pool3d has no CPU half kernel: fp32, rounded once (as on a GPU)
        out = _fn(kind, attrs["dims"])(x.float(), **kw)
        return tuple(o.to(x.dtype) if o.is_floating_point() else o for o in out) if isinstance(out, tuple) \
            else out.to(x.dtype)


def _as_format(t: torch.Tensor, channels_last: bool) -> torch.Tensor:
    if not channels_last or t.dim() < 4:
        return t if not channels_last else t.transpose(1, 2).contiguous().transpose(1, 2)  # 1-D: C innermost
    fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    return t.contiguous(memory_format=fmt)


class _PoolBase(OpSpec):
    axes = _AXES
    dtypes = _DTYPES
    kind = "max_pool"
    backward = False

    def __init__(self, kind: str, backward: bool = False) -> None:
        self.kind, self.backward = kind, backward
        self.name = kind + ("_backward" if backward else "")
        ch: dict[str, Any] = {"dims": (2, 1, 3), "channels_last": (False, True)}
        if kind == "adaptive_avg_pool":
            ch.update({f"out_{x}": _int(1, 1, 2**20) for x in DIMS})
        else:
            ch.update({f"kernel_{x}": _int(2, 1, 255) for x in DIMS})
            ch.update({f"stride_{x}": _int(0, 0, 255) for x in DIMS})
            ch.update({f"padding_{x}": _int(0, 0, 127) for x in DIMS})
            ch["ceil_mode"] = (False, True)
            if kind == "max_pool":
                ch.update({f"dilation_{x}": _int(1, 1, 255) for x in DIMS})
                if not backward:
                    ch["return_indices"] = (False, True)
            else:
                ch["count_include_pad"] = (True, False)
                ch["divisor_override"] = _int(0, 0, 2**16)
        self.attr_choices = ch

    def in_shape(self, p: Problem) -> tuple[int, ...]:
        return _shape(p, spatial(p))

    def out_shape(self, p: Problem) -> tuple[int, ...]:
        return _shape(p, output_spatial(p))

    def volume(self, p: Problem) -> int:
        if self.kind == "adaptive_avg_pool":
            return math.prod(-(-L // O) + 1 for L, O in zip(spatial(p), output_spatial(p)))
        return math.prod(window(p)["kernel"])

    def large_scale(self, p: Problem) -> float:
        return float(torch.finfo(p.dtype).max) / (4 * max(1, self.volume(p)))

    def _x(self, p: Problem, gen, dist, device) -> torch.Tensor:
        scale = self.large_scale(p) if dist == "large" else 1.0
        return _as_format(draw(self.in_shape(p), dist, gen, p.dtype, device, scale), p.attrs["channels_last"])

    def flops(self, p: Problem) -> float:
        return float(math.prod(self.out_shape(p)) * self.volume(p))

    def min_bytes(self, p: Problem) -> float:
        e = p.dtype.itemsize
        outs = math.prod(self.out_shape(p)) * (e + (8 if self.kind == "max_pool" and (self.backward or p.attrs.get(
            "return_indices")) else 0))
        return float(math.prod(self.in_shape(p)) * e + outs)


class PoolSpec(_PoolBase):
    """Forward max / avg / adaptive avg pooling (module docstring)."""

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        return {"x": self._x(p, gen, dist, device)}

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        outs = [(self.out_shape(p), p.dtype)]
        if p.attrs.get("return_indices"):
            outs.append((self.out_shape(p), torch.int64))
        return tuple(outs)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        out = torch_pool(self.kind, inputs["x"], attrs, bool(attrs.get("return_indices")))
        return tuple(out) if isinstance(out, tuple) else (out,)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        x = inputs64["x"]
        if self.kind == "max_pool":
            outs = [torch.zeros_like(torch_pool(self.kind, x, attrs))]
            return tuple(outs * (2 if attrs.get("return_indices") else 1))
        return (torch_pool(self.kind, x.abs(), attrs),)

    def contract(self, p: Problem) -> tuple[ErrorContract, ...]:
        """Max: exact (a copy of one input element, and its index). Avg: a length-``volume`` fp32
        sum, one division (2 ulp on the GPU), one rounding to the output dtype."""
        if self.kind == "max_pool":
            return (EXACT,) * (2 if p.attrs.get("return_indices") else 1)
        dt = p.dtype_name
        return (ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, self.volume(p) + 2),)


class PoolBackwardSpec(_PoolBase):
    """Backward of a pooling: the reference is torch's (for max, its backward through the given
    indices, ``aten.max_pool{2,3}d_with_indices_backward``; for avg, autograd through the forward).
    The kernels gather: each input element sums, in a fixed order, the gradients of the windows
    that contain it (deterministic, no atomics)."""

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        x = self._x(p, gen, dist, device)
        dy = _as_format(draw(self.out_shape(p), dist, gen, p.dtype, device,
                             self.large_scale(p) if dist == "large" else 1.0), p.attrs["channels_last"])
        out = {"dy": dy, "x": x}
        if self.kind == "max_pool":
            out["indices"] = torch_pool("max_pool", x, p.attrs, True)[1]
        return out

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return ((self.in_shape(p), p.dtype),)

    def _grad(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], dy: torch.Tensor,
              shape: tuple[int, ...]) -> torch.Tensor:
        if self.kind == "max_pool":
            x, idx = inputs["x"], inputs["indices"]
            kw = _kwargs(attrs, "max_pool")
            args = [kw["kernel_size"], kw["stride"], kw["padding"], kw["dilation"], kw["ceil_mode"]]
            if attrs["dims"] == 1:  # through the 2-D op, as torch's max_pool1d does
                args = [[1, a[0]] if isinstance(a, tuple) else a for a in args]
                args[2][0] = 0
                g = torch.ops.aten.max_pool2d_with_indices_backward(dy[:, :, None], x[:, :, None], *args,
                                                                    idx[:, :, None])
                return g[:, :, 0]
            op = torch.ops.aten.max_pool2d_with_indices_backward if attrs["dims"] == 2 else \
                torch.ops.aten.max_pool3d_with_indices_backward
            return op(dy, x, *args, idx)
        leaf = torch.zeros(shape, dtype=dy.dtype, device=dy.device, requires_grad=True)
        with torch.enable_grad():
            y = torch_pool(self.kind, leaf, attrs)
            (g,) = torch.autograd.grad(y, leaf, dy)
        return g

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return self._grad(inputs, attrs, inputs["dy"], tuple(inputs["x"].shape))

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return self._grad(inputs64, attrs, inputs64["dy"].abs(), tuple(inputs64["x"].shape))

    def contract(self, p: Problem) -> ErrorContract:
        """A sum of at most ``volume`` routed gradients in fp32 (avg: each divided once first)."""
        dt = p.dtype_name
        return ErrorContract(dt, UNIT_ROUNDOFF[dt], U32, self.volume(p) + 2)


MAX_POOL, AVG_POOL, ADAPTIVE_AVG_POOL = (PoolSpec(k) for k in ("max_pool", "avg_pool", "adaptive_avg_pool"))
MAX_POOL_BACKWARD, AVG_POOL_BACKWARD, ADAPTIVE_AVG_POOL_BACKWARD = (
    PoolBackwardSpec(k, True) for k in ("max_pool", "avg_pool", "adaptive_avg_pool"))
POOL_SPECS = (MAX_POOL, MAX_POOL_BACKWARD, AVG_POOL, AVG_POOL_BACKWARD, ADAPTIVE_AVG_POOL, ADAPTIVE_AVG_POOL_BACKWARD)


def get_spec(op: str) -> _PoolBase:
    return {s.name: s for s in POOL_SPECS}[op]
