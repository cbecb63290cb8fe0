"""``warpsmith.tune_model(model, example_inputs)``: tune every kernel a model's forward runs.

1. **Capture.** The model (a Hugging Face Llama, Mistral or Qwen2 is first patched with
   :func:`warpsmith.patch`, in place, so its norms, gated MLP and RoPE run warpsmith ops) runs once per
   size on CPU, with no gradients. Every problem warpsmith's dispatch is asked about is recorded
   (:func:`warpsmith.dispatch.recording`), and so is every ATen matrix product (``mm``, ``addmm``,
   ``bmm``: the projections, as the ``matmul`` problems ``warpsmith.ops.matmul`` and the compiler's
   library calls dispatch). Attention through PyTorch's fused SDPA kernel is not captured. With
   ``generated_kernels=True`` the model also runs through ``torch.compile`` with warpsmith's backend,
   and every compiled graph's generated kernels join the ranking (:mod:`warpsmith.modelkernels`:
   their configs are the backend's config search's, predicted, not tuned again here).
2. **Rank.** Problems are de-duplicated (op, shape, dtype, key attributes) with their number of calls,
   and ordered by their predicted share of the step: calls x the cost model's time of the heuristic
   default config for the target.
3. **Tune.** One job per problem runs the whole tuner (:func:`warpsmith.tune.tune`: search, verify)
   on an executor (:mod:`warpsmith.measure.executor`: a local process pool, or Ray). Problems with a
   verified record of their exact shape in the DB are skipped (a re-run resumes). The records come
   back to this process and are written to the local DB, each certificate carrying its provenance
   (node, GPU, driver, versions, executor, tries); a failed problem goes to the DB's failures table.
   With a time budget, no problem starts after its deadline (``skipped``, reason ``"time budget"``).
4. **Report.** :class:`ModelTuneReport`: per problem its share, the default's and the tuned config's
   time and the gain, and the step's gain (all predicted without a GPU).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch

from .core.errors import InvalidInputError, VerificationError, WarpsmithError
from .core.opspec import Problem
from .core.registry import default_variant
from .db import FailureRecord, TuningDB, TuningRecord, shape_key
from .dispatch import recording
from .measure import Evaluator
from .measure.executor import LocalExecutor, Outcome, RayExecutor, make_executor, node_name
from .modelkernels import GeneratedKernel, generated_kernels as generated
from .ops import get_op, variants as op_variants
from .targets import current_device, get_target, measures
from .tune import records_of, tune

_MATMULS = ("mm.default", "addmm.default", "bmm.default")


@dataclass
class ModelProblem:
    """One distinct problem of the model: how often a step calls it and its predicted share."""

    problem: Problem
    calls: int
    default_ms: float  # the heuristic default config's time (cost model: predicted)
    share: float = 0.0
    status: str = "pending"  # tuned | resumed | failed | skipped (time budget) | pending
    tuned_ms: float | None = None
    variant: str | None = None
    reason: str = ""
    attempts: int = 0
    lost: list[str] = field(default_factory=list)

    @property
    def gain(self) -> float | None:
        return self.default_ms / self.tuned_ms if self.tuned_ms and math.isfinite(self.default_ms) else None

    def to_json(self) -> dict[str, Any]:
        p = self.problem
        return {"op": p.op, "shape": dict(p.shape), "dtype": p.dtype_name, "attrs": dict(p.key_attrs),
                "calls": self.calls, "share": self.share, "default_ms": self.default_ms, "tuned_ms": self.tuned_ms,
                "gain": self.gain, "variant": self.variant, "status": self.status, "reason": self.reason,
                "attempts": self.attempts, "lost": list(self.lost)}


@dataclass
class ModelTuneReport:
    """What :func:`tune_model` found and did; ``timing_kind`` says whether times are measured or predicted."""

    target: str
    timing_kind: str
    executor: str
    problems: list[ModelProblem]
    elapsed_s: float = 0.0
    generated: list[GeneratedKernel] = field(default_factory=list)  # with generated_kernels=True
    graphs: list[str] = field(default_factory=list)  # the compiled graphs' summaries (generated_kernels=True)

    def step_ms(self, tuned: bool) -> float:
        """The step's time over the captured problems that have a default (those without one are left
        out of both sums): default configs, or tuned ones where tuned."""
        return (sum(p.calls * ((p.tuned_ms or p.default_ms) if tuned else p.default_ms)
                    for p in self.problems if math.isfinite(p.default_ms))
                + sum(k.calls * k.predicted_ms for k in self.generated))

    @property
    def skipped(self) -> list[ModelProblem]:
        """The problems not started because the time budget was spent."""
        return [p for p in self.problems if p.status == "skipped"]

    @property
    def step_gain(self) -> float:
        after = self.step_ms(tuned=True)
        return self.step_ms(tuned=False) / after if after else 1.0

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "timing_kind": self.timing_kind, "executor": self.executor,
                "elapsed_s": round(self.elapsed_s, 2), "complete": not self.skipped, "step_default_ms": self.step_ms(False),
                "step_tuned_ms": self.step_ms(True), "step_gain": self.step_gain,
                "problems": [p.to_json() for p in self.problems],
                "generated_kernels": [k.to_json() for k in self.generated], "graphs": list(self.graphs)}

    def table(self) -> str:
        """The summary as a Markdown table (times in microseconds, as the cost model or timer gave them)."""
        k = self.timing_kind
        lines = [f"| op | shape | dtype | calls | share of step | default µs ({k}) | tuned µs ({k}) | gain | status |",
                 "|---|---|---|---:|---:|---:|---:|---:|---|"]
        rows = [(p.share, 0, i, p) for i, p in enumerate(self.problems)]
        rows += [(k.share, 1, i, k) for i, k in enumerate(self.generated)]
        for _, _, _, p in sorted(rows, key=lambda r: (-r[0], r[1], r[2])):
            if isinstance(p, GeneratedKernel):  # the backend's config: not tuned here
                reads = " ".join("x".join(map(str, s)) for s in p.reads)
                lines.append(f"| generated: {'+'.join(p.ops)} | {reads} | {p.dtype} | {p.calls} | {p.share:.1%} | "
                             f"{p.predicted_ms * 1e3:.2f} | - | - | generated |")
                continue
            tuned = f"{p.tuned_ms * 1e3:.2f}" if p.tuned_ms else "-"
            gain = f"{p.gain:.2f}x" if p.gain else "-"
            lines.append(f"| {p.problem.op} | {shape_key(p.problem.shape)} | {p.problem.dtype_name} | {p.calls} | "
                         f"{p.share:.1%} | {p.default_ms * 1e3:.2f} | {tuned} | {gain} | {p.status} |")
        lines.append(f"| **step** | | | | 100% | {self.step_ms(False) * 1e3:.2f} | {self.step_ms(True) * 1e3:.2f} | "
                     f"{self.step_gain:.2f}x | |")
        return "\n".join(lines)


class _AtenMatmuls(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the matmul problem of every ATen ``mm``/``addmm``/``bmm`` run inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Problem] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        name = f"{func._opname}.{func._overloadname}" if func.namespace == "aten" else ""
        if name in _MATMULS:
            from .ops.matmul.op import problem_of

            bias, (a, b) = (args[0], args[1:3]) if name.startswith("addmm") else (None, args[:2])
            if a.dtype in (torch.float16, torch.bfloat16, torch.float32):
                self.seen.append(problem_of(a, b, bias, "none"))
        return func(*args, **(kwargs or {}))


def _runs(example_inputs: Any, sizes: Sequence[Sequence[int]] | None) -> list[Any]:
    """The inputs of one forward per size (``example_inputs`` itself when ``sizes`` is None)."""
    gen = torch.Generator().manual_seed(0)
    out = []
    for size in (list(sizes) if sizes else [None]):
        if size is not None and (not size or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in size)):
            raise InvalidInputError("sizes", "tuples of positive integers, e.g. (batch, sequence)", size)
        out.append(_resized(example_inputs, tuple(size) if size else None, gen))
    return out


def _resized(inputs: Any, size: tuple[int, ...] | None, gen: torch.Generator) -> Any:
    """``inputs`` with every tensor's leading dims set to ``size`` (fresh values: integers within the
    original's range, floats standard normal); unchanged when ``size`` is None."""
    if size is None:
        return inputs
    if isinstance(inputs, torch.Tensor):
        if inputs.dim() < len(size):
            raise InvalidInputError("sizes", f"at most {inputs.dim()} leading dims for an input of shape "
                                    f"{tuple(inputs.shape)}", size)
        shape = (*size, *inputs.shape[len(size):])
        if inputs.dtype.is_floating_point:
            return torch.randn(shape, generator=gen, dtype=inputs.dtype)
        lo, hi = int(inputs.min()), int(inputs.max())
        return torch.randint(lo, hi + 1, shape, generator=gen, dtype=inputs.dtype)
    if isinstance(inputs, Mapping):
        return {k: _resized(v, size, gen) for k, v in inputs.items()}
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(_resized(v, size, gen) for v in inputs)
    return inputs


