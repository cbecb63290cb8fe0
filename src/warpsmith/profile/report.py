"""The per-kernel table of a profile, as text (rich) and as HTML, and its header lines.

Columns: the kernel, its grid, its time (predicted by the static machine-code model), FLOPs and
bytes (the op's own definition for the main kernel, the instructions' count for a helper), the
arithmetic intensity, the bound, the speed-of-light fraction (the op's roofline floor over the
predicted time), registers, spill bytes, resident programs per SM, and the top instruction classes.
"""
from __future__ import annotations

import html
from typing import Any, Sequence

from rich.table import Table

from .collect import KernelRow, Profile

COLUMNS = ("kernel", "grid", "predicted ms", "FLOPs", "bytes", "FLOP/B", "bound", "SOL %", "regs", "spill B",
           "programs/SM", "top instruction classes")


def _num(x: float | None, fmt: str = ".4g") -> str:
    return "-" if x is None else format(x, fmt)


def ncu_cell(r: KernelRow) -> str:
    """The kernel's Nsight Compute metrics (measured), or ``-``."""
    return ", ".join(f"{k} {v:.4g}{' ms' if k == 'time' else ''}" for k, v in r.ncu.items()) or "-"


def _columns(rows: Sequence[KernelRow]) -> tuple[str, ...]:
    return COLUMNS + (("ncu (measured)",) if any(r.ncu for r in rows) else ())


def cells(r: KernelRow, ncu: bool = False) -> list[str]:
    return [r.name, "x".join(map(str, r.grid)) if r.grid else "-", _num(r.predicted_ms),
            _num(r.flops, ".3e"), _num(r.bytes, ".3e") + ("" if r.counted_from == "op definition" else "*"),
            _num(r.intensity, ".3g"), r.bound or "-", _num(None if r.sol is None else 100 * r.sol, ".0f"),
            _num(r.regs, "d") if r.regs is not None else "-",
            _num(r.spill_bytes, "d") if r.spill_bytes is not None else "-",
            _num(r.occupancy, "d") if r.occupancy is not None else "-",
            ", ".join(f"{k} {n}" for k, n in r.top_classes) or "-"] + ([ncu_cell(r)] if ncu else [])


def header(p: Profile) -> list[str]:
    cfg = " ".join(f"{k}={v}" for k, v in p.config.items())
    what = "op" if p.source == "op definition" else "program"
    lines = [f"{p.problem} on {p.target.name}: {p.variant} {cfg}".rstrip(),
             f"{what}: {p.flops:.4g} FLOPs, {p.bytes:.4g} bytes ({p.source}), "
             f"{(p.flops / p.bytes if p.bytes else 0):.3g} FLOP/B; "
             f"roofline floor {p.roofline_ms:.4g} ms ({p.math_kind} peak, HBM) predicted",
             f"analytic cost model: {_num(p.analytic_ms)} ms predicted; static machine-code model: "
             f"{_num(sum(r.predicted_ms or 0 for r in p.kernels) or None)} ms predicted (kernels in sequence)",
             p.measured_note if p.measured_ms is None else f"measured: {p.measured_ms:.4g} ms ({p.measured_note})",
             f"{p.target.name} rates: {p.target.provenance}"]
    if p.static_note:
        lines.append(p.static_note)
    if p.ncu_note:
        lines.append(p.ncu_note)
    return lines


def table(rows: Sequence[KernelRow], title: str) -> Table:
    t = Table(title=title)
    cols = _columns(rows)
    for c in cols:
        t.add_column(c, justify="left" if c in ("kernel", "bound", "top instruction classes", "ncu (measured)")
                     else "right")
    for r in rows:
        t.add_row(*cells(r, len(cols) > len(COLUMNS)))
    return t


def notes(rows: Sequence[KernelRow]) -> list[str]:
    out = []
    for src in sorted({r.counted_from for r in rows} - {"op definition"}):
        out.append(f"* bytes and FLOPs from: {src} (not an op's definition; launch arguments: each tensor argument "
                   "read or written once; machine code: the instructions' global bytes and FLOPs)")
    for r in rows:
        out += [f"{r.name}: {n}" for n in r.notes]
    return out


def html_table(rows: Sequence[KernelRow], head: Sequence[str]) -> str:
    e = html.escape
    out = [f'<p class="note">{e(line)}</p>' for line in head]
    cols = _columns(rows)
    out.append('<table class="kernels"><tr>' + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>")
    out += ['<tr class="kernel">' + "".join(f"<td>{e(c)}</td>" for c in cells(r, len(cols) > len(COLUMNS))) + "</tr>"
            for r in rows]
    out.append("</table>")
    out += [f'<p class="note">{e(n)}</p>' for n in notes(rows)]
    return "\n".join(out)


def to_json(p: Profile) -> dict[str, Any]:
    return {**p.to_json(), "header": header(p)}
