"""``warpsmith check REFERENCE CANDIDATE``: run the hardened harness on any implementation.

Exit codes: 0 accepted; 1 rejected (the report names the reason code; a run that did not reach its end
is a rejection too); 3 accepted, but the machine did not allow the candidate's isolation (the report's
``protocol.isolation`` says what was missing: see :mod:`warpsmith.check.isolation`); 2 unusable input
(unreadable or malformed files, unsupported format features, unknown ``--set`` names, or a
reference that raises on its own inputs or differs from itself: ``reference_error``,
``reference_nondeterministic``). The ``--json`` report is removed when the run starts and written
last, by this process, after the candidate's processes are dead.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .common import fail, handle_errors


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
@click.option("--workloads", default=None, metavar="I,J|LABEL,..",
              help="Check only these workloads (indices from 0, or labels such as uuids); default all.")
@click.option("--budget", "budget_s", type=float, default=None, metavar="SECONDS",
              help="Start no new workload after this many seconds; the verdict states what was covered.")
@click.option("--timeout", "call_timeout_s", type=float, default=300.0, show_default=True, metavar="SECONDS",
              help="Deadline of each candidate call (its process is killed with SIGKILL after it).")
@click.option("--eval", "eval_mode", is_flag=True, help="Put Model and ModelNew in eval mode (e.g. dropout).")
@click.option("--cpu-cap", type=click.IntRange(min=1), default=None, metavar="N",
              help="FlashInfer-Bench/SOL-ExecBench: on a CPU, set every axis above N to N (consts too, unless the "
                   "reference refuses them); the verdict line states it. Not applied on a GPU (full sizes).")
@handle_errors
def check(reference: Path, candidate: Path, json_out: Path | None, trials: int | None, seed: int,
          sets: tuple[str, ...], workloads: str | None, budget_s: float | None, call_timeout_s: float,
          eval_mode: bool, cpu_cap: int | None) -> None:
    """Check CANDIDATE against REFERENCE with a harness built to resist gaming.

    REFERENCE is a KernelBench .py file (Model, get_inputs, get_init_inputs) or a
    FlashInfer-Bench/SOL-ExecBench problem folder (definition.json, workload.jsonl).
    CANDIDATE is a .py file with ModelNew, or a solution.json (or its folder).
    """
    from ..check import check as run_check
    from ..check.hardened import ReferenceUnusable

    if json_out is not None and json_out.exists():
        json_out.unlink()  # a killed run leaves no earlier report behind
    progress = lambda line: click.echo(line, err=True)  # noqa: E731
    try:
        report = run_check(reference, candidate, trials=trials, seed=seed, overrides=list(sets),
                           workloads=[workloads] if workloads else None, budget_s=budget_s,
                           call_timeout_s=call_timeout_s, eval_mode=eval_mode, progress=progress,
                           cpu_cap=cpu_cap)
    except ReferenceUnusable as e:
        if json_out is not None:
            _write(json_out, {"verdict": "unusable", "reason": e.reason, "message": str(e)})
        raise fail(f"{e.reason}: {e}") from None
    out = Console(file=sys.stdout, highlight=False, width=max(Console().width, 140))
    out.print(_table(report))
    f = report.first_failure
    if report.accepted:
        verdict = "[green]accepted[/]"
        if not report.isolated:
            missing = "; ".join((report.protocol.get("isolation") or {}).get("missing") or []) or "unknown"
            verdict += f" [yellow]without isolation ({missing}): exit status 3[/]"
    else:
        verdict = f"[red]rejected[/] ({f.code}: {f.message})" if f else "[red]rejected[/]"
    out.print(f"verdict: {verdict}")
    out.print(report.coverage_line)
    out.print(report.timing_line())
    out.print(f"{report.calls} candidate calls, {report.elapsed_s:.1f} s")
    if json_out is not None:
        _write(json_out, report.to_json())
    status = report.exit_status()  # the one place the verdict is decided (CheckReport.accepted)
    if status:
        raise click.exceptions.Exit(status)


def _write(path: Path, doc: dict) -> None:
    """Atomically, through a new file of an unpredictable name (created exclusively, never through a link
    planted in advance): a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
