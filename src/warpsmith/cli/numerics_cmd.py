"""``warpsmith numerics``: a study of low-precision formats for one GEMM shape (see :mod:`warpsmith.numerics`)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from .common import handle_errors


@click.command()
@click.option("--shape", default="M=64,N=64,K=256", show_default=True, help="GEMM sizes M,N,K (y = x @ w).")
@click.option("--paths", "names", default="", help="Comma-separated paths (default: all; see --list).")
@click.option("--dists", default="normal,uniform,outliers", show_default=True,
              help="Input distributions (the verifier's): normal, uniform, outliers, tiny.")
@click.option("--rounding", type=click.Choice(["both", "rn", "sr"]), default="both", show_default=True,
              help="Round to nearest even, stochastic rounding of the inputs, or both.")
@click.option("--trials", default=1, show_default=True, type=click.IntRange(1, 100))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("numerics"),
              show_default=True, help="Folder for numerics.txt, numerics.csv, numerics.json and numerics.png.")
@click.option("--list", "list_paths", is_flag=True, help="List the paths and exit.")
@handle_errors
def numerics(shape: str, names: str, dists: str, rounding: str, trials: int, seed: int, out_dir: Path,
             list_paths: bool) -> None:
    """Error of each low-precision format path against fp64 on a GEMM: max-abs, relative, SNR, calc_diff.

    Both operands are quantized by plain-PyTorch reference quantizers and multiplied in fp64, so the
    figures are the formats' representation error (a study of the formats, not of a kernel). Writes a
    table (text, CSV, JSON) and a PNG plot of SNR (the plot needs matplotlib: pip install warpsmith[plot]).
    """
    from ..core.errors import InvalidInputError
    from ..core.opspec import parse_shape
    from .. import numerics as nx

    if list_paths:
        click.echo("\n".join(nx.paths()))
        return
    sizes = parse_shape(shape)
    if set(sizes) != {"M", "N", "K"} or min(sizes.values()) < 1:
        raise InvalidInputError("shape", "M=..,N=..,K=.. with positive sizes", shape)
    chosen = [n.strip() for n in names.split(",") if n.strip()] or None
    stochastic = {"both": (False, True), "rn": (False,), "sr": (True,)}[rounding]
    rows = nx.study(sizes["M"], sizes["N"], sizes["K"], chosen, [d.strip() for d in dists.split(",") if d.strip()],
                    stochastic, trials, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = nx.format_table(rows)
    title = f"GEMM M={sizes['M']} N={sizes['N']} K={sizes['K']}"
    (out_dir / "numerics.txt").write_text(f"{title} (operands quantized, product in fp64)\n{text}\n")
    nx.write_csv(rows, out_dir / "numerics.csv")
    (out_dir / "numerics.json").write_text(json.dumps({"shape": sizes, "rows": [asdict(r) for r in rows]}, indent=1))
    click.echo(text)
    if nx.plot(rows, out_dir / "numerics.png", title):
        click.echo(f"wrote {out_dir}/numerics.txt, .csv, .json and .png")
    else:
        click.echo(f"wrote {out_dir}/numerics.txt, .csv and .json; the plot needs matplotlib "
                   "(pip install matplotlib, or warpsmith[plot]): no PNG written")