def capture(model: torch.nn.Module, example_inputs: Any,
            sizes: Sequence[Sequence[int]] | None = None) -> list[tuple[Problem, int]]:
    """The distinct problems one forward of ``model`` runs for each size, with their total calls.

    Args:
        model: a ``torch.nn.Module`` (a Hugging Face Llama, Mistral or Qwen2 is patched in place).
        example_inputs: a tensor, a tuple of positional inputs, or a dict of keyword inputs.
        sizes: leading dims to run with, e.g. ``[(1, 128), (8, 2048)]`` for (batch, sequence); each
            tensor input gets them as its first dims (fresh values). None: ``example_inputs`` as given.
    """
    if not isinstance(model, torch.nn.Module):
        raise InvalidInputError("model", "a torch.nn.Module", type(model).__name__)
    from .patching import FAMILIES, patch

    if type(model).__name__.lower().startswith(tuple(FAMILIES)):
        patch(model, loss=None)
    counts: dict[tuple, list[Any]] = {}
    for inputs in _runs(example_inputs, sizes):
        with torch.no_grad(), recording() as dispatched, _AtenMatmuls() as aten:
            if isinstance(inputs, Mapping):
                model(**inputs)
            elif isinstance(inputs, tuple):
                model(*inputs)
            else:
                model(inputs)
        for p in dispatched + aten.seen:
            key = (p.op, tuple(sorted(p.shape.items())), p.dtype_name, tuple(sorted(p.key_attrs.items())))
            counts.setdefault(key, [p, 0])[1] += 1
    return [(p, n) for p, n in counts.values()]


