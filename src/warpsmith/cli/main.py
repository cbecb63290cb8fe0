"""``warpsmith``: tune, inspect the environment, manage the tuning database.

Exit codes: 0 success; 1 the work ran but its result was rejected (no finalist verified);
2 unusable input (unknown op, dtype, axis or target; malformed or non-positive shape; ...).
"""
from __future__ import annotations

import json

import click

from .check_cmd import check
from .common import fail
from .db_cmd import db
from .gpucheck_cmd import gpucheck
from .numerics_cmd import numerics
from .profile_cmd import profile
from .prove_cmd import prove
from .solve_cmd import solve
from .tune_cmd import tune
from .tune_model_cmd import tune_model_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="warpsmith")
def cli() -> None:
    """Search-based GPU kernel compiler with verified results."""


cli.add_command(check)
cli.add_command(db)
cli.add_command(gpucheck)
cli.add_command(numerics)
cli.add_command(profile)
cli.add_command(prove)
cli.add_command(solve)
cli.add_command(tune)
cli.add_command(tune_model_cmd)


@cli.command()
def ops() -> None:
    """The ops that can be tuned: axes, dtypes, attributes and variants."""
    from ..core.opspec import Scalar
    from ..ops import OPS, variants

    for name, spec in OPS.items():
        axes = ", ".join(f"{a.name}{'?' if a.optional else ''} ({a.doc})" for a in spec.axes)
        click.echo(f"{name}: variants {', '.join(variants(name))}")
        click.echo(f"  axes: {axes}")
        click.echo(f"  dtypes: {', '.join(str(d).replace('torch.', '') for d in spec.dtypes)}")
        for k, c in spec.attr_choices.items():
            text = str(c) if isinstance(c, Scalar) else "|".join(map(str, c))
            click.echo(f"  --attr {k}={text} (default {c.default if isinstance(c, Scalar) else c[0]})")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def env(as_json: bool) -> None:
    """Device, hardware model, tool versions and the tuning DB path."""
    from ..core.settings import settings
    from ..targets import current_device, versions

    dev = current_device()
    doc = {"device": dev.name, "kind": dev.kind, "timing": "measured" if dev.measured else "predicted",
           "target": dev.target.to_json(), "versions": versions(), "db": str(settings().db_path)}
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    t = dev.target
    click.echo(f"device:   {dev.name} [{dev.kind}]")
    click.echo(f"timing:   {doc['timing']}" + ("" if dev.measured else " (no GPU: kernels run under Triton's interpreter)"))
    click.echo(f"target:   {t.name} ({t.sms} SMs, {t.hbm_tbps} TB/s, bf16 {t.peak('bf16'):g} TFLOP/s"
               f"{', approximate' if t.approximate else ''})")
    click.echo("versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items() if v))
    click.echo(f"db:       {doc['db']}")


def main() -> None:
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:
        raise fail("interrupted") from None


if __name__ == "__main__":
    main()
