"""``warpsmith db``: inspect, export and import the tuning database.

The main CLI attaches this group with ``cli.add_command(db)``. Every
subcommand takes ``--db PATH`` (default: ``$WARPSMITH_DB`` or the user cache).
Errors print one ``error: ...`` line to stderr and exit with code 2.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from ..db import TuningDB
from .common import handle_errors as _handle_errors

F = TypeVar("F", bound=Callable[..., Any])

_db_option = click.option(
    "--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Tuning database file (default: $WARPSMITH_DB or <user cache>/warpsmith/tuning.db).",
)
_filters = [
    click.option("--op", default=None, help="Only records of this op."),
    click.option("--target", default=None, help="Only records for this hardware model."),
    click.option("--dtype", default=None, help="Only records of this dtype."),
]


def _with_filters(f: F) -> F:
    for option in reversed(_filters):
        f = option(f)
    return f


@click.group("db")
def db() -> None:
    """Inspect, export and import the tuning database."""


@db.command("list")
@_db_option
@_with_filters
@_handle_errors
def list_cmd(db_path: Path | None, op: str | None, target: str | None, dtype: str | None) -> None:
    """List stored records as a table."""
    store = TuningDB(db_path)
    records = store.list(op=op, target=target, dtype=dtype)
    if not records:
        click.echo(f"no records in {store.path}")
        return
    table = Table(title=str(store.path))
    for name, justify in (("id", "right"), ("op", "left"), ("variant", "left"), ("shape", "left"),
                          ("dtype", "left"), ("target", "left"), ("timing", "left"), ("time ms", "right"),
                          ("verified", "left"), ("created", "left")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in records:
        shape = ",".join(f"{k}={v}" for k, v in sorted(r.shape.items()))
        table.add_row(str(r.id), r.op, r.variant, shape, r.dtype, r.target, r.timing_kind,
                      f"{r.time_ms:.4g}", "yes" if r.verified else "no", r.created)
    console = Console(file=sys.stdout, highlight=False)
    if not console.is_terminal:
        console = Console(file=sys.stdout, highlight=False, width=max(console.width, 200))
    console.print(table)


@db.command("failures")
@_db_option
@click.option("--op", default=None, help="Only failures of this op.")
@click.option("--target", default=None, help="Only failures for this hardware model.")
@click.option("--json", "as_json", is_flag=True, help="Print the failures as a JSON list.")
@_handle_errors
def failures_cmd(db_path: Path | None, op: str | None, target: str | None, as_json: bool) -> None:
    """List the problems whose tuning failed (``tune-model`` records them; a later verified record of
    the same problem clears its failure)."""
    store = TuningDB(db_path)
    found = store.failures(op=op, target=target)
    if as_json:
        click.echo(json.dumps([f.to_json() for f in found], indent=2))
        return
    if not found:
        click.echo(f"no failures in {store.path}")
        return
    for f in found:
        shape = ",".join(f"{k}={v}" for k, v in sorted(f.shape.items()))
        click.echo(f"{f.id}: {f.op} {shape} {f.dtype} {json.dumps(f.attrs, sort_keys=True)} on {f.target}: "
                   f"{f.reason} ({f.attempts} tries, executor {f.executor}, node "
                   f"{f.provenance.get('node') or f.provenance.get('recorded_by', '?')}, {f.created})")


@db.command("show")
@click.argument("record_id", metavar="ID", type=int)
@_db_option
@_handle_errors
def show_cmd(record_id: int, db_path: Path | None) -> None:
    """Print record ID as JSON."""
    click.echo(json.dumps(TuningDB(db_path).get(record_id).to_json(), indent=2))


@db.command("export")
@click.argument("out", metavar="OUT")
@_db_option
@_with_filters
@_handle_errors
def export_cmd(out: str, db_path: Path | None, op: str | None, target: str | None, dtype: str | None) -> None:
    """Write records to OUT as JSON (``-`` for stdout)."""
    store = TuningDB(db_path)
    records = store.list(op=op, target=target, dtype=dtype)
    if out == "-":
        store.export(click.get_text_stream("stdout"), records)
        click.echo(f"exported {len(records)} records", err=True)
    else:
        n = store.export(out, records)
        click.echo(f"exported {n} records from {store.path} to {out}")


@db.command("import")
@click.argument("file", metavar="FILE")
@_db_option
@click.option("--allow-unverified", is_flag=True, help="Accept records that were not verified.")
@_handle_errors
def import_cmd(file: str, db_path: Path | None, allow_unverified: bool) -> None:
    """Add the records of FILE (written by ``db export``; ``-`` for stdin), all or nothing."""
    store = TuningDB(db_path)
    source: Any = click.get_text_stream("stdin") if file == "-" else file
    n = store.import_(source, allow_unverified=allow_unverified)
    click.echo(f"imported {n} new records into {store.path}")


@db.command("merge")
@click.argument("file", metavar="FILE")
@_db_option
@click.option("--no-reverify", "no_reverify", is_flag=True,
              help="Only check that each certificate matches its record; do not re-run the verifier here.")
@_handle_errors
def merge_cmd(file: str, db_path: Path | None, no_reverify: bool) -> None:
    """Merge another machine's export FILE: keep the best verified record per key (problem, GPU model,
    software versions); refuse records whose certificate does not re-verify here."""
    from ..fleet import merge

    store = TuningDB(db_path)
    source: Any = click.get_text_stream("stdin") if file == "-" else file
    rep = merge(store, source, reverify_configs=not no_reverify)
    for i, why in rep.refused:
        click.echo(f"refused record {i}: {why}")
    click.echo(f"merged into {store.path}: {rep.added} added, {rep.not_better} no better than one held, "
               f"{len(rep.refused)} refused")
    if rep.refused:
        raise click.exceptions.Exit(1)


@db.group("ranker")
def ranker_group() -> None:
    """The learned ranker: gradient-boosted trees trained on the DB's *measured* records, one per target.

    It is saved beside the database (``<db stem>.ranker.<target>.json``); ``warpsmith tune`` uses it to
    prescreen candidates when one exists (``WARPSMITH_RANKER=0`` turns that off)."""


@ranker_group.command("train")
@click.option("--target", required=True, help="Hardware model whose measured records train it (e.g. h200).")
@_db_option
@click.option("--backend", type=click.Choice(["numpy", "xgboost"]), default="numpy", show_default=True,
              help="The trees: warpsmith's own numpy implementation, or xgboost where it is installed.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--analytic-feature", is_flag=True,
              help="Stacked ranker: the analytic cost model's log prediction is one more feature "
                   "(the target stays measured).")
@click.option("--facts", "use_facts", is_flag=True,
              help="The compiler's facts are features (only records carrying them train it; see docs/cli.md).")
@click.option("--eval/--no-eval", "do_eval", default=True, show_default=True,
              help="Also report held-out (leave one problem shape out) Spearman of the ranker and the analytic model.")
@_handle_errors
def ranker_train_cmd(target: str, db_path: Path | None, backend: str, seed: int, analytic_feature: bool,
                     use_facts: bool, do_eval: bool) -> None:
    """Train (or retrain) the ranker of TARGET on the database's measured records and save it."""
    from ..core.errors import WarpsmithError
    from .. import ranker as rk

    if backend == "xgboost" and not rk.xgboost_available():
        raise WarpsmithError("the xgboost backend needs `import xgboost` to work (it is optional); use --backend numpy")
    store = TuningDB(db_path)
    try:
        r, rep = rk.train_from_db(store, target, backend=backend, seed=seed, analytic=analytic_feature,
                                  facts=use_facts, evaluate_heldout=do_eval)
    except ValueError as e:
        raise WarpsmithError(str(e)) from None
    click.echo(f"trained the {target} ranker on {r.trained_on['samples']} measured records "
               f"({r.trained_on['groups']} problem shapes; target {rk.TRAINING_TARGET}); "
               f"saved to {rk.ranker_path(store.path, target)}")
    if rep is not None:
        click.echo(rk.summary_line(rep))
    elif do_eval:
        click.echo("held-out evaluation: needs records of at least 2 problem shapes")
    ok, why = r.gate()
    click.echo(f"prescreen: {'uses it' if ok else 'does not use it'} ({why})")


