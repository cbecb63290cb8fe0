"""The convolution op: ``y = act(scale conv(x, w) + bias + residual)``, 1-D/2-D/3-D, direct or transposed.

Geometry: axes N (batch), C (input channels), K (output channels), G (groups), spatial input
sizes W (and H, D for 2-D/3-D) and window sizes KW (KH, KD). Per-axis stride, dilation,
leading and trailing padding and (transposed) output padding are integer attributes; "same"
with an even window pads asymmetrically, as torch does (``pad_end`` > ``pad``).
"""
from __future__ import annotations

import dataclasses

from typing import Any, Mapping

import torch
import torch.nn.functional as F

from ...core.error_contract import ErrorContract
from ...core.dtypes import EXACT_INT, UNIT_ROUNDOFF
from ...core.errors import InvalidInputError
from ...core.opspec import Axis, OpSpec, Problem, Scalar, draw, on_device
from ..matmul.spec import ACTIVATIONS, activation

SPATIAL = ("d", "h", "w")
_LIPSCHITZ = {"none": 1.0, "relu": 1.0, "gelu": 1.13, "silu": 1.1}


def _geometry_attrs() -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for a in SPATIAL:
        out[f"stride_{a}"] = Scalar(1, 1, 64, integer=True)
        out[f"pad_{a}"] = Scalar(0, 0, 4096, integer=True)
        out[f"pad_end_{a}"] = Scalar(0, 0, 4096, integer=True)
        out[f"dil_{a}"] = Scalar(1, 1, 64, integer=True)
        out[f"opad_{a}"] = Scalar(0, 0, 63, integer=True)
    return out


def spatial_dims(p: Problem) -> int:
    """1, 2 or 3: how many spatial axes the problem has."""
    return 1 + ("H" in p.shape) + ("D" in p.shape)


def geometry(p: Problem) -> dict[str, tuple[int, int, int]]:
    """Per axis (d, h, w; singleton where the problem has fewer): input and window sizes, stride,
    padding (leading, trailing), dilation, output padding and the output size."""
    s = p.shape
    g: dict[str, list[int]] = {k: [] for k in ("I", "KS", "S", "P", "PE", "DL", "OP", "O")}
    for a in SPATIAL:
        A = a.upper()
        size, k = s.get(A, 1), s.get("K" + A, 1)
        present = A in s
        st = p.attrs[f"stride_{a}"] if present else 1
        pd, pe = (p.attrs[f"pad_{a}"], p.attrs[f"pad_end_{a}"]) if present else (0, 0)
        dl = p.attrs[f"dil_{a}"] if present else 1
        op = p.attrs[f"opad_{a}"] if present else 0
        if p.attrs["transposed"]:
            o = (size - 1) * st - pd - pe + dl * (k - 1) + op + 1
        else:
            o = (size + pd + pe - dl * (k - 1) - 1) // st + 1
        for key, v in zip(("I", "KS", "S", "P", "PE", "DL", "OP", "O"), (size, k, st, pd, pe, dl, op, o)):
            g[key].append(v)
    return {k: tuple(v) for k, v in g.items()}  # type: ignore[misc]


def reference_conv(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, stride, pad, pad_end, dil,
                   opad, groups: int, transposed: bool) -> torch.Tensor:
    """torch.nn.functional.conv{1,2,3}d / conv_transpose{1,2,3}d with (possibly asymmetric) padding."""
    nd = x.dim() - 2
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
        # asymmetric padding of a transposed conv: pad symmetrically by the smaller, then crop
        lo = [min(a, b) for a, b in zip(pad, pad_end)]
        y = fn(x, w, bias, tuple(stride), tuple(lo), tuple(opad), groups, tuple(dil))
        sl = [slice(None), slice(None)] + [slice(p - m, y.shape[2 + i] - (e - m))
                                           for i, (p, e, m) in enumerate(zip(pad, pad_end, lo))]
        return y[tuple(sl)]
    fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    if any(a != b for a, b in zip(pad, pad_end)):
        pads: list[int] = []
        for a, b in reversed(list(zip(pad, pad_end))):
            pads += [a, b]
        return fn(F.pad(x, pads), w, bias, tuple(stride), 0, tuple(dil), groups)
    return fn(x, w, bias, tuple(stride), tuple(pad), tuple(dil), groups)


