"""``warpsmith tune OP --shape ...``: search an op's kernel space for one shape, verify the winner,
record it in the tuning DB (which makes dispatch use it), print the leaderboard.

Exit codes: 0 a verified winner was recorded; 1 the search ran but no finalist passed verification
(the JSON is still written); 2 unusable input (unknown op, dtype, axis, target or strategy; a
malformed or non-positive shape; ...).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..core.errors import InvalidInputError, VerificationError
from .common import check_suffix, handle_errors, quiet_interpreter


def _config_text(cfg: dict[str, Any]) -> str:
    short = {"BLOCK_M": "BM", "BLOCK_N": "BN", "BLOCK_K": "BK", "GROUP_M": "G", "num_warps": "w", "num_stages": "s",
             "SPLIT_K": "SK", "PROGRAMS_PER_SM": "P/SM", "PRECISION": "prec", "EVEN_K": "EVEN_K", "REDUCE": "red"}
    parts = []
    for k, v in cfg.items():
        if isinstance(v, bool):
            if v:
                parts.append(short.get(k, k))
        elif not (k == "PRECISION" and v == "ieee"):
            parts.append(f"{short.get(k, k)}={v}")
    return " ".join(parts)


TIE_REL = 1e-9  # times closer than this (relative) are a tie


def _tie_groups(board, rows: int) -> list[tuple[int, int]]:
    """(first index, count) of each run of equal times on ``board`` that starts among the first
    ``rows`` entries and has two or more members (counted over the whole board)."""
    groups, i = [], 0
    while i < min(rows, len(board)):
        j = i + 1
        while j < len(board) and abs(board[j].ms - board[i].ms) <= TIE_REL * abs(board[i].ms):
            j += 1
        if j - i > 1:
            groups.append((i, j - i))
        i = j
    return groups


def _tie_notes(result, rows: int = 10) -> list[str]:
    """One line per tie among the leaderboard's shown rows: the cost model (or the timer) cannot
    separate those configs, so their order is the search's, not a ranking."""
    what = "the cost model cannot separate them" if result.timing_kind == "predicted" else \
        "the measurements cannot separate them"
    notes = []
    for first, count in _tie_groups(result.leaderboard, rows):
        ranks = f"#{first + 1}-#{first + count}"
        us = result.leaderboard[first].ms * 1e3
        notes.append(f"note: {count} configs ({ranks}) tie at {us:.4g} µs ({result.timing_kind}): {what}; "
                     "they are listed, and verified, in the order the search found them")
    return notes


def _leaderboard(result, rows: int = 10) -> Table:
    kind = result.timing_kind
    tied = {i: first for first, count in _tie_groups(result.leaderboard, rows) for i in range(first, first + count)}
    table = Table(title=f"{result.problem.describe()} on {result.target.name} ({kind})")
    table.add_column("#", justify="right")
    table.add_column("variant")
    table.add_column("config")
    table.add_column(f"{kind} ms", justify="right")
    table.add_column("verification")
    rejected = {(r.score.variant, tuple(sorted(r.score.config.items()))): r.reason for r in result.rejected}
    for i, s in enumerate(result.leaderboard[:rows], 1):
        key = (s.variant, tuple(sorted(s.config.items())))
        if result.winner is s:
            status = "[green]accepted (winner)[/]"
        elif key in rejected:
            status = f"[red]rejected: {rejected[key]}[/]"
        else:
            status = "-"
        rank = f"={tied[i - 1] + 1}" if i - 1 in tied else str(i)  # "=1": tied for first
        table.add_row(rank, s.variant, _config_text(s.config), f"{s.ms:.4g}", status)
    return table


