"""Nsight Compute metrics merged into `warpsmith profile`'s table (``--ncu``), on a GPU with ``ncu``.

:func:`run` launches the profiled config in a child process under ``ncu --csv`` with a small metric
set (:data:`METRICS`: the kernel's duration, DRAM throughput, tensor-pipe utilization, the main warp
stall reasons; those ``ncu --query-metrics`` does not list for the GPU are left out and named), :func:`parse_csv` reads ncu's CSV (one row per kernel launch and metric), and
:func:`merge` puts each kernel's last launch (after the warm-ups) beside its predicted row, marked
measured. The child is ``python -m warpsmith.profile.ncu REQUEST_JSON``: it builds the problem and
launches the variant's config three times. Not yet run on a GPU (none here); the parser is tested
on a hand-written CSV in ncu's format.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..core.errors import InvalidInputError, WarpsmithError

# ncu metric -> the table's name for it
METRICS = {
    "gpu__time_duration.sum": "time",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe % (GMMA)",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe % (HMMA)",
    **{f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": f"stall {r}"
       for r in ("long_scoreboard", "barrier", "mio_throttle", "math_pipe_throttle", "wait", "short_scoreboard")},
}
_TIME_UNITS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}


@dataclass
class NcuKernel:
    """One kernel launch as ncu measured it: ``metrics`` by the table's names (``time`` in ms)."""

    launch: int
    name: str
    metrics: dict[str, float] = field(default_factory=dict)


def available() -> str | None:
    """Why ``--ncu`` cannot run here (None: it can)."""
    import torch

    if not torch.cuda.is_available():
        return "no GPU here (torch.cuda.is_available() is False)"
    if shutil.which("ncu") is None:
        return "no ncu (Nsight Compute) on PATH"
    return None


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_csv(text: str) -> list[NcuKernel]:
    """ncu's ``--csv`` output (its ``==PROF==`` and program lines skipped): one :class:`NcuKernel` per
    launch, in launch order, with the metrics of :data:`METRICS` it reported."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise WarpsmithError("ncu output has no CSV header (a line starting with \"ID\"): "
                             + (" | ".join(lines[-3:]) or "empty output"))
    out: dict[int, NcuKernel] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        metric = row.get("Metric Name")
        if metric not in METRICS or not (row.get("ID") or "").strip().isdigit():
            continue
        value = _number(row.get("Metric Value", ""))
        if value is None:
            continue
        if METRICS[metric] == "time":
            value *= _TIME_UNITS.get(row.get("Metric Unit", "nsecond"), 1e-6)
        k = out.setdefault(int(row["ID"]), NcuKernel(int(row["ID"]), row.get("Kernel Name", "?")))
        k.metrics[METRICS[metric]] = value
    return [out[i] for i in sorted(out)]


def _base(name: str) -> str:
    """A kernel's name without its C++ signature: ``matmul_kernel(float*, ...)`` -> ``matmul_kernel``."""
    return name.split("(", 1)[0].strip()


def merge(rows: Sequence[Any], kernels: Sequence[NcuKernel]) -> list[str]:
    """Put each row's kernel's last measured launch (``KernelRow.ncu``); the names of rows ncu did not see."""
    last = {_base(k.name): k for k in kernels}
    missing = []
    for r in rows:
        k = last.get(r.name)
        if k is None:
            missing.append(r.name)
        else:
            r.ncu = dict(k.metrics)
    return missing


def request(op: str, shape: Mapping[str, int], dtype: str, attrs: Mapping[str, Any], variant: str,
            config: Mapping[str, Any]) -> dict[str, Any]:
    return {"op": op, "shape": dict(shape), "dtype": dtype, "attrs": dict(attrs), "variant": variant,
            "config": dict(config)}


def supported(metrics: Sequence[str], query: str) -> tuple[list[str], list[str]]:
    """``metrics`` split into those whose base name (before the first ``.``) ``ncu --query-metrics``
    lists for this GPU (``query``: its output, one metric a line, its name first) and the others."""
    names = {line.split()[0] for line in query.splitlines() if line.strip()}
    keep = [m for m in metrics if m.split(".", 1)[0] in names]
    return keep, [m for m in metrics if m not in keep]


def run(req: Mapping[str, Any], timeout_s: float = 300.0) -> tuple[list[NcuKernel], list[str]]:
    """The config of ``req`` launched under ncu in a child process: its kernels' metrics, and the metrics
    of :data:`METRICS` this GPU's ncu does not know (left out rather than failing the run)."""
    why = available()
    if why:
        raise InvalidInputError("--ncu", "a machine with an NVIDIA GPU and Nsight Compute's ncu on PATH", why)
    query = subprocess.run(["ncu", "--query-metrics"], capture_output=True, text=True, timeout=120)
    keep, dropped = supported(list(METRICS), query.stdout) if query.returncode == 0 else (list(METRICS), [])
    if not keep:
        raise WarpsmithError(f"ncu --query-metrics lists none of {', '.join(METRICS)}")
    cmd = ["ncu", "--csv", "--metrics", ",".join(keep), "--target-processes", "all",
           sys.executable, "-m", "warpsmith.profile.ncu", json.dumps(req)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise WarpsmithError(f"ncu exited {res.returncode}: {(res.stderr or res.stdout)[-2000:]}")
    return parse_csv(res.stdout), dropped


def _child(req: Mapping[str, Any]) -> None:
    """Launch the request's config three times on the GPU (ncu profiles every launch)."""
    import torch

    from ..ops import get_op, variants

    spec = get_op(req["op"])
    problem = spec.problem(req["shape"], req["dtype"], req["attrs"])
    v = variants(req["op"])[req["variant"]]
    inputs = spec.make_inputs(problem, torch.Generator().manual_seed(0), device="cuda")
    for _ in range(3):
        v.launch(inputs, problem, req["config"])
    torch.cuda.synchronize()


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
