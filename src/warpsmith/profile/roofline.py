"""Roofline plots of kernels against a target's ceilings: a PNG (matplotlib) and a self-contained
HTML page (inline SVG, hover titles, no script or network fetch).

Ceilings: memory roofs (HBM, L2 where the target has a figure, shared memory) as FLOP/s = bandwidth
x intensity, and compute peaks (the tensor cores at the op's math kind, FP32 FMA). A kernel is a
point at (FLOPs / bytes, FLOPs / time): every point is *predicted* (the static machine-code model)
unless a GPU measured it, and the plots say so.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..targets import Target
from .collect import KernelRow, Profile


@dataclass(frozen=True)
class Ceiling:
    name: str
    kind: str  # "memory" (value: TB/s) | "compute" (value: TFLOP/s)
    value: float

    def tflops_at(self, intensity: float) -> float:
        return self.value * intensity if self.kind == "memory" else self.value


@dataclass(frozen=True)
class Point:
    label: str
    intensity: float  # FLOP/byte
    tflops: float  # achieved (predicted or measured) TFLOP/s
    ms: float
    bound: str
    timing: str  # "predicted" | "measured"


def ceilings(target: Target, kind: str) -> list[Ceiling]:
    """The target's roofs: HBM, L2 (where known), shared memory; the tensor-core peak at ``kind`` and FP32."""
    out = [Ceiling("HBM", "memory", target.hbm_tbps)]
    rates = target.throughput
    if rates is not None:
        if rates.l2_tbps:
            out.append(Ceiling("L2 (estimate)" if rates.approximate else "L2", "memory", rates.l2_tbps))
        out.append(Ceiling("shared memory", "memory", rates.per_s(rates.smem_bytes_per_clk, target.sms) / 1e12))
    tensor = kind if kind not in ("fp32", "fp64") else "bf16"  # a program without MMA: the bf16 tensor peak
    out.append(Ceiling(f"tensor cores ({tensor})", "compute", target.peak(tensor)))
    out.append(Ceiling("FP32 FMA", "compute", target.peak("fp32")))
    return out


def points(rows: Sequence[KernelRow], timing: str = "predicted") -> list[Point]:
    """One point per kernel with a finite time, FLOPs and bytes."""
    out = []
    for r in rows:
        if r.predicted_ms and math.isfinite(r.predicted_ms) and r.flops and r.bytes:
            out.append(Point(r.name, r.flops / r.bytes, r.flops / (r.predicted_ms * 1e-3) / 1e12, r.predicted_ms,
                             r.bound or "?", timing))
    return out


def measured_points(prof: Profile) -> list[Point]:
    """The config's measured time as one point (its kernels together, the op's FLOPs and bytes), if a GPU
    timed it; else none."""
    if prof.measured_ms is None or not prof.flops or not prof.bytes:
        return []
    return [Point(f"{prof.variant} (measured)", prof.flops / prof.bytes, prof.flops / (prof.measured_ms * 1e-3) / 1e12,
                  prof.measured_ms, "measured", "measured")]


def _label(pts: Sequence[Point]) -> str:
    return "predicted and measured" if any(p.timing == "measured" for p in pts) else "predicted"


def _bounds(cs: Sequence[Ceiling], pts: Sequence[Point]) -> tuple[float, float, float, float]:
    xs = [p.intensity for p in pts] or [1.0]
    peak = max(c.value for c in cs if c.kind == "compute")
    x0 = 10 ** math.floor(math.log10(max(1e-3, min(xs + [0.1]) / 3)))
    x1 = 10 ** math.ceil(math.log10(max(xs + [1e4]) * 3))
    ys = [p.tflops for p in pts] + [min(c.tflops_at(x0) for c in cs)]
    y0 = 10 ** math.floor(math.log10(max(1e-6, min(ys) / 3)))
    y1 = 10 ** math.ceil(math.log10(peak * 2))
    return x0, x1, y0, y1


def _roof(c: Ceiling, cs: Sequence[Ceiling], x0: float, x1: float) -> list[tuple[float, float]]:
    """A ceiling as a polyline: a memory roof rises until the highest compute peak, a peak is flat."""
    if c.kind == "compute":
        return [(x0, c.value), (x1, c.value)]
    top = max(x.value for x in cs if x.kind == "compute")
    return [(x0, c.value * x0), (min(x1, top / c.value), min(top, c.value * x1))]