@ranker_group.command("show")
@click.option("--target", required=True, help="Hardware model of the ranker.")
@_db_option
@_handle_errors
def ranker_show_cmd(target: str, db_path: Path | None) -> None:
    """Print what the ranker of TARGET was trained on, as JSON (not its trees)."""
    from ..core.errors import WarpsmithError
    from .. import ranker as rk

    store = TuningDB(db_path)
    path = rk.ranker_path(store.path, target)
    if not path.exists():
        raise WarpsmithError(f"no ranker for {target} at {path} (train one with `warpsmith db ranker train "
                             f"--target {target}`); the prescreen is off")
    r = rk.Ranker.load(path)
    ok, why = r.gate()
    click.echo(json.dumps({"path": str(path), "target": r.target, "training_target": rk.TRAINING_TARGET,
                           "prescreen": {"uses_it": ok, "why": why},
                           "trained_on": r.trained_on, "features": r.featurizer.names,
                           "model": r.model.to_json()["kind"], "trees": len(getattr(r.model, "trees", []))}, indent=2))


@db.group("moves")
def moves_group() -> None:
    """The learned prior over rewrite moves: gradient-boosted trees trained on the moves the compiler's
    search over rewrite sequences evaluated (``<db stem>.moves.jsonl`` beside the database, appended by
    ``warpsmith solve``; outcomes are the program cost model's *predictions*), one prior per target.

    It is saved beside the database (``<db stem>.moves-prior.<target>.json``); ``warpsmith solve`` orders
    the search's moves by it when one exists (``WARPSMITH_MOVE_PRIOR=0`` turns that off)."""