class ConvSpec(OpSpec):
    name = "conv"
    axes = (
        Axis("N", "batch size"),
        Axis("C", "input channels (all groups)", reduction=True),
        Axis("K", "output channels (all groups)"),
        Axis("G", "groups (C and K multiples of G; G == C: depthwise)", optional=True),
        Axis("D", "input depth (3-D)", optional=True),
        Axis("H", "input height (2-D, 3-D)", optional=True),
        Axis("W", "input width"),
        Axis("KD", "window depth (3-D; 1 where absent)", optional=True, reduction=True),
        Axis("KH", "window height (2-D, 3-D; 1 where absent)", optional=True, reduction=True),
        Axis("KW", "window width (1 where absent)", optional=True, reduction=True),
    )
    dtypes = (torch.float16, torch.bfloat16, torch.float32)
    attr_choices = {
        "transposed": (False, True),
        "channels_last": (False, True),
        "bias": (False, True),
        "residual": (False, True),
        "activation": ACTIVATIONS,
        "allow_tf32": (False, True),
        "scale": Scalar(1.0, -1e30, 1e30),
        **_geometry_attrs(),
    }

    def problem(self, shape: Mapping[str, int] | str, dtype: str | torch.dtype,
                attrs: Mapping[str, Any] | None = None) -> Problem:
        """As :meth:`OpSpec.problem`, then checks the geometry and records ``groups`` (= G) among the
        attributes (the reference needs it; it is part of the tuning key; a ``groups`` given among
        ``attrs`` is ignored)."""
        attrs = dict(attrs or {})
        attrs.pop("groups", None)  # always derived from the shape (a problem's attrs carry it)
        p = super().problem(shape, dtype, attrs)
        G = p.shape.get("G", 1)
        for ax in ("C", "K"):
            if p.shape[ax] % G:
                raise InvalidInputError(f"axis {ax} of conv", f"a multiple of G={G}", p.shape[ax])
        nd = 1 + ("H" in p.shape) + ("D" in p.shape)
        if ("D" in p.shape and "H" not in p.shape) or any(
                "K" + A in p.shape and A not in p.shape for A in ("D", "H")):
            raise InvalidInputError("shape of conv", "W [, KW]; or H, W [, KH, KW]; or D, H, W [, KD, KH, KW]",
                                    ",".join(p.shape))
        # the geometry is part of the tuning key; only the epilogue scale is a runtime scalar
        p = dataclasses.replace(p, attrs={**p.attrs, "groups": G}, scalars=frozenset({"scale"}))
        g = geometry(p)
        for i, a in enumerate(SPATIAL[3 - nd:], start=3 - nd):
            span = g["DL"][i] * (g["KS"][i] - 1) + 1
            if not p.attrs["transposed"] and g["I"][i] + g["P"][i] + g["PE"][i] < span:
                raise InvalidInputError(f"size along {a}", f"padded input >= dilated window ({span})",
                                        g["I"][i] + g["P"][i] + g["PE"][i])
            if p.attrs["transposed"] and g["OP"][i] >= max(g["S"][i], g["DL"][i]):
                raise InvalidInputError(f"opad_{a}", f"below stride or dilation ({max(g['S'][i], g['DL'][i])})",
                                        g["OP"][i])
            if g["O"][i] < 1:
                raise InvalidInputError(f"output size along {a}", "at least 1", g["O"][i])
        return p

    # ---- shapes ----------------------------------------------------------------------
    def _spatial(self, p: Problem, key: str) -> tuple[int, ...]:
        return geometry(p)[key][3 - spatial_dims(p):]

    def shapes(self, p: Problem) -> dict[str, tuple[int, ...]]:
        s = p.shape
        G = s.get("G", 1)
        wshape = (s["C"], s["K"] // G) if p.attrs["transposed"] else (s["K"], s["C"] // G)
        return {"x": (s["N"], s["C"]) + self._spatial(p, "I"), "w": wshape + self._spatial(p, "KS"),
                "y": (s["N"], s["K"]) + self._spatial(p, "O")}

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return ((self.shapes(p)["y"], p.dtype),)

    def _lay_out(self, t: torch.Tensor, p: Problem) -> torch.Tensor:
        if not p.attrs["channels_last"]:
            return t
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
        if fmt is not None:
            return t.contiguous(memory_format=fmt)
        return t.transpose(1, 2).contiguous().transpose(1, 2)  # NWC for 1-D

    def _assemble(self, p: Problem, make) -> dict[str, torch.Tensor]:
        sh = self.shapes(p)
        out = {"x": self._lay_out(make(sh["x"]), p), "w": make(sh["w"])}
        if p.attrs["bias"]:
            out["bias"] = make((p.shape["K"],))
        if p.attrs["residual"]:
            out["residual"] = self._lay_out(make(sh["y"]), p)
        return out

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        scale = self.large_scale(p) if dist == "large" else 1.0
        return self._assemble(p, lambda shape: draw(shape, dist, gen, p.dtype, device, scale))

    def exact_inputs(self, p: Problem, gen: torch.Generator,
                     device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        # entries in [-r, r] with L r^2 + 2 r well inside fp32's exact integers: every partial sum is
        # exact, so any correct summation order gives the same fp32 value, rounded once at the end
        r = 2 if self.reduction_len(p) * 4 + 4 < EXACT_INT["float32"] // 2 else 1
        g = on_device(gen, device)
        return self._assemble(p, lambda shape: torch.randint(-r, r + 1, shape, generator=g, device=device).to(p.dtype))

    def identity_problem(self, p: Problem) -> Problem:
        if p.attrs["activation"] in ("gelu", "silu") or p.attrs["scale"] != 1.0:
            return self.problem(dict(p.shape), p.dtype, {**p.attrs, "activation": "none", "scale": 1.0})
        return p

    def reduction_len(self, p: Problem) -> int:
        """Terms per output: C/G x window (a transposed conv's taps hit at most this many)."""
        g = geometry(p)
        vol = g["KS"][0] * g["KS"][1] * g["KS"][2]
        return p.shape["C"] // p.shape.get("G", 1) * vol

    def large_scale(self, p: Problem) -> float:
        return (float(torch.finfo(p.dtype).max) / (8 * self.reduction_len(p) ** 0.5)) ** 0.5

    # ---- semantics -------------------------------------------------------------------
    def _conv(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], w: torch.Tensor,
              x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        nd = x.dim() - 2
        axes = SPATIAL[3 - nd:]
        return reference_conv(x, w, bias, [attrs[f"stride_{a}"] for a in axes], [attrs[f"pad_{a}"] for a in axes],
                              [attrs[f"pad_end_{a}"] for a in axes], [attrs[f"dil_{a}"] for a in axes],
                              [attrs[f"opad_{a}"] for a in axes], self._groups(x, w, attrs), attrs["transposed"])

    @staticmethod
    def _groups(x: torch.Tensor, w: torch.Tensor, attrs: Mapping[str, Any]) -> int:
        return int(attrs["groups"])

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        x, w = inputs["x"], inputs["w"]
        y = self._conv(inputs, attrs, w, x, None)
        y = y * attrs["scale"]
        if attrs["bias"]:
            y = y + inputs["bias"].reshape((1, -1) + (1,) * (x.dim() - 2))
        if attrs["residual"]:
            y = y + inputs["residual"]
        return activation(y, attrs["activation"])

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        x, w = inputs64["x"].abs(), inputs64["w"].abs()
        s = self._conv(inputs64, attrs, w, x, None) * abs(attrs["scale"])
        if attrs["bias"]:
            s = s + inputs64["bias"].abs().reshape((1, -1) + (1,) * (x.dim() - 2))
        if attrs["residual"]:
            s = s + inputs64["residual"].abs()
        return s

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        tf32 = dt == "float32" and p.attrs["allow_tf32"]
        return ErrorContract(
            out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=UNIT_ROUNDOFF["float32"],
            reduction_len=self.reduction_len(p) + 1 + int(p.attrs["bias"]) + int(p.attrs["residual"]),
            u_operand=UNIT_ROUNDOFF["tf32"] if tf32 else 0.0,
            lipschitz=_LIPSCHITZ[p.attrs["activation"]], ref_factor=None if tf32 else 4.0)

    def flops(self, p: Problem) -> float:
        g = geometry(p)
        pix = g["I"] if p.attrs["transposed"] else g["O"]  # the transposed conv's useful work scatters the input
        return 2.0 * p.shape["N"] * pix[0] * pix[1] * pix[2] * p.shape["K"] * self.reduction_len(p)

    def min_bytes(self, p: Problem) -> float:
        e = p.dtype.itemsize
        n = 1
        sizes = self.shapes(p)
        total = 0
        for key in ("x", "w", "y"):
            n = 1
            for d in sizes[key]:
                n *= d
            total += n
        if p.attrs["residual"]:
            total += n
        return float(e * (total + (p.shape["K"] if p.attrs["bias"] else 0)))


CONV = ConvSpec()
