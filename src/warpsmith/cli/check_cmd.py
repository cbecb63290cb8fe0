"""``warpsmith check REFERENCE CANDIDATE``: run the hardened harness on any implementation.

Exit codes: 0 accepted; 1 rejected (the report names the reason code); 2 unusable input
(unreadable or malformed files, unsupported format features, unknown ``--set`` names).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .common import handle_errors


def _table(report) -> Table:
    name = Path(report.candidate).name
    table = Table(title=f"{report.problem['name']} ({report.format}) — {name} on {report.device}")
    table.add_column("check")
    table.add_column("code")
    table.add_column("status")
    for c in report.checks:
        color = {"passed": "green", "failed": "red"}.get(c.status, "yellow")
        table.add_row(c.name, c.code, f"[{color}]{c.text}[/]")
    return table


@click.command()
@click.argument("reference", type=click.Path(exists=True, path_type=Path))
@click.argument("candidate", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report (every check with its result) as JSON here.")
@click.option("--trials", type=int, default=None,
              help="Input draws per workload (default: one per input distribution).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds weight initialisation and input draws.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="Override a KernelBench size constant or a FlashInfer var axis (repeatable).")
@handle_errors
def check(reference: Path, candidate: Path, json_out: Path | None, trials: int | None, seed: int,
          sets: tuple[str, ...]) -> None:
    """Check CANDIDATE against REFERENCE with a harness built to resist gaming.

    REFERENCE is a KernelBench .py file (Model, get_inputs, get_init_inputs) or a
    FlashInfer-Bench/SOL-ExecBench problem folder (definition.json, workload.jsonl).
    CANDIDATE is a .py file with ModelNew, or a solution.json (or its folder).
    """
    from ..verify.check import check as run_check

    report = run_check(reference, candidate, trials=trials, seed=seed, overrides=list(sets))
    out = Console(file=sys.stdout, highlight=False, width=max(Console().width, 140))
    out.print(_table(report))
    f = report.first_failure
    verdict = "[green]accepted[/]" if f is None else f"[red]rejected[/] ({f.code}: {f.message})"
    out.print(f"verdict: {verdict}")
    out.print(report.timing_line())
    out.print(f"{report.calls} candidate calls, {report.elapsed_s:.1f} s")
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    if f is not None:
        raise click.exceptions.Exit(1)