def default_ms(problem: Problem, target: str) -> float:
    """The cost model's time for ``problem`` with its heuristic default config on ``target`` (infinite
    when no variant's default runs it)."""
    tgt = get_target(target)
    variants = op_variants(problem.op)
    try:
        v = default_variant(problem, variants, tgt)
    except WarpsmithError:
        return math.inf  # no default runs it: share 0, the search may still find a config
    ev = Evaluator(get_op(problem.op), problem, variants, tgt, measured=False)
    return ev.predict({"variant": v.name, **v.default_config(problem, tgt)}).predicted_ms


TIME_BUDGET = "time budget"  # the reason of a problem skipped because the run's time budget was spent


def tune_job(job: dict[str, Any]) -> dict[str, Any]:
    """One executor job: the whole tuner for one problem; returns its records (JSON) and provenance.
    Runs in a worker process (local pool or Ray task), so it takes and returns plain data.

    A job with a ``deadline`` (wall-clock seconds since the epoch, ``time.time()``) that starts at or
    after it does nothing and returns ``{"skipped": "time budget"}``; one that starts before it
    gives its search at most the time left."""
    deadline = job.get("deadline")
    if deadline is not None and time.time() >= deadline:
        return {"skipped": TIME_BUDGET}
    problem = get_op(job["op"]).problem(job["shape"], job["dtype"], job["attrs"])
    error = None
    limit = job["time_budget_s"]
    if deadline is not None:
        left = max(1.0, deadline - time.time())
        limit = left if limit is None else min(limit, left)
    # numpy's warnings from kernels under Triton's interpreter (the verifier's NaN/Inf inputs), as the CLI hides them
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    try:
        result = tune(problem, target=job["target"], budget=job["budget"], time_budget_s=limit,
                      seed=job["seed"], verify_trials=job["verify_trials"], prove=job["prove"], ranker=False,
                      compiler_facts=job.get("compiler_facts", False))
    except VerificationError as e:
        result, error = e.result, str(e)
    dev = current_device()
    from .targets import versions
    from .targets.detect import driver_version

    provenance = {"node": node_name(), "device": dev.name, "gpu": dev.name if dev.measured else None,
                  "driver": driver_version(), "versions": versions()}
    records = [r.to_json() for r in records_of(result)] if result is not None else []
    return {"records": records, "provenance": provenance, "error": error}


