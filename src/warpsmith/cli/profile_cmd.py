"""``warpsmith profile OP --shape ...`` / ``warpsmith profile SOLUTION.py``: where the time of one op's
kernels, or of an emitted KernelBench program's kernel sequence, goes on a target, predicted.

The config is dispatch's default for the shape (or ``--variant``/``--config``); it is compiled for the
target's GPU by the compile-only worker (no GPU needed), its machine code counted and priced by the
static model, and reported beside the op's roofline and the analytic cost model: a table per kernel,
and on request a roofline PNG, a self-contained HTML page and a Perfetto trace of the kernel sequence.
A ``.py`` argument is a ``ModelNew`` file written by ``warpsmith solve``: it runs once in a compile-only
process (``warpsmith.profile.program``) and every kernel it launches is reported in order.

Exit codes: 0 success; 2 unusable input (unknown op, dtype, axis, target, variant; a malformed shape
or config; an output path with the wrong suffix).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ..core.errors import InvalidInputError
from .common import check_suffix, handle_errors, quiet_interpreter

_SUFFIX = {"--html": ".html", "--png": ".png", "--trace": ".json", "--json": ".json"}


def _parse_config(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        cfg = json.loads(text)
    except ValueError:
        cfg = None
    if not isinstance(cfg, dict):
        raise InvalidInputError("--config", 'a JSON object of knobs, e.g. \'{"BLOCK_M": 128, ...}\'', text)
    return cfg


@click.command("profile")
@click.argument("op", metavar="OP|SOLUTION.py", required=False)
@click.option("--shape", default=None, help="Sizes, e.g. M=4096,N=4096,K=4096 (required for an op).")
@click.option("--dtype", default="float16", show_default=True, help="float16 | bfloat16 | float32 (the op's dtypes).")
@click.option("--target", default=None,
              help="Hardware model to predict for (h100, h200, a100, ...; default: a record's target, else h200).")
@click.option("--attr", "attr_items", multiple=True, metavar="NAME=VALUE", help="An op attribute, repeatable.")
@click.option("--variant", default=None, help="Variant to profile (default: the one dispatch would run).")
@click.option("--config", "config_text", default=None, metavar="JSON",
              help="Config to profile, a JSON object (default: the variant's heuristic default).")
@click.option("--record", "record_id", type=int, default=None, metavar="ID",
              help="Profile tuning record ID (its op, shape, variant and config; its time if it was measured).")
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Tuning database of --record (default: $WARPSMITH_DB or <user cache>/warpsmith/tuning.db).")
@click.option("--compile/--no-compile", "do_compile", default=True, show_default=True,
              help="Compile the config for the target's GPU (compile-only, cached) and count its machine code; "
                   "--no-compile reports the analytic model alone.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a self-contained HTML page: the roofline (inline SVG) and the table.")
@click.option("--png", "png_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the roofline as a PNG.")
@click.option("--trace", "trace_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the kernel sequence as a Perfetto / Chrome trace-event JSON (predicted durations).")
@click.option("--ncu", "use_ncu", is_flag=True, default=False,
              help="On a GPU with Nsight Compute: run the config under ncu and add its measured metrics (time, DRAM "
                   "throughput, tensor-pipe utilization, warp stall reasons) to the table.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the profile as JSON.")
@handle_errors
def profile(op: str | None, shape: str | None, dtype: str, target: str | None, attr_items: tuple[str, ...],
            variant: str | None, config_text: str | None, record_id: int | None, db_path: Path | None, do_compile: bool, html_out: Path | None, png_out: Path | None,
            trace_out: Path | None, use_ncu: bool, json_out: Path | None) -> None:
    """Where OP's time goes on TARGET for one shape, kernel by kernel: predicted time, FLOPs, bytes,
    intensity, bound, speed-of-light %, registers, spills, occupancy, top instruction classes.

    With SOLUTION.py (a ModelNew file written by `warpsmith solve`) instead of an op: the program's
    kernels in launch order, their bytes those of their tensor arguments, their FLOPs the instructions'.
    With --record ID instead: a tuning record's config, and its time where a GPU measured it.

    Every figure is predicted (the static machine-code model, the roofline, the analytic cost model);
    on a machine without a GPU nothing is measured, and the report says so.
    """
    from ..profile import report, roofline
    from ..profile.trace import kernel_sequence
    from ..targets import get_target

    for option, path in (("--html", html_out), ("--png", png_out), ("--trace", trace_out), ("--json", json_out)):
        check_suffix(option, path, _SUFFIX[option])
    if use_ncu:
        from ..profile import ncu

        if op is not None and op.endswith(".py"):
            raise InvalidInputError("--ncu", "an op or --record (a solution file's kernels are not launched alone)", op)
        why = ncu.available()
        if why:
            raise InvalidInputError("--ncu", "a machine with an NVIDIA GPU and Nsight Compute's ncu on PATH", why)
    given = [o for o, v in (("--shape", shape), ("--attr", attr_items), ("--variant", variant),
                            ("--config", config_text)) if v]
    if record_id is not None:
        from ..db import TuningDB

        if op is not None or given:
            raise InvalidInputError(given[0] if given else "OP", "nothing besides --record (a record names its op, "
                                    "shape, variant and config)", op or "a value")
        rec = TuningDB(db_path).get(record_id)
        tgt = get_target(target or rec.target)
        prof = _profile_op(rec.op, dict(rec.shape), rec.dtype, tgt, dict(rec.attrs), rec.variant, dict(rec.config),
                           do_compile)
        if rec.timing_kind == "measured" and rec.target == tgt.name:
            prof.measured_ms, prof.measured_note = rec.time_ms, f"tuning record #{record_id}, measured on {rec.target}"
        elif rec.timing_kind == "measured":
            prof.measured_note = f"measured: record #{record_id} was timed on {rec.target}, not {tgt.name}"
        title = f"record #{record_id}: {prof.problem}"
        request = (rec.op, dict(rec.shape), rec.dtype, dict(rec.attrs))
    elif op is None:
        raise InvalidInputError("OP", "an op, a solution file (.py) or --record ID", None)
    elif op.endswith(".py"):
        from ..profile.program import profile_program

        tgt = get_target(target or "h200")
        if given:
            raise InvalidInputError(given[0], "no value with a solution file (its shapes are its own)", "a value")
        if not do_compile:
            raise InvalidInputError("--no-compile", "--compile with a solution file (its kernels must be compiled)",
                                    "--no-compile")
        prof = profile_program(Path(op), tgt)
        title = f"{Path(op).name}: emitted program"
    else:
        from ..ops import get_op

        tgt = get_target(target or "h200")
        if shape is None:
            raise InvalidInputError("--shape", "sizes for an op, e.g. M=4096,N=4096,K=4096", None)
        prof = _profile_op(op, shape, dtype, tgt, get_op(op).parse_attrs(attr_items), variant,
                           _parse_config(config_text), do_compile)
        title = f"{op} {shape} {dtype}: {prof.variant}"
        request = (op, shape, dtype, get_op(op).parse_attrs(attr_items))
    out = Console(file=sys.stdout, highlight=False, width=max(Console().width, 180))
    if use_ncu:
        kernels, dropped = ncu.run(ncu.request(*request, prof.variant, prof.config))
        missing = ncu.merge(prof.kernels, kernels)
        prof.ncu_note = ("ncu: Nsight Compute metrics measured on this GPU (last of 3 launches)"
                         + (f"; not seen by ncu: {', '.join(missing)}" if missing else "")
                         + (f"; metrics this ncu does not know: {', '.join(dropped)}" if dropped else ""))
    head = report.header(prof)
    for line in head:
        out.print(line, markup=False)
    out.print(report.table(prof.kernels, f"{prof.problem} on {tgt.name} (predicted)"))
    for line in report.notes(prof.kernels):
        out.print(line, markup=False)
    pts = roofline.points(prof.kernels) + roofline.measured_points(prof)
    if png_out is not None:
        out.print(f"roofline (predicted): {roofline.write_png(png_out, tgt, prof.math_kind, pts, title)}", markup=False)
    if html_out is not None:
        page = roofline.write_html(html_out, tgt, prof.math_kind, pts, title, report.html_table(prof.kernels, head))
        out.print(f"roofline page (predicted): {page}", markup=False)
    if trace_out is not None:
        out.print(f"trace (predicted kernel sequence): {kernel_sequence(prof.kernels).write(trace_out)}", markup=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report.to_json(prof), indent=2, default=str) + "\n")


def _profile_op(op: str, shape: Any, dtype: str, tgt: Any, attrs: dict[str, Any], variant: str | None,
                config: dict[str, Any] | None, do_compile: bool) -> Any:
    from ..core.errors import UnknownNameError
    from ..ops import get_op, variants
    from ..profile.collect import profile_op
    from ..targets.compiler import CompilerFacts

    spec = get_op(op)
    problem = spec.problem(shape, dtype, attrs)
    if variant is not None and variant not in variants(op):
        raise UnknownNameError(f"variant of {op}", variant, list(variants(op)))
    if config is not None:
        v = variants(op)[variant] if variant else next(iter(variants(op).values()))
        why = v.rejection(problem, config, tgt)
        if why:
            raise InvalidInputError("--config", f"a valid config of {v.name} for {problem.describe()}", f"{config} ({why})")
    facts = CompilerFacts(tgt) if do_compile else None
    try:
        with quiet_interpreter():
            return profile_op(problem, tgt, facts, config, variant)
    finally:
        if facts is not None:
            facts.close()