def _moves_file(store: TuningDB) -> Path:
    from ..compiler import move_prior as mp

    path = mp.moves_path(store.path)
    if not path.exists():
        from ..core.errors import WarpsmithError

        raise WarpsmithError(f"no move records at {path} (`warpsmith solve` appends them there when the tuning DB "
                             "exists; benchmarks/move_prior.py collects them on a set of problems)")
    return path


@moves_group.command("train")
@click.option("--target", required=True, help="Hardware model whose moves train it (e.g. h100).")
@_db_option
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--eval/--no-eval", "do_eval", default=True, show_default=True,
              help="Also report held-out (leave one problem out) Spearman of the prior and of the margin order.")
@_handle_errors
def moves_train_cmd(target: str, db_path: Path | None, seed: int, do_eval: bool) -> None:
    """Train (or retrain) the move prior of TARGET on the moves beside the database and save it."""
    from ..compiler import move_prior as mp

    store = TuningDB(db_path)
    _moves_file(store)
    p, rep = mp.train_from_file(store.path, target, seed=seed, evaluate_heldout=do_eval)
    click.echo(f"trained the {target} move prior on {p.trained_on['records']} moves of {p.trained_on['problems']} "
               f"problems (target {mp.TRAINING_TARGET}, predicted by the program cost model); saved to "
               f"{mp.prior_path(store.path, target)}")
    if rep is not None:
        click.echo(mp.summary_line(rep))
    elif do_eval:
        click.echo(f"held-out evaluation: needs at least {mp.MIN_RECORDS} moves of at least 2 problems")


@moves_group.command("show")
@click.option("--target", required=True, help="Hardware model of the prior.")
@_db_option
@_handle_errors
def moves_show_cmd(target: str, db_path: Path | None) -> None:
    """Print what the move prior of TARGET was trained on, as JSON (not its trees)."""
    from ..compiler import move_prior as mp
    from ..core.errors import WarpsmithError

    store = TuningDB(db_path)
    path = mp.prior_path(store.path, target)
    if not path.exists():
        raise WarpsmithError(f"no move prior for {target} at {path} (train one with `warpsmith db moves train "
                             f"--target {target}`); the search orders moves by the cost model's margins")
    p = mp.MovePrior.load(path)
    click.echo(json.dumps({"path": str(path), "target": p.target, "training_target": mp.TRAINING_TARGET,
                           "timing_kind": mp.TIMING_KIND, "used": mp.enabled() and p.gate()[0],
                           "gate": p.gate()[1], "trained_on": p.trained_on,
                           "features": p.featurizer.names, "trees": len(p.model.trees)}, indent=2))


@moves_group.command("evaluate")
@click.option("--target", required=True, help="Hardware model whose moves are evaluated.")
@_db_option
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the whole evaluation as JSON.")
@_handle_errors
def moves_evaluate_cmd(target: str, db_path: Path | None, seed: int, as_json: bool) -> None:
    """Held out by problem: Spearman of the prior's predicted outcome and of the margin order against
    the realised (predicted) outcome of each move, pooled and per held-out problem. Saves nothing."""
    from ..compiler import move_prior as mp

    store = TuningDB(db_path)
    rep = mp.evaluate(mp.read_moves(_moves_file(store)), target, seed=seed)
    if as_json:
        click.echo(json.dumps(rep, indent=2))
        return
    click.echo(mp.summary_line(rep))
    for name, row in rep["within_problem"].items():
        click.echo(f"  {name}: {row['moves']} moves, prior {row['prior']:+.3f}, margin {row['margin']:+.3f}")