def _done(db: TuningDB, p: Problem, target: str) -> Any:
    """The verified record of exactly ``p``'s shape already in ``db`` (fresh source), or None."""
    vs = op_variants(p.op)
    best = db.best(p.op, dict(p.shape), p.dtype_name, p.key_attrs, target, {n: v.source_hash() for n, v in vs.items()})
    return best if best is not None and shape_key(best.shape) == shape_key(p.shape) else None


def tune_model(model: torch.nn.Module, example_inputs: Any, *, sizes: Sequence[Sequence[int]] | None = None,
               target: str | None = None, budget: int = 16, time_budget_s: float | None = None,
               executor: str | LocalExecutor | RayExecutor = "local", address: str | None = None,
               workers: int | None = None, attempts: int = 3, db: TuningDB | None = None, seed: int = 0,
               verify_trials: int = 1, prove: bool = False, compiler_facts: bool = False,
               generated_kernels: bool = False, progress: Callable[[str, Any], None] | None = None,
               worker_fn: Callable[[dict[str, Any]], dict[str, Any]] = tune_job) -> ModelTuneReport:
    """Capture ``model``'s problems, rank them by predicted share of the step, tune them, record the winners.

    Args:
        model, example_inputs, sizes: as :func:`capture`.
        target: the hardware model (default: this machine's device, or ``WARPSMITH_TARGET``).
        budget: evaluations per problem.
        time_budget_s: seconds for the whole call (capture included). Each problem's search gets
            its share of the step of it (at least 1 s; its first batch runs regardless) and no more
            than what is left; once it is spent, no new problem starts: those not started are
            reported ``skipped`` with the reason ``"time budget"`` (problems run in ranked order, so
            the largest shares go first; a problem already running finishes its search).
        executor: "local" (a process pool, the default), "ray", or an executor instance (then
            ``address``, ``workers`` and ``attempts`` are its own, not these).
        address: the Ray cluster (``ray``; None starts a local one).
        workers: processes of the local pool (CPUs of a local Ray cluster).
        attempts: tries per problem when a worker is lost.
        db: where records go (default: the settings' DB); problems with a verified record are skipped.
        verify_trials, prove, compiler_facts: as :func:`warpsmith.tune.tune` (``compiler_facts``: without
            a GPU, each candidate is compiled for the target's GPU in a compile-only worker and the cost
            model uses those facts).
        generated_kernels: also run the model through ``torch.compile`` with warpsmith's backend at
            each size and rank its generated kernels with the problems (:mod:`warpsmith.modelkernels`):
            each with the launch config the backend emitted (its config search's choice, on the cost
            model) and its predicted time; nothing is measured or written to the DB for them.
        progress: called with ``("captured", the report)`` once the problems are ranked, then
            ``("done", its ModelProblem)`` as each problem ends (tuned, resumed or failed).
        worker_fn: what each job runs (default :func:`tune_job`; a wrapper may add instrumentation).

    Returns:
        A :class:`ModelTuneReport`; failures are in it with their reason, not raised.
    """
    t0 = time.perf_counter()
    deadline = None if time_budget_s is None else time.time() + time_budget_s
    if budget < 1:
        raise InvalidInputError("budget", "a positive number of evaluations per problem", budget)
    if time_budget_s is not None and time_budget_s <= 0:
        raise InvalidInputError("time budget", "a positive number of seconds", time_budget_s)
    tgt = get_target(target) if target else current_device().target
    db = db if db is not None else TuningDB()
    ex = executor if not isinstance(executor, str) else make_executor(executor, address=address, workers=workers,
                                                                      attempts=attempts)
    found = [ModelProblem(p, n, default_ms(p, tgt.name)) for p, n in capture(model, example_inputs, sizes)]
    gen, graphs = generated(model, _runs(example_inputs, sizes), tgt.name) if generated_kernels else ([], [])
    total = (sum(m.calls * m.default_ms for m in found if math.isfinite(m.default_ms))
             + sum(k.calls * k.predicted_ms for k in gen)) or 1.0
    for m in found:
        m.share = m.calls * m.default_ms / total if math.isfinite(m.default_ms) else 0.0
    for k in gen:
        k.share = k.calls * k.predicted_ms / total
    found.sort(key=lambda m: -m.share)
    gen.sort(key=lambda k: -k.share)
    report = ModelTuneReport(tgt.name, "measured" if measures(tgt) else "predicted", ex.name, found, 0.0, gen, graphs)
    if progress:
        progress("captured", report)
    jobs, todo = [], []
    for m in found:
        rec = _done(db, m.problem, tgt.name)
        if rec is not None:
            m.status, m.tuned_ms, m.variant = "resumed", rec.time_ms, rec.variant
            if progress:
                progress("done", m)
            continue
        p = m.problem
        if deadline is not None and time.time() >= deadline:  # spent before the jobs were sent
            m.status, m.reason = "skipped", TIME_BUDGET
            if progress:
                progress("done", m)
            continue
        jobs.append({"op": p.op, "shape": dict(p.shape), "dtype": p.dtype_name, "attrs": dict(p.attrs),
                     "target": tgt.name, "budget": budget, "seed": seed, "verify_trials": verify_trials,
                     "prove": prove, "compiler_facts": compiler_facts, "gpus": report.timing_kind == "measured",
                     "time_budget_s": None if time_budget_s is None else max(1.0, time_budget_s * m.share),
                     "deadline": deadline})
        todo.append(m)
    for out in ex.run(worker_fn, jobs) if jobs else ():
        _merge(db, todo[out.index], out, ex.name, tgt.name)
        if progress:
            progress("done", todo[out.index])
    report.elapsed_s = time.perf_counter() - t0
    return report


