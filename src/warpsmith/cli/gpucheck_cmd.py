"""``warpsmith gpucheck``: compile every library kernel for a GPU target, with no GPU."""
from __future__ import annotations

from pathlib import Path

import click

from .common import handle_errors


@click.command()
@click.option("--target", default="h200", show_default=True,
              help="Hardware model whose architecture to compile for: h100, h200 (sm_90), a100 (sm_80), "
                   "b200 (sm_100), mi300x (gfx942).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write every config with its kernels' registers, spills, shared memory and pipelining.")
@click.option("--ops", default="", help="Comma-separated ops (default: every op).")
@click.option("--dtypes", default="", help="Comma-separated dtypes (default: each op's).")
@click.option("--sample", default=2, show_default=True, type=click.IntRange(0, 1000),
              help="Configs drawn from each variant's space per problem, besides the default.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--quiet", is_flag=True, help="No progress line per config.")
@handle_errors
def gpucheck(target: str, json_out: Path | None, ops: str, dtypes: str, sample: int, seed: int, quiet: bool) -> None:
    """Compile every library kernel for TARGET's GPU through its real launchers; nothing runs.

    Each op's variants are compiled at their default config and SAMPLE configs of their space,
    on a set of problems per op and every dtype, each launched twice. Reports registers, spills,
    shared memory and pipelining per kernel. Exit 1 on a compile error, a launch-time failure,
    shared memory or registers over the target's limits, a grid over the launch limits, or a
    spill in a default config; 2 on unusable input.
    """
    from ..gpucheck import PROBLEMS, spawn
    from ..core.dtypes import parse_dtype
    from ..ops import get_op
    from ..targets import get_target

    get_target(target)  # unknown names fail here, with the list
    for op in filter(None, ops.split(",")):
        get_op(op)
        if op not in PROBLEMS:
            raise click.UsageError(f"op {op} has no gpucheck problems (expected one of {', '.join(PROBLEMS)})")
    for dt in filter(None, dtypes.split(",")):
        parse_dtype(dt)
    args = ["--sample", str(sample), "--seed", str(seed)]
    for flag, value in (("--ops", ops), ("--dtypes", dtypes), ("--json", str(json_out or ""))):
        if value:
            args += [flag, value]
    if quiet:
        args.append("--quiet")
    rc = spawn(target, args).returncode
    if rc:
        raise click.exceptions.Exit(1 if rc == 1 else rc)
