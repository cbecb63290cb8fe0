"""``warpsmith prove FILE.py``: discharge every obligation of the kernels a file declares."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .common import handle_errors


@click.command()
@click.argument("file", metavar="FILE")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write every obligation with its status as JSON.")
@click.option("--timeout-ms", default=3000, show_default=True, type=int, help="Solver time per obligation.")
@click.option("--solution", is_flag=True, help="FILE is a program `warpsmith solve` wrote (a ModelNew .py, a "
              "program module, or a solution.json): prove its generated kernels' launch contracts.")
@handle_errors
def prove(file: str, json_out: Path | None, timeout_ms: int, solution: bool) -> None:
    """Prove memory safety, race freedom, coverage and split coverage of FILE's kernels.

    FILE is a .py file (or a module name) defining CONTRACTS (see `warpsmith.verify.symbolic.contract`),
    or, with --solution, a file `warpsmith solve` emitted (its contracts are built from its launch
    table and kernel text: `warpsmith.compiler.contracts`).
    Exit 0 only if every obligation is proved; 1 otherwise; 2 on an unusable file.
    """
    if solution:
        return _solution(file, json_out, timeout_ms)
    from ..verify.symbolic import prove as run
    from ..verify.symbolic.load import load_contracts

    reports = [r for c in load_contracts(file) for r in run(c, timeout_ms=timeout_ms)]
    table = Table(title=f"proof obligations of {file}")
    for col in ("kernel", "constexprs", "obligation", "subject", "status", "detail"):
        table.add_column(col, overflow="fold")
    for r in reports:
        consts = " ".join(f"{k}={v}" for k, v in r.constexprs.items() if k.isupper() and k not in ("EMULATE", "IS_FP32"))
        for o in r.obligations:
            color = {"proved": "green", "failed": "red"}.get(o.status.split("(")[0], "yellow")
            detail = o.detail if o.counterexample is None else f"{o.detail}; counterexample {o.counterexample}"
            table.add_row(r.contract, consts, o.name, o.subject, f"[{color}]{o.status}[/]", detail)
    Console(file=sys.stdout, width=200).print(table)
    total = [o for r in reports for o in r.obligations]
    proved = sum(o.status == "proved" for o in total)
    failed = sum(o.status == "failed" for o in total)
    click.echo(f"{proved} of {len(total)} obligations proved, {failed} failed, "
               f"{len(total) - proved - failed} bounded or unknown")
    if json_out is not None:
        json_out.write_text(json.dumps({"file": file, "reports": [r.to_json() for r in reports]}, indent=2) + "\n")
    if proved != len(total):
        raise click.exceptions.Exit(1)


def _solution(file: str, json_out: Path | None, timeout_ms: int) -> None:
    from ..compiler.proofs import prove_file

    programs = prove_file(file, timeout_ms)
    table = Table(title=f"generated kernels of {file}")
    for col in ("file", "kernel", "obligation", "subject", "status", "detail"):
        table.add_column(col, overflow="fold")
    for p in programs:
        for k in p.kernels:
            for o in k.obligations:
                color = {"proved": "green", "failed": "red"}.get(o.status.split("(")[0], "yellow")
                detail = o.detail if o.counterexample is None else f"{o.detail}; counterexample {o.counterexample}"
                table.add_row(p.file, f"{k.kernel} ({k.kind})", o.name, o.subject, f"[{color}]{o.status}[/]", detail)
    Console(file=sys.stdout, width=200).print(table)
    total = [o for p in programs for o in p.obligations]
    proved = sum(o.status == "proved" for o in total)
    failed = sum(o.status == "failed" for o in total)
    for p in programs:
        click.echo(f"{p.file}: {p.summary()}")
    if json_out is not None:
        json_out.write_text(json.dumps({"file": file, "programs": [p.to_json() for p in programs]}, indent=2) + "\n")
    if not total or proved != len(total) or failed:
        raise click.exceptions.Exit(1)