def _merge(db: TuningDB, m: ModelProblem, out: Outcome, executor: str, target: str) -> None:
    """Write one job's records into ``db`` with their provenance (a failure into its failures table),
    and note the outcome on ``m``."""
    m.attempts, m.lost = out.attempts, list(out.lost)
    if out.ok and isinstance(out.result, dict) and out.result.get("skipped"):
        m.status, m.reason, m.attempts = "skipped", str(out.result["skipped"]), 0
        return
    if not out.ok:
        m.status, m.reason = "failed", out.error or "?"
        _record_failure(db, m, executor, target, {})
        return
    prov = {**out.result["provenance"], "executor": executor, "attempts": out.attempts, "lost": list(out.lost)}
    for data in out.result["records"]:
        rec = TuningRecord.from_json(data)
        rec.certificate = {**(rec.certificate or {}), "provenance": prov}
        if rec.verified:
            db.put(rec)
            m.status, m.tuned_ms, m.variant = "tuned", rec.time_ms, rec.variant
        else:
            db.put(rec, allow_unverified=True)
    if m.status != "tuned":
        m.status, m.reason = "failed", out.result.get("error") or "no verified record"
        _record_failure(db, m, executor, target, out.result["provenance"])


def _record_failure(db: TuningDB, m: ModelProblem, executor: str, target: str, worker: Mapping[str, Any]) -> None:
    """Store ``m``'s failure in ``db``'s failures table: the worker's provenance when it returned
    (``node``, GPU, versions), the node that recorded it, and why earlier tries were lost."""
    p = m.problem
    prov = {**worker, "recorded_by": node_name(), "lost": list(m.lost)}
    db.put_failure(FailureRecord(p.op, dict(p.shape), p.dtype_name, dict(p.key_attrs), target,
                                 m.reason, m.attempts, executor, prov))


def sizes_arg(text: str) -> list[tuple[int, ...]]:
    """Parse ``"1x8,2x16"`` into ``[(1, 8), (2, 16)]`` (the CLI's ``--sizes``)."""
    out = []
    for part in filter(None, (s.strip() for s in text.split(","))):
        try:
            dims = tuple(int(d) for d in part.lower().split("x"))
        except ValueError:
            dims = ()
        if not dims or any(d < 1 for d in dims):
            raise InvalidInputError("sizes", "comma-separated BATCHxSEQ sizes of positive integers, e.g. 1x8,2x16", text)
        out.append(dims)
    if not out:
        raise InvalidInputError("sizes", "at least one BATCHxSEQ size, e.g. 1x8", text)
    return out