class _StageLog:
    """Stage lines on stderr, one per line: above the progress bar on a terminal, plain lines
    otherwise (a pipe, a log file, CI), where the bar does not render; the search's progress is then
    reported every quarter of the budget."""

    def __init__(self, console: Console, bar: Progress) -> None:
        self.console, self.bar, self.live = console, bar, console.is_terminal
        self.next_report = 0

    def __call__(self, line: str) -> None:
        if self.live:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            click.echo(line, err=True)

    def search(self, done: int, total: int, best) -> None:
        if self.live or done >= total or done < self.next_report:
            return
        self.next_report = done + max(1, -(-total // 4))
        self(f"search: {done}/{total} candidates evaluated"
             + (f", best so far {best.ms:.4g} ms ({best.variant})" if best else ""))


@click.command("tune")
@click.argument("op")
@click.option("--shape", required=True, help="Sizes, e.g. M=257,N=129,K=300 (add B=... for a batch).")
@click.option("--dtype", default="float16", show_default=True, help="float16 | bfloat16 | float32.")
@click.option("--target", default=None, help="Hardware model to predict for (default: this GPU, else $WARPSMITH_TARGET or h100).")
@click.option("--budget", default=64, show_default=True, type=int, help="Evaluations.")
@click.option("--time-budget", default=None, type=float, help="Seconds (stop searching after this long).")
@click.option("--strategy", default="evolutionary", show_default=True, help="random | evolutionary | pattern.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--attr", "attr_items", multiple=True, metavar="NAME=VALUE",
              help="An op attribute, repeatable (e.g. --attr reduction=sum); `warpsmith ops` lists each op's.")
@click.option("--bias", is_flag=True, help="matmul: add a bias vector (N,) in the epilogue (= --attr bias=True).")
@click.option("--activation", default=None, help="matmul: none | relu | gelu | silu (= --attr activation=...).")
@click.option("--layout", default=None, help="matmul: nn | tn | nt | tt, t: operand stored transposed (= --attr layout=...).")
@click.option("--allow-tf32", is_flag=True, help="matmul, fp32: accept tf32 products under a tf32 error contract.")
@click.option("--prove/--no-prove", default=True, show_default=True,
              help="Prove the finalists' kernels symbolically (memory safety, races, coverage) as part of verification.")
@click.option("--finalists", default=4, show_default=True, type=int, help="Candidates verified, best first.")
@click.option("--compiler-facts/--no-compiler-facts", default=True, show_default=True,
              help="Without a GPU: compile each evaluated candidate for the target's GPU (cached) and rank by "
                   "its real registers, spills, shared memory and pipelining.")
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Tuning database (default: $WARPSMITH_DB or <user cache>/warpsmith/tuning.db).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the result as JSON here.")
@click.option("--trace", "trace_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a Perfetto / Chrome trace-event JSON of the run (open it in ui.perfetto.dev): prescreen, "
                   "search, each candidate's compile (on the compile-only worker's track, or a compile thread's on a "
                   "GPU), prediction and measurement, each finalist's verification with its prove and test stages. "
                   "Span lengths are this machine's wall-clock times; candidate times are in their args.")
@handle_errors
def tune(op: str, shape: str, dtype: str, target: str | None, budget: int, time_budget: float | None,
         strategy: str, seed: int, attr_items: tuple[str, ...], bias: bool, activation: str | None, layout: str | None,
         allow_tf32: bool, prove: bool, finalists: int, compiler_facts: bool,
         db_path: Path | None, json_out: Path | None, trace_out: Path | None) -> None:
    """Search OP's kernel space for one shape, verify the winner, record it in the tuning DB."""
    from ..core.errors import UnknownNameError
    from ..db import TuningDB
    from ..ops import get_op
    from ..search.strategy import STRATEGIES
    from ..targets import get_target
    from ..tune import tune as run_tune

    spec = get_op(op)
    shortcuts = {"bias": bias or None, "activation": activation, "layout": layout, "allow_tf32": allow_tf32 or None}
    attrs = {**{k: v for k, v in shortcuts.items() if v is not None}, **spec.parse_attrs(attr_items)}
    problem = spec.problem(shape, dtype, attrs)
    if target is not None:
        get_target(target)
    if strategy not in STRATEGIES:
        raise UnknownNameError("strategy", strategy, list(STRATEGIES))
    if finalists < 1:
        raise InvalidInputError("--finalists", "a positive integer", finalists)
    check_suffix("--trace", trace_out, ".json")
    recorder = None
    if trace_out is not None:
        from ..profile.trace import TraceRecorder

        recorder = TraceRecorder(f"warpsmith tune {problem.describe()}", op=op, shape=shape, dtype=dtype,
                                 target=target, budget=budget, seed=seed)
    store = TuningDB(db_path)
    err = Console(file=sys.stderr, highlight=False)
    with Progress(TextColumn("[bold]tuning[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[best]}"), TimeElapsedColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as bar:
        task = bar.add_task(problem.describe(), total=budget, best="")
        log = _StageLog(err, bar)

        def progress(done: int, total: int, best) -> None:
            bar.update(task, completed=done, best=f"best {best.ms:.4f} ms ({best.variant})" if best else "")
            log.search(done, total, best)

        try:
            with quiet_interpreter():
                result = run_tune(problem, target=target, budget=budget, time_budget_s=time_budget, strategy=strategy,
                                  seed=seed, finalists=finalists, db=store, progress=progress, prove=prove,
                                  compiler_facts=compiler_facts, log=log, trace=recorder)
            failure = None
        except VerificationError as exc:
            result, failure = exc.result, exc
        finally:
            if recorder is not None:
                recorder.write(trace_out)
    out = Console(file=sys.stdout, highlight=False, width=max(Console().width, 160))
    out.print(_leaderboard(result))
    for note in _tie_notes(result):
        out.print(note, markup=False)
    doc = result.to_json()
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(doc, indent=2) + "\n")
    where = f"{store.path} (--db or WARPSMITH_DB to change)"
    if failure is not None:
        click.echo(f"rejected: {failure}", err=True)
        if result.rejected:
            click.echo(f"the rejected finalists are recorded (never dispatched) in {where}", err=True)
        raise click.exceptions.Exit(1)
    w = result.winner
    line = f"winner: {w.variant} {_config_text(w.config)} — {w.ms:.4g} ms {result.timing_kind} on {result.target.name}"
    if result.baseline_ms:
        line += f"; torch baseline {result.baseline_ms:.4g} ms ({result.baseline_ms / w.ms:.2f}x)"
    out.print(line)
    checks = ", ".join(f"{c.name}={c.status}" for c in result.certificate.checks)
    out.print(f"verified: {checks}")
    out.print(f"recorded as #{result.record_id} in {where}; {result.evaluations} evaluations, "
              f"{result.elapsed_s:.1f} s", markup=False)
