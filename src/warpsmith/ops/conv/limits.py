"""The convolution kernels' limits: their 32-bit preconditions (:func:`fwd_limits`, :func:`wgrad_limits`), the
output orders and block sizes, and the transposed conv's phase constants. One definition, which the
launchers (variant.py, depthwise.py, wgrad.py) check on their integers and the launch contracts
(contract.py) take as their domain on z3 terms."""
from __future__ import annotations

import math
from typing import Any

INDEX_LIMIT = 2**31
WGRAD_REDUCE_BLOCK = 1024
MAX_BLOCK = 256
MAX_GROUPS = 65535  # grid axis 1 (CUDA's y extent)
GEOMETRY_MAX = {"stride": 64, "pad": 4096, "dil": 64}  # the spec's ranges (spec._geometry_attrs)
OUTPUT_ORDERS = {"ncdhw": (4, 3, 2, 1, 0), "ndhwc": (1, 4, 3, 2, 0)}  # (N, C, D, H, W) dims, innermost first


def coord_span(o: Any, k: Any, stride: Any, pad: Any, dil: Any) -> Any:
    """Largest magnitude an input coordinate takes on any lane of the kernels (masked lanes included:
    output coordinate up to ``o``, tap up to ``k``, each with a block of overshoot)."""
    return (o + MAX_BLOCK) * stride + pad + (k + MAX_BLOCK) * dil


def _geometry_limits(stride: tuple, pad: tuple, dil: tuple) -> list[tuple[str, Any, int]]:
    out = []
    for i, a in enumerate("dhw"):
        out += [(f"stride_{a}", stride[i], GEOMETRY_MAX["stride"] + 1), (f"pad_{a}", pad[i], GEOMETRY_MAX["pad"] + 1),
                (f"dil_{a}", dil[i], GEOMETRY_MAX["dil"] + 1)]
    return out


def _gather_span(channels: Any, sc: Any, I: tuple, O: tuple, KS: tuple, stride: tuple, pad: tuple, dil: tuple,
                 sd: tuple) -> Any:
    """Within-sample offsets of a gathered operand (channel and input coordinates, any lane)."""
    return (channels + MAX_BLOCK) * sc + sum((coord_span(O[i], KS[i], stride[i], pad[i], dil[i]) * sd[i]
                                               for i in range(3)), 0 * sc)


def _weight_span(G: Any, KG: Any, CG: Any, KS: tuple, sw: tuple) -> Any:
    return (G * sw[0] + (KG + MAX_BLOCK) * sw[1] + (CG + MAX_BLOCK) * sw[2]
            + sum(((KS[i] + MAX_BLOCK) * sw[3 + i] for i in range(3)), 0 * sw[0]))


def _pixel_span(channels: Any, O: tuple, s: tuple) -> Any:
    """Within-sample offsets of an operand addressed at output pixels (channel and output coordinates)."""
    return (channels + MAX_BLOCK) * s[1] + sum(((O[i] + MAX_BLOCK) * s[2 + i] for i in range(3)), 0 * s[1])


def fwd_limits(N: Any, G: Any, CG: Any, KG: Any, I: tuple, O: tuple, KS: tuple, stride: tuple, pad: tuple,
               dil: tuple, sx: tuple, sw: tuple, sy: tuple, sr: tuple, sbias: Any, splits: Any = 1
               ) -> list[tuple[str, Any, int]]:
    """``conv_fwd_kernel``'s (and its split-K reduction's) preconditions, each ``(what, value, bound)``
    meaning ``value < bound``: the 32-bit quantities it computes on any lane (pixels, channels,
    reduction index, within-sample offsets; the batch offset is int64), the grid's group axis, and
    the spec's geometry ranges. Integers (the launcher checks them) or z3 terms (the contract's
    domain, contract.py): one definition for both. ``sx``, ``sy``, ``sr``: (n, c, d, h, w) strides;
    ``sw``: :func:`weight_strides`; tuples are (d, h, w)."""
    kvol = KS[0] * KS[1] * KS[2]
    return [
        ("output pixels", splits * N * O[0] * O[1] * O[2] + MAX_BLOCK, INDEX_LIMIT),
        ("output channels", G * KG + MAX_BLOCK, INDEX_LIMIT),
        ("reduction length", kvol * (CG + MAX_BLOCK), INDEX_LIMIT),
        ("groups", G, MAX_GROUPS + 1),
        ("input offsets", _gather_span(G * CG, sx[1], I, O, KS, stride, pad, dil, sx[2:]), INDEX_LIMIT),
        ("weight offsets", _weight_span(G, KG, CG, KS, sw), INDEX_LIMIT),
        ("output offsets", _pixel_span(G * KG, O, sy), INDEX_LIMIT),
        ("residual offsets", _pixel_span(G * KG, O, sr), INDEX_LIMIT),
        ("bias offsets", (G * KG + MAX_BLOCK) * sbias, INDEX_LIMIT),
    ] + _geometry_limits(stride, pad, dil)


def wgrad_limits(N: Any, G: Any, CG: Any, KG: Any, I: tuple, O: tuple, KS: tuple, stride: tuple, pad: tuple,
                 dil: tuple, sa: tuple, sb: tuple, sw: tuple) -> list[tuple[str, Any, int]]:
    """``conv_wgrad_kernel``'s preconditions, as :func:`fwd_limits` (``a``: KG channels per group at
    output pixels; ``b``: CG channels per group, gathered; ``sw``: the gradient's weight strides)."""
    kvol = KS[0] * KS[1] * KS[2]
    return [
        ("output pixels", N * O[0] * O[1] * O[2] + MAX_BLOCK, INDEX_LIMIT),
        ("weight columns", kvol * (CG + MAX_BLOCK), INDEX_LIMIT),
        ("weight rows", G * KG + MAX_BLOCK, INDEX_LIMIT),
        ("groups", G, MAX_GROUPS + 1),
        ("a offsets", _pixel_span(G * KG, O, sa), INDEX_LIMIT),
        ("b offsets", _gather_span(G * CG, sb[1], I, O, KS, stride, pad, dil, sb[2:]), INDEX_LIMIT),
        ("weight offsets", _weight_span(G, KG, CG, KS, sw), INDEX_LIMIT),
    ] + _geometry_limits(stride, pad, dil)


def phase_constants(stride: int, dil: int) -> tuple[int, int]:
    """``(gcd, inv)`` of one axis for ``kernel.phase_taps``: ``gcd(stride, dil)`` and the inverse of
    ``dil / gcd`` modulo ``stride / gcd`` (0 where that modulus is 1)."""
    g = math.gcd(stride, dil)
    step = stride // g
    return g, pow(dil // g, -1, step) if step > 1 else 0
