"""A study of low-precision formats for GEMM (what ``warpsmith numerics`` runs).

For a GEMM shape ``y = x @ w`` (x (M, K), w (K, N)) and inputs from the verifier's distributions
(:data:`warpsmith.core.opspec.DISTRIBUTIONS`: normal, uniform, outliers, ...), each *path* quantizes
both operands with a plain-PyTorch reference quantizer (round to nearest even, or stochastic rounding
of the inputs), dequantizes them, and multiplies **in fp64**: the error against the fp64 product of
the original inputs is then the formats' representation error alone, not any kernel's accumulation
(the kernels' own error is what the error contracts judge). Reported per path, distribution and
rounding: max-abs error, relative (Frobenius) error, SNR in dB (``10 log10(|y|^2 / |y - y_q|^2)``) and
DeepGEMM's ``calc_diff`` (``1 - 2 <y, y_q> / (|y|^2 + |y_q|^2)``).

Paths: ``bf16``, ``fp16`` (both operands rounded); ``fp8-e4m3`` / ``fp8-e5m2`` scaled per tensor, per row
(x per token, w per output channel) or per 128-block (x 1x128 along K, w 128x128), scale ``amax / max``
and saturation; ``fp8-e5m2xe4m3`` the same scalings with x in e5m2 and w in e4m3 (the hybrid recipe's
backward GEMMs: a gradient times a weight or activations); ``int8`` (x per token, w per channel, symmetric, ``amax / 127``); ``int4-g32/64/128``
(weight-only: w asymmetric per group of K rows with fp16 scales, as AWQ's RTN; x in fp16).

Stochastic rounding (``sr``) rounds a value between two grid points ``lo < v < hi`` up with
probability ``(v - lo) / (hi - lo)``: for the float formats with the grid spacing of v's binade
(``2^(floor(log2 |v|) - mantissa bits)``, never below the subnormal step), for the integer ones with
the scale.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import torch

from .core.errors import InvalidInputError, UnknownNameError
from .core.opspec import draw
from .ops.lowprec.quant.reference import DTYPE_OF, QMAX, calc_diff, snr_db

# mantissa bits, smallest normal exponent, largest finite value, dtype (fp8 and int8: the lowprec family's)
_FLOATS = {"bf16": (7, -126, float(torch.finfo(torch.bfloat16).max), torch.bfloat16),
           "fp16": (10, -14, 65504.0, torch.float16),
           "e4m3": (3, -6, QMAX["e4m3"], DTYPE_OF["e4m3"]),
           "e5m2": (2, -14, QMAX["e5m2"], DTYPE_OF["e5m2"])}
_INT8_MAX = int(QMAX["int8"])
SCALINGS = ("tensor", "row", "block128")
DISTS = ("normal", "uniform", "outliers")


def round_float(v: torch.Tensor, fmt: str, stochastic: bool = False, gen: torch.Generator | None = None) -> torch.Tensor:
    """``v`` (fp64) rounded to format ``fmt`` (saturating at its largest value), returned in fp64."""
    mbits, emin, fmax, dtype = _FLOATS[fmt]
    v = v.clamp(-fmax, fmax)
    if not stochastic:
        return v.to(dtype).to(torch.float64)
    mag = v.abs()
    e = torch.floor(torch.log2(mag.clamp(min=2.0 ** emin)))
    ulp = torch.pow(2.0, e - mbits)
    u = torch.rand(v.shape, generator=gen, dtype=torch.float64)
    r = torch.floor(v / ulp + u) * ulp
    return r.clamp(-fmax, fmax)


def round_int(v: torch.Tensor, lo: int, hi: int, stochastic: bool = False, gen: torch.Generator | None = None) -> torch.Tensor:
    """``v`` rounded to an integer (nearest even, or stochastically) and clamped to [lo, hi]."""
    r = torch.floor(v + torch.rand(v.shape, generator=gen, dtype=torch.float64)) if stochastic else torch.round(v)
    return r.clamp(lo, hi)


def _amax_blocks(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """max |t| over blocks of rows x cols (the last block of each dim may be partial), broadcast back."""
    R, C = t.shape
    pr, pc = -(-R // rows) * rows - R, -(-C // cols) * cols - C
    p = torch.nn.functional.pad(t.abs(), (0, pc, 0, pr))
    m = p.reshape(p.shape[0] // rows, rows, p.shape[1] // cols, cols).amax(dim=(1, 3))
    return m.repeat_interleave(rows, 0).repeat_interleave(cols, 1)[:R, :C]


def _scaled(t: torch.Tensor, amax: torch.Tensor, qmax: float, rnd: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    s = (amax / qmax).clamp(min=1e-30)
    return rnd(t / s) * s


def fp8_path(fmt: str, scaling: str, fmt_w: str | None = None) -> Callable:
    """x in ``fmt``, w in ``fmt_w`` (default ``fmt``; the mixed pair is fp8 training's hybrid recipe)."""
    fmt_w = fmt_w or fmt
    fmax, fmax_w = _FLOATS[fmt][2], _FLOATS[fmt_w][2]

    def run(x, w, sr, gen):
        rnd = lambda t: round_float(t, fmt, sr, gen)  # noqa: E731
        rnd_w = lambda t: round_float(t, fmt_w, sr, gen)  # noqa: E731
        if scaling == "tensor":
            ax, aw = x.abs().amax().expand_as(x), w.abs().amax().expand_as(w)
        elif scaling == "row":  # x per token (row), w per output channel (column)
            ax, aw = x.abs().amax(1, keepdim=True).expand_as(x), w.abs().amax(0, keepdim=True).expand_as(w)
        else:  # DeepSeek-V3: x 1x128 blocks along K, w 128x128
            ax, aw = _amax_blocks(x, 1, 128), _amax_blocks(w, 128, 128)
        return _scaled(x, ax, fmax, rnd), _scaled(w, aw, fmax_w, rnd_w)
    return run


def float_path(fmt: str) -> Callable:
    return lambda x, w, sr, gen: (round_float(x, fmt, sr, gen), round_float(w, fmt, sr, gen))


def int8_path(x, w, sr, gen):
    rnd = lambda t: round_int(t, -_INT8_MAX, _INT8_MAX, sr, gen)  # noqa: E731
    return (_scaled(x, x.abs().amax(1, keepdim=True), QMAX["int8"], rnd),
            _scaled(w, w.abs().amax(0, keepdim=True), QMAX["int8"], rnd))


def int4_path(group: int) -> Callable:
    def run(x, w, sr, gen):
        K, N = w.shape
        if K % group:
            raise InvalidInputError("K for int4 paths", f"a multiple of the group size {group}", K)
        g = w.reshape(K // group, group, N)
        wmax, wmin = g.amax(1).clamp(min=0), g.amin(1).clamp(max=0)
        s = ((wmax - wmin) / 15).clamp(min=1e-5).to(torch.float16).to(torch.float64)  # fp16 scales, as AWQ
        z = torch.round(-wmin / s).clamp(0, 15)
        q = round_int(g / s[:, None] + z[:, None], 0, 15, sr, gen)
        wq = ((q - z[:, None]) * s[:, None]).reshape(K, N)
        return round_float(x, "fp16", sr, gen), wq
    return run


def paths() -> dict[str, Callable]:
    """Every path, in report order."""
    out: dict[str, Callable] = {"bf16": float_path("bf16"), "fp16": float_path("fp16")}
    for fmt in ("e4m3", "e5m2"):
        for sc in SCALINGS:
            out[f"fp8-{fmt}-{sc}"] = fp8_path(fmt, sc)
    for sc in SCALINGS:  # the hybrid recipe's backward: x (a gradient) in e5m2, w in e4m3
        out[f"fp8-e5m2xe4m3-{sc}"] = fp8_path("e5m2", sc, "e4m3")
    out["int8-token-channel"] = int8_path
    for g in (32, 64, 128):
        out[f"int4-g{g}"] = int4_path(g)
    return out


@dataclass
class Row:
    path: str
    dist: str
    rounding: str
    max_abs: float
    rel: float
    snr_db: float
    calc_diff: float


def metrics(y: torch.Tensor, yq: torch.Tensor) -> tuple[float, float, float, float]:
    """(max-abs error, relative Frobenius error, SNR in dB, calc_diff) of ``yq`` against ``y``."""
    err = yq - y
    ny, ne = float((y * y).sum()), float((err * err).sum())
    return float(err.abs().max()), math.sqrt(ne / ny) if ny > 0 else 0.0, snr_db(yq, y), calc_diff(y, yq)


def study(M: int, N: int, K: int, names: Sequence[str] | None = None, dists: Sequence[str] = DISTS,
          stochastic: Sequence[bool] = (False, True), trials: int = 1, seed: int = 0) -> list[Row]:
    """The table: one row per (path, distribution, rounding), metrics averaged over ``trials``
    (max-abs: the largest)."""
    table = paths()
    names = list(table) if names is None else list(names)
    for n in names:
        if n not in table:
            raise UnknownNameError("numerics path", n, list(table))
    for d in dists:
        if d not in DISTS + ("tiny",):
            raise UnknownNameError("distribution", d, list(DISTS + ("tiny",)))
    rows = []
    for name in names:
        for dist in dists:
            for sr in stochastic:
                acc = []
                for t in range(trials):
                    gen = torch.Generator().manual_seed(seed + 1000 * t)
                    x = draw((M, K), dist, gen, torch.float32).to(torch.float64)
                    w = draw((K, N), dist, gen, torch.float32).to(torch.float64)
                    xq, wq = table[name](x, w, sr, gen)
                    acc.append(metrics(x @ w, xq @ wq))
                rows.append(Row(name, dist, "sr" if sr else "rn", max(a[0] for a in acc),
                                sum(a[1] for a in acc) / trials, sum(a[2] for a in acc) / trials,
                                sum(a[3] for a in acc) / trials))
    return rows


def format_table(rows: Sequence[Row]) -> str:
    head = f"{'path':<22} {'dist':<9} {'round':<5} {'max_abs':>10} {'rel':>10} {'snr_db':>8} {'calc_diff':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.path:<22} {r.dist:<9} {r.rounding:<5} {r.max_abs:>10.3e} {r.rel:>10.3e} "
                     f"{r.snr_db:>8.2f} {r.calc_diff:>10.3e}")
    return "\n".join(lines)


def write_csv(rows: Sequence[Row], path) -> None:
    import csv

    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        wr.writeheader()
        for r in rows:
            wr.writerow(asdict(r))


def plot(rows: Sequence[Row], path, title: str) -> bool:
    """A PNG of SNR per path (one panel per distribution, RN and SR bars); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    dists = list(dict.fromkeys(r.dist for r in rows))
    names = list(dict.fromkeys(r.path for r in rows))
    fig, axes = plt.subplots(len(dists), 1, figsize=(max(8, 0.6 * len(names)), 3.2 * len(dists)), squeeze=False)
    for ax, d in zip(axes[:, 0], dists):
        for i, rounding in enumerate(("rn", "sr")):
            vals = [next((r.snr_db for r in rows if r.path == n and r.dist == d and r.rounding == rounding), float("nan"))
                    for n in names]
            ax.bar([j + 0.4 * i for j in range(len(names))], vals, width=0.4, label=rounding)
        ax.set_xticks([j + 0.2 for j in range(len(names))])
        ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("SNR (dB)")
        ax.set_title(f"{title}: {d} inputs")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


__all__ = ["study", "paths", "Row", "metrics", "round_float", "round_int", "format_table", "write_csv", "plot"]
