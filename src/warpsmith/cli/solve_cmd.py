"""``warpsmith solve PROBLEM``: compile a problem into a verified, self-contained solution.

PROBLEM is a KernelBench ``.py`` file (-> a ``ModelNew`` file), or a SOL-ExecBench /
FlashInfer-Bench problem folder or its ``definition.json`` (-> a ``solution.json`` with inline
sources; :mod:`warpsmith.compiler.solexec`).

Exit codes: 0 the program was verified by ``warpsmith check`` (and written to ``-o``); 1 it was
rejected by the check or by a failed proof obligation of a generated kernel, or ``--strict`` refused
its ATen fallbacks (nothing written to ``-o``);
2 unusable input (the file does not import, lacks Model/get_inputs/get_init_inputs, its model or
inputs cannot be built, or its forward cannot be captured; a definition, workload or reference
the check's loader or the compiler refuses); nothing written;
3 ``--timeout`` expired: the solve stopped (the check's processes ended), nothing written to ``-o``,
and the ``--json`` report is partial: ``status`` ``timeout`` and ``stopped`` (the stage, the candidate
i of n, the check calls made, the seconds), with the candidates rejected before.

Progress (stage, candidate i/n, check calls) goes to stderr, one line per event (on a terminal the
check's calls update one line); ``--quiet`` prints none of it.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from .common import handle_errors, quiet_interpreter


@click.command()
@click.argument("problem", type=click.Path(path_type=Path))
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the verified ModelNew file (or solution.json) here, only if the check accepts it.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report (kernels, what each fuses, library calls, fallbacks, check verdict).")
@click.option("--explain", is_flag=True, help="Print the graph IR, the lowering and the kernels.")
@click.option("--strict", is_flag=True, help="Refuse (exit 1) a program that needs any ATen fallback.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the model's weights, the check's draws and the searches' move orders (library tuning, rewrite sequences).")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="Rewrite a top-level size constant of PROBLEM before it runs (repeatable); the program "
                   "is compiled and checked at those sizes.")
@click.option("--greedy", is_flag=True, help="Greedy fusion, no search (the baseline the search reports its gain over).")
@click.option("--target", default="h100", show_default=True, help="The GPU model the search's cost model ranks for.")
@click.option("--workloads", multiple=True, metavar="I,J|LABEL,..",
              help="SOL-ExecBench/FlashInfer-Bench: compile and check only these workloads (indices from 0, or "
                   "labels); default all. The solution raises on the signatures of the others.")
@click.option("--schema", type=click.Choice(["sol-execbench", "flashinfer-bench"]), default=None,
              help="SOL-ExecBench/FlashInfer-Bench: the solution.json spec to write, spec.languages (SOL-ExecBench, "
                   "the default) or spec.language (FlashInfer-Bench).")
@click.option("--prove/--no-prove", default=True, show_default=True,
              help="Prove the launch contract of every generated kernel (a failed obligation rejects the program).")
@click.option("--prove-timeout-ms", type=int, default=None, metavar="MS",
              help="Solver budget per obligation (deterministic z3 units; default 2000).")
@click.option("--candidates", type=click.IntRange(min=1), default=3, show_default=True,
              help="Programs verified at most, best predicted first: a rejected one is replaced by the search's "
                   "next partition, and the report lists what it failed.")
@click.option("--cpu-cap", type=click.IntRange(min=1), default=None, metavar="N",
              help="SOL-ExecBench/FlashInfer-Bench: on a CPU, set every axis above N to N (consts too, unless the "
                   "reference refuses them) so that GPU-sized workloads compile and check under Triton's "
                   "interpreter; stated in the report. Not applied on a GPU (full sizes).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Stop after SECONDS: the check's processes are ended, --json gets a partial report saying the "
                   "stage and candidate where it stopped, and the exit status is 3.")
@click.option("--budget", "budget", type=click.IntRange(min=0), default=None, metavar="N",
              help="Predicted evaluations per library call (GEMMs, softmax, rms_norm/layer_norm, attention, conv, pooling) whose "
                   "config the tuning DB lacks: tuned during the solve with the tuner's search and cost model, emitted in its "
                   "launcher call, and written to the tuning DB once the program is accepted and the tuner's "
                   "verifier passes it (default 24; 0: the launchers' defaults). KernelBench files only.")
@click.option("--sequences", type=click.IntRange(min=1), default=None, metavar="N",
              help="States the search over rewrite decisions and partitions evaluates (default 8; 1: the greedy "
                   "rewrites, then the partition search). --seed orders its moves. KernelBench files only.")
@click.option("--strategy", type=click.Choice(["hill", "mcts"]), default=None,
              help="How the search over rewrite decisions and partitions walks its states: hill (first-improvement "
                   "hill climbing, the default) or mcts (Monte Carlo tree search, UCT with random rollouts), within "
                   "--sequences states. KernelBench files only.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines (stage, candidate, check calls) on stderr.")
@handle_errors
def solve(problem: Path, out: Path | None, json_out: Path | None, explain: bool, strict: bool, seed: int,
          sets: tuple[str, ...], greedy: bool, target: str, workloads: tuple[str, ...], schema: str | None,
          prove: bool, prove_timeout_ms: int | None, candidates: int, cpu_cap: int | None, timeout_s: float | None,
          budget: int | None, sequences: int | None, strategy: str | None, quiet: bool) -> None:
    """Compile PROBLEM into a verified, self-contained solution.

    PROBLEM is a KernelBench file (Model, get_inputs, get_init_inputs; writes a ModelNew file), or
    a SOL-ExecBench / FlashInfer-Bench problem folder or its definition.json (writes a solution.json).
    Every generated kernel's launch contract is proved (unless --no-prove), and the program is
    verified with `warpsmith check`, before anything is written to -o.
    """
    from ..compiler import solve as run_solve, write_report
    from ..compiler.progress import Progress
    from ..core.errors import InvalidInputError

    if json_out is not None and json_out.exists():
        json_out.unlink()
    for name, given_ in (("--budget", budget), ("--sequences", sequences), ("--strategy", strategy)):
        if given_ is not None and problem.suffix != ".py":
            raise InvalidInputError(name, "a KernelBench .py problem (solve's searches over definitions take "
                                    "their defaults)", str(problem))
    tell = Progress() if quiet else Progress(stream=sys.stderr)
    if problem.suffix != ".py" and (problem.is_dir() or problem.suffix == ".json"):
        with _limited(timeout_s, tell, problem, json_out):
            return _solve_definition(problem, out, json_out, explain, strict, seed, sets, greedy, target, workloads,
                                     schema or "sol-execbench", prove, prove_timeout_ms, candidates, tell, cpu_cap)
    if problem.suffix != ".py":
        raise InvalidInputError("PROBLEM", "a KernelBench .py file, a SOL-ExecBench/FlashInfer-Bench problem "
                                "folder, or its definition.json", str(problem))
    given = [o for o, v in (("--workloads", workloads), ("--schema", schema), ("--cpu-cap", cpu_cap)) if v]
    if given:
        raise InvalidInputError(" and ".join(given), "a SOL-ExecBench/FlashInfer-Bench problem (these options "
                                "apply to definitions only)", str(problem))
    with quiet_interpreter(), _limited(timeout_s, tell, problem, json_out):
        from ..compiler.fuse import partition

        res = run_solve(problem, out, strict=strict, seed=seed, overrides=list(sets) or None,
                        progress=tell, partitioner=partition if greedy else None,
                        target=target, prove=prove, prove_timeout_ms=prove_timeout_ms, candidates=candidates,
                        **({} if budget is None else {"library_budget": budget}),
                        **({} if sequences is None else {"sequences": sequences}),
                        **({} if strategy is None else {"strategy": strategy}))
    tell.close()
    if explain:
        click.echo(res.explain())
    if json_out is not None:
        write_report(res, json_out)
    p = res.program
    assert p is not None
    click.echo(f"{len(p.kernels)} generated kernel(s), {len(p.library_calls)} library call(s), "
               f"{len(p.fallbacks)} ATen fallback(s)")
    for n in p.fallbacks:
        click.echo(f"  fallback {n.name}: {n.target} {n.line}".rstrip())
    if p.search is not None:
        click.echo(p.search.lines()[0])
    _echo_proofs(res.proofs)
    _echo_attempts(res.attempts, "candidate", with_partition=True)
    _finish(res, p.fallbacks)


class _limited:
    """``--timeout``: run the block under :func:`~warpsmith.compiler.progress.time_limit`; on expiry end
    the check's processes, write the partial report to ``json_out`` and exit 3."""

    def __init__(self, timeout_s: float | None, tell: Any, problem: Path, json_out: Path | None) -> None:
        from ..compiler.progress import time_limit

        self.timeout_s, self.tell, self.problem, self.json_out = timeout_s, tell, problem, json_out
        self.cm = time_limit(timeout_s, tell, on_hard_stop=self._hard_stop)

    def __enter__(self) -> None:
        self.cm.__enter__()

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        from ..compiler.progress import SolveTimeout

        self.cm.__exit__(kind, exc, tb)
        if isinstance(exc, SolveTimeout):
            self._stop(exc.where, exc.attempts)
        return False

    def _report(self, where: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
        from ..check.isolation import end_all

        end_all()
        self.tell.close()
        if self.json_out is not None:
            import json

            from ..compiler.solve import _write_atomic

            _write_atomic(json.dumps({"problem": str(self.problem), "status": "timeout", "written": None,
                                      "timeout_s": self.timeout_s, "stopped": where,
                                      "rejected_candidates": attempts}, indent=2, default=str), self.json_out)
        cand = f", candidate {where['candidate']}/{where['candidates']}" if where.get("candidates") else ""
        click.echo(f"timeout: stopped after {where['elapsed_s']} s (limit {self.timeout_s:g} s) during "
                   f"{where['stage']}{cand}, {where['check_calls']} check call(s); nothing written"
                   + (f"; partial report in {self.json_out}" if self.json_out is not None else ""), err=True)

    def _stop(self, where: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
        self._report(where, attempts)
        raise click.exceptions.Exit(TIMEOUT_EXIT)

    def _hard_stop(self, where: dict[str, Any]) -> None:
        """From the watchdog thread: a stage did not return to Python within the grace period."""
        where = dict(where, hard_stop=True)
        try:
            self._report(where, [])
        finally:
            sys.stderr.flush()
            os._exit(TIMEOUT_EXIT)


TIMEOUT_EXIT = 3  # --timeout expired (see the module docstring)


def _echo_attempts(attempts, what: str, with_partition: bool = False) -> None:
    """The candidates verified and rejected before the one kept (stderr)."""
    for a in attempts:
        how = " with rewrites" if a.get("rewrites") else ""
        where = f" ({a['partition']})" if with_partition else ""
        click.echo(f"  {what} rank {a['choice']}{how}{where} rejected: {a['reason']}: {a['message']}", err=True)


def _finish(res, fallbacks) -> None:
    """The verdict line and the exit status of a solve (one place for both problem formats)."""
    if res.status == "refused":
        given = getattr(res, "as_given", None)
        if given:
            click.echo(f"refused (--strict): the reference launches its own Triton kernel(s) ({', '.join(given)}); "
                       "the solution would run it as given, not compiled", err=True)
        if fallbacks or not given:
            click.echo(f"refused (--strict): {len(fallbacks)} op(s) have no lowering or codegen: "
                       + ", ".join(str(n.target) for n in fallbacks), err=True)
        raise click.exceptions.Exit(1)
    if res.status == "rejected":
        click.echo(f"verdict: rejected ({res.verdict['reason']}: {res.verdict['message']}); nothing written", err=True)
        raise click.exceptions.Exit(1)
    click.echo(f"verdict: accepted ({res.verdict.get('coverage', '')})")
    if res.written:
        click.echo(f"wrote {res.written}")


def _echo_proofs(proofs, indent: str = "") -> None:
    if proofs is not None:
        click.echo(f"{indent}proofs: {proofs.summary()}")
        for kernel, o in proofs.failed:
            click.echo(f"{indent}  failed {kernel} {o.name} ({o.subject}): {o.detail}; counterexample "
                       f"{o.counterexample}", err=True)


def _solve_definition(problem: Path, out: Path | None, json_out: Path | None, explain: bool, strict: bool, seed: int,
                      sets: tuple[str, ...], greedy: bool, target: str, workloads: tuple[str, ...],
                      schema: str, prove: bool, prove_timeout_ms: int | None, candidates: int, tell: Any,
                      cpu_cap: int | None = None) -> None:
    from ..compiler.solexec import solve_definition, write_report

    with quiet_interpreter():
        from ..compiler.fuse import partition

        res = solve_definition(problem, out, strict=strict, seed=seed, overrides=list(sets) or None,
                               workloads=list(workloads) or None, partitioner=partition if greedy else None,
                               target=target, schema=schema, progress=tell,
                               prove=prove, prove_timeout_ms=prove_timeout_ms, candidates=candidates,
                               cpu_cap=cpu_cap)
    if explain:
        click.echo(res.explain())
    if json_out is not None:
        write_report(res, json_out)
    compiled, total = res.workloads_compiled, res.workloads_all
    cap = res.cpu_cap
    if cap:
        consts = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in cap.get("consts", {}).items())
        click.echo(f"CPU cap {cap['cap']}: {len(cap.get('workloads', {}))} workload(s) shrunk"
                   + (f"; consts {consts}" if consts else "")
                   + (f"; consts kept at full size (the reference refuses them capped: {cap['consts_kept']})"
                      if cap.get("consts_kept") else ""))
    click.echo(f"{res.definition}: {len(res.signatures)} input signature(s) compiled, for {len(compiled)} of "
               f"{len(total)} workload(s)")
    for s in res.signatures:
        p = s.program
        assert p is not None
        click.echo(f"  {s.file}: {s.text} (workloads {', '.join(s.workloads)}): {len(p.kernels)} generated "
                   f"kernel(s), {len(p.library_calls)} library call(s), {len(p.fallbacks)} ATen fallback(s)")
        for n in p.fallbacks:
            click.echo(f"    fallback {n.name}: {n.target} {n.line}".rstrip())
        if s.as_given:
            click.echo(f"    the reference as given: it launches its own Triton kernel(s) ({', '.join(s.as_given)}); "
                       "not compiled, judged on its outputs")
        _echo_proofs(s.proofs, "    ")
    _echo_attempts(res.attempts, "solution candidate")
    skipped = [w for w in total if w not in compiled]
    if skipped:
        click.echo(f"not compiled (run raises ValueError on their signatures unless one above matches): "
                   f"{', '.join(skipped)}")
    _finish(res, res.fallbacks)
