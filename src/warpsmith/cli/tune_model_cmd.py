"""``warpsmith tune-model``: capture a model's problems for a list of sizes, tune them (on this machine's
process pool or a Ray cluster), record the winners, print the summary table.

Exit codes: 0 every captured problem has a verified record; 1 some failed (the summary says why; the
JSON is still written); 2 unusable input; 3 none failed but the time budget ran out before every
problem started (the run is incomplete: the skipped ones are listed; a re-run resumes).
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..core.errors import InvalidInputError
from ..measure.executor import EXECUTORS
from .common import check_suffix, handle_errors, quiet_interpreter

HF_FAMILIES = ("llama", "mistral", "qwen2")


def _load_model(hf: str | None, model: str | None, layers: int, hidden: int, dtype: str) -> tuple[Any, Any]:
    """The model and its example inputs: a tiny random Hugging Face model, or ``MODULE:FUNCTION``
    returning ``(model, example_inputs)``."""
    if (hf is None) == (model is None):
        raise InvalidInputError("model", "exactly one of --hf FAMILY or --model MODULE:FUNCTION",
                                f"--hf {hf!r} --model {model!r}")
    if hf is not None:
        from ..compiler.hf_models import batch, build

        import torch

        m = build(hf, layers=layers, hidden=hidden).to(getattr(torch, dtype))
        return m, {"input_ids": batch(hf, m, batch_size=1, seq=8)["input_ids"]}
    mod, _, fn = model.partition(":")
    if not mod or not fn:
        raise InvalidInputError("--model", "MODULE:FUNCTION (a function returning (model, example_inputs))", model)
    try:
        made = getattr(importlib.import_module(mod), fn)()
    except (ImportError, AttributeError) as e:
        raise InvalidInputError("--model", "an importable MODULE:FUNCTION", f"{model} ({e})") from e
    if not (isinstance(made, tuple) and len(made) == 2):
        raise InvalidInputError("--model's function result", "a (model, example_inputs) pair", type(made).__name__)
    return made


@click.command("tune-model")
@click.option("--hf", type=click.Choice(HF_FAMILIES), default=None,
              help="A tiny randomly initialized Hugging Face model of this family (nothing is downloaded).")
@click.option("--layers", type=click.IntRange(1), default=1, show_default=True, help="Layers of the --hf model.")
@click.option("--hidden", type=click.IntRange(8), default=32, show_default=True, help="Hidden size of the --hf model.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True,
              help="The --hf model's parameter dtype.")
@click.option("--model", "model_ref", default=None, metavar="MODULE:FUNCTION",
              help="A function returning (model, example_inputs), instead of --hf.")
@click.option("--sizes", default=None, metavar="BxS,...",
              help="Leading dims of the inputs to capture with, e.g. 1x8,4x64 (batch x sequence).")
@click.option("--target", default=None, help="Hardware model (default: this device, or WARPSMITH_TARGET).")
@click.option("--budget", type=click.IntRange(1), default=16, show_default=True, help="Evaluations per problem.")
@click.option("--time-budget", "time_budget", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds for the whole run: shared by predicted share of the step; once spent, no new "
                   "problem starts (those left are reported skipped; exit 3).")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
              help="local: a process pool here; ray: Ray tasks (--address, or a local Ray started here).")
@click.option("--address", default=None, help="The Ray cluster's address (with --executor ray; 'auto': this node's).")
@click.option("--workers", type=click.IntRange(1), default=None, help="Processes of the local pool (CPUs of a local Ray).")
@click.option("--attempts", type=click.IntRange(1), default=3, show_default=True,
              help="Tries per problem when its worker or node is lost.")
@click.option("--compiler-facts/--no-compiler-facts", default=False, show_default=True,
              help="Without a GPU: compile each candidate for the target's GPU (compile-only) and rank with those facts.")
@click.option("--generated-kernels/--no-generated-kernels", "generated_kernels", default=False, show_default=True,
              help="Also run the model through torch.compile with warpsmith's backend and rank the generated kernels "
                   "(the backend's configs, predicted; not tuned, not stored).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Tuning database file (default: $WARPSMITH_DB or the user cache).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report as JSON here.")
@handle_errors
def tune_model_cmd(hf: str | None, layers: int, hidden: int, dtype: str, model_ref: str | None, sizes: str | None,
                   target: str | None, budget: int, time_budget: float | None, executor: str, address: str | None,
                   workers: int | None, attempts: int, compiler_facts: bool, generated_kernels: bool, seed: int, db_path: Path | None, json_out: Path | None) -> None:
    """Tune every warpsmith problem a model's forward runs, by predicted share of the step."""
    from ..db import TuningDB
    from ..modeltune import sizes_arg, tune_model

    check_suffix("--json", json_out, ".json")
    size_list = sizes_arg(sizes) if sizes is not None else None
    model, inputs = _load_model(hf, model_ref, layers, hidden, dtype)
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bars:
        task = bars.add_task("capturing the model", total=None)

        def progress(event: str, item: Any) -> None:
            if event == "captured":
                bars.update(task, description="tuning problems", total=len(item.problems))
            else:
                bars.update(task, advance=1, description=f"{item.problem.op} {item.status}")

        with quiet_interpreter():
            report = tune_model(model, inputs, sizes=size_list, target=target, budget=budget,
                                time_budget_s=time_budget, executor=executor, address=address, workers=workers,
                                attempts=attempts, db=TuningDB(db_path), seed=seed,
                                compiler_facts=compiler_facts, generated_kernels=generated_kernels,
                                progress=progress)
    click.echo(report.table())
    for line in report.graphs:
        click.echo(f"torch.compile graph: {line}")
    if generated_kernels:
        click.echo(f"{len(report.generated)} generated kernels: the launch configs warpsmith's torch.compile backend "
                   "emitted (the compiler's defaults) and their predicted times; not tuned, not stored in the DB")
    failed = [m for m in report.problems if m.status == "failed"]
    for m in failed:
        click.echo(f"failed: {m.problem.describe()} after {m.attempts} tries: {m.reason}")
    skipped = report.skipped
    for m in skipped:
        click.echo(f"skipped: {m.problem.describe()}: {m.reason}")
    click.echo(f"{len(report.problems)} problems, {len(failed)} failed, {len(skipped)} skipped; times "
               f"{report.timing_kind} for {report.target}; executor {report.executor}; {report.elapsed_s:.1f} s")
    if json_out is not None:
        json_out.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if failed:
        raise click.exceptions.Exit(1)
    if skipped:
        click.echo(f"incomplete: the time budget ran out before {len(skipped)} problems started "
                   "(a re-run resumes)", err=True)
        raise click.exceptions.Exit(3)