def write_png(path: Path, target: Target, kind: str, pts: Sequence[Point], title: str) -> Path:
    """The roofline as a PNG (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = ceilings(target, kind)
    x0, x1, y0, y1 = _bounds(cs, pts)
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    for c in cs:
        line = _roof(c, cs, x0, x1)
        ax.plot([p[0] for p in line], [p[1] for p in line], "--" if c.kind == "memory" else "-", lw=1.3,
                label=f"{c.name}: {c.value:.4g} {'TB/s' if c.kind == 'memory' else 'TFLOP/s'}")
    for p in pts:
        ax.scatter([p.intensity], [p.tflops], marker="o" if p.timing == "predicted" else "*", s=60 if
                   p.timing == "predicted" else 140, zorder=5)
        ax.annotate(f"{p.label}\n{p.ms:.3g} ms {p.timing}, {p.bound}-bound", (p.intensity, p.tflops), fontsize=7,
                    xytext=(6, -12), textcoords="offset points")
    ax.set(xscale="log", yscale="log", xlim=(x0, x1), ylim=(y0, y1), xlabel="arithmetic intensity (FLOP/byte)",
           ylabel="TFLOP/s", title=f"{title}\n{target.name}: every point predicted (static model), none measured"
           if all(p.timing == "predicted" for p in pts) else f"{title}\n{target.name}: circles predicted, stars measured")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


_W, _H, _PAD = 760, 480, 60
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def svg(target: Target, kind: str, pts: Sequence[Point], title: str) -> str:
    """The roofline as an inline SVG: one ``<circle class="kernel">`` per point, with a hover title."""
    cs = ceilings(target, kind)
    x0, x1, y0, y1 = _bounds(cs, pts)

    def sx(x: float) -> float:
        return _PAD + (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0)) * (_W - 2 * _PAD)

    def sy(y: float) -> float:
        return _H - _PAD - (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)) * (_H - 2 * _PAD)

    e = html.escape
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="roofline" width="{_W}" height="{_H}" '
             f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="11">',
             f'<text x="{_W / 2}" y="18" text-anchor="middle" font-size="13">{e(title)} on {e(target.name)} '
             f'({_label(pts)})</text>',
             f'<rect x="{_PAD}" y="{_PAD}" width="{_W - 2 * _PAD}" height="{_H - 2 * _PAD}" fill="none" stroke="#999"/>']
    for d in range(round(math.log10(x0)), round(math.log10(x1)) + 1):
        parts.append(f'<text x="{sx(10 ** d):.1f}" y="{_H - _PAD + 16}" text-anchor="middle">1e{d}</text>')
    for d in range(round(math.log10(y0)), round(math.log10(y1)) + 1):
        parts.append(f'<text x="{_PAD - 6}" y="{sy(10 ** d) + 4:.1f}" text-anchor="end">1e{d}</text>')
    parts.append(f'<text x="{_W / 2}" y="{_H - 18}" text-anchor="middle">arithmetic intensity (FLOP/byte)</text>')
    parts.append(f'<text x="16" y="{_H / 2}" transform="rotate(-90 16 {_H / 2})" text-anchor="middle">TFLOP/s</text>')
    for i, c in enumerate(cs):
        (ax, ay), (bx, by) = _roof(c, cs, x0, x1)
        color = _COLORS[i % len(_COLORS)]
        unit = "TB/s" if c.kind == "memory" else "TFLOP/s"
        dash = ' stroke-dasharray="6 4"' if c.kind == "memory" else ""
        parts.append(f'<line class="ceiling" x1="{sx(ax):.1f}" y1="{sy(ay):.1f}" x2="{sx(bx):.1f}" y2="{sy(by):.1f}" '
                     f'stroke="{color}" stroke-width="1.5"{dash}><title>{e(c.name)}: {c.value:.4g} {unit}</title></line>')
        parts.append(f'<text x="{_W - _PAD - 4}" y="{_PAD + 14 + 13 * i}" text-anchor="end" fill="{color}">'
                     f'{e(c.name)}: {c.value:.4g} {unit}</text>')
    for p in pts:
        cls, fill = ("kernel", "#000") if p.timing == "predicted" else ("measured", "#d62728")
        parts.append(f'<circle class="{cls}" data-kernel="{e(p.label)}" data-timing="{p.timing}" '
                     f'cx="{sx(p.intensity):.1f}" cy="{sy(p.tflops):.1f}" r="6" fill="{fill}" fill-opacity="0.75">'
                     f'<title>{e(p.label)}: {p.intensity:.3g} FLOP/B, {p.tflops:.3g} TFLOP/s, {p.ms:.4g} ms {p.timing}'
                     f'{"" if p.timing != "predicted" else ", " + e(p.bound) + "-bound"}</title></circle>')
        parts.append(f'<text x="{sx(p.intensity) + 8:.1f}" y="{sy(p.tflops) - 8:.1f}">{e(p.label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _page_note(pts: Sequence[Point]) -> str:
    predicted = ("by the static machine-code model (instruction counts of the compiled kernel at the target's "
                 "datasheet rates)")
    if any(p.timing == "measured" for p in pts):
        return (f"Black points and every table figure are <b>predicted</b> {predicted}; the red point was "
                "<b>measured</b> on a GPU (a tuning record's time).")
    return f"Every time, rate and point on this page is <b>predicted</b> {predicted}; none was measured on a GPU."


def write_html(path: Path, target: Target, kind: str, pts: Sequence[Point], title: str, table_html: str) -> Path:
    """A self-contained page: the SVG roofline and the kernel table (no script, no external resource)."""
    e = html.escape
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)} - warpsmith profile ({_label(pts)})</title>
<style>body{{font-family:sans-serif;margin:24px}} table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}} td:first-child,th:first-child{{text-align:left}}
circle.kernel:hover{{fill:#d62728}} .note{{color:#555;font-size:12px}}</style></head>
<body><h1>{e(title)}</h1>
<p class="note">Target {e(target.name)}. {_page_note(pts)} Hover a point or a ceiling for its values.</p>
{svg(target, kind, pts, title)}
{table_html}
</body></html>
"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
