"""What ``warpsmith profile`` reports about one op and shape on one target: the kernels the chosen
config launches, each priced by the static machine-code model, beside the op's roofline and the
analytic cost model.

The config is the one dispatch runs without a tuning record (the op's first variant whose heuristic
default accepts the problem, ``core.registry.default_variant``), or one given. FLOPs and bytes of
the main kernel are the op's own (``OpSpec.flops``/``min_bytes``); a helper kernel (a split-K
reduction, say) gets the FLOPs and global bytes its instructions do. Every time is *predicted*
unless a GPU timed it (``measured_ms``; ``measured_note`` says why not).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ..core.opspec import Problem
from ..core.registry import default_variant
from ..cost import predict_ms
from ..cost.roofline import math_kind, roofline
from ..cost.static_sass import StaticPrediction, occupancy, predict, predict_config
from ..ops import get_op, variants as op_variants
from ..targets import KernelFacts, Target, measures
from ..targets.compiler import CompilerFacts, SassCounts

NO_GPU = "measured: not available without a GPU"


@dataclass
class KernelRow:
    """One kernel of the profiled config (times predicted unless ``measured_ms`` is set)."""

    name: str
    grid: tuple[int, ...] | None
    predicted_ms: float | None
    flops: float
    bytes: float
    counted_from: str  # where flops and bytes come from: "op definition" | "machine code" | "launch arguments"
    bound: str | None
    sol: float | None
    regs: int | None
    spill_bytes: int | None
    smem_bytes: int | None
    occupancy: int | None
    num_warps: int | None
    top_classes: list[tuple[str, int]] = field(default_factory=list)
    unit_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ncu: dict[str, float] = field(default_factory=dict)  # Nsight Compute's metrics, measured (``--ncu``)

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte."""
        return self.flops / self.bytes if self.bytes else None


@dataclass
class Profile:
    """An op, shape and config on a target, kernel by kernel."""

    op: str
    problem: str
    target: Target
    variant: str
    config: dict[str, Any]
    flops: float
    bytes: float
    math_kind: str
    roofline_ms: float
    analytic_ms: float | None
    kernels: list[KernelRow]
    static_note: str | None = None  # why the machine code could not be counted, if it could not
    measured_ms: float | None = None
    measured_note: str = NO_GPU
    timing: str = "predicted"
    source: str = "op definition"  # where ``flops`` and ``bytes`` come from
    ncu_note: str | None = None  # what Nsight Compute measured (``--ncu``), if it ran

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["target"] = self.target.name
        doc["target_provenance"] = self.target.provenance
        for k, row in zip(doc["kernels"], self.kernels):
            k["intensity"] = row.intensity
        return doc


def kernel_row(facts: KernelFacts, sass: SassCounts | None, target: Target, flops: float | None,
               nbytes: float | None, floor_ms: float | None = None, counted_from: str = "op definition",
               out_bytes: float | None = None, pred: StaticPrediction | None = None) -> KernelRow:
    """One kernel's row: the static model's prediction where its machine code was counted (``pred`` where
    the caller priced it already). ``flops`` and ``nbytes`` (where known, from ``counted_from``) set loop
    trips, HBM bytes and the point on the roofline; where None, the instructions' own FLOPs and global
    bytes stand in."""
    notes: list[str] = []
    if pred is None and sass is not None and target.throughput is not None:
        pred = predict(sass, facts, target, flops, nbytes, floor_ms, out_bytes)
    if pred is not None:
        notes += pred.notes
    elif sass is None:
        notes.append("no machine code (not an NVIDIA kernel)")
    else:
        notes.append(f"no instruction-rate table for {target.name}")
    # the classes one program executes most (loops at their inferred trips), else the static counts
    counts = pred.executed if pred else (sass.classes if sass else {})
    top = [(k, round(n)) for k, n in sorted(counts.items(), key=lambda kv: -kv[1])[:5]]
    own_f = flops if flops is not None else (pred.flops if pred else 0.0)
    own_b = nbytes if nbytes is not None else (pred.global_bytes if pred else 0.0)
    source = counted_from if flops is not None and nbytes is not None else (
        "machine code" if flops is None and nbytes is None else f"{counted_from} / machine code")
    return KernelRow(
        name=facts.name, grid=facts.grid, predicted_ms=pred.ms if pred else None, flops=own_f, bytes=own_b,
        counted_from=source, bound=pred.bound if pred else None,
        sol=pred.sol if pred else None, regs=facts.regs, spill_bytes=facts.spill_bytes, smem_bytes=facts.smem_bytes,
        occupancy=occupancy(facts, target), num_warps=facts.num_warps, top_classes=top,
        unit_ms=pred.unit_ms if pred else {}, notes=notes)


def profile_op(problem: Problem, target: Target, facts: CompilerFacts | None = None,
               config: Mapping[str, Any] | None = None, variant: str | None = None) -> Profile:
    """Profile ``problem`` on ``target`` at ``config`` of ``variant`` (default: dispatch's default).

    ``facts`` compiles the config for the target's GPU and counts its machine code (a
    :class:`CompilerFacts`; None: the analytic model alone, one row for the whole op)."""
    spec = get_op(problem.op)
    vs = op_variants(problem.op)
    v = vs[variant] if variant else default_variant(problem, vs, target)
    cfg = dict(config) if config is not None else v.default_config(problem, target)
    rl = roofline(spec, problem, target)
    flops, nbytes = spec.flops(problem), spec.min_bytes(problem)
    got = facts.sass(v, problem, cfg) if facts is not None else None
    note = None
    if facts is None:
        note = "machine code not counted (no compile-only worker asked)"
    elif got is None:
        note = f"machine code not counted: {facts.error or facts.failed or 'the config did not compile'}"
    analytic = predict_ms(v, problem, cfg, target, got[0] if got else None)
    if got:
        preds = predict_config(spec, problem, got[0].kernels, got[1], target)
        rows = [kernel_row(k, s, target, flops if i == 0 else None, nbytes if i == 0 else None, pred=pr)
                for i, (k, s, pr) in enumerate(zip(got[0].kernels, got[1], preds))]
    else:
        rows = [KernelRow(name=f"{v.name} (all kernels)", grid=None, predicted_ms=analytic, flops=flops, bytes=nbytes,
                          counted_from="op definition", bound=rl.limiter, sol=(rl.bound_ms / analytic if analytic else None),
                          regs=None, spill_bytes=None, smem_bytes=None, occupancy=None, num_warps=None,
                          notes=["analytic cost model: no machine code"])]
    prof = Profile(problem.op, problem.describe(), target, v.name, cfg, flops, nbytes, math_kind(problem.dtype),
                   rl.bound_ms, analytic, rows, note)
    if measures(target):
        prof.measured_ms, prof.measured_note = measure_ms(problem, v, cfg)
    return prof


def measure_ms(problem: Problem, variant: Any, config: Mapping[str, Any]) -> tuple[float | None, str]:
    """The config's median time on this machine's GPU (``measure.timing.time_gpu``, device events, L2
    flushed), or None and why not. Not yet run on a GPU by its tests (none here)."""
    import torch

    if not torch.cuda.is_available():
        return None, NO_GPU
    from ..measure.timing import time_gpu

    spec = get_op(problem.op)
    inputs = spec.make_inputs(problem, torch.Generator().manual_seed(0), device="cuda")
    ms = time_gpu(lambda x: variant.launch(x, problem, config), [inputs]).median_ms
    return ms, "measured: CUDA events, median, L2 flushed"
