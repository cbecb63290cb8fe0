"""The pipeline: capture -> IR -> lower -> partition -> codegen/emit -> verify -> write.

:func:`solve` never writes an unverified program to ``out``: the program is written to a
temporary folder, checked there against the problem with :func:`warpsmith.check.check` (the
isolated harness), and moved to ``out`` only when accepted.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..cost.program import program_ms, tune_kernel
from ..targets import get_target
from .capture import capture, load_problem
from .emit import Program, emit
from .fuse import Partition, mark_unfused, partition, problems
from .ir import Graph, build
from .library_tune import DEFAULT_BUDGET, TUNED_OPS, choose, db_problem, launcher_args, row, write_back
from .lower import lower
from .precision import approximate, lower_storage
from .progress import Progress, SolveTimeout, as_progress
from .search import search as run_search
from .sequence import SEQUENCE_BUDGET, search_sequences
from .strategies import DEFAULT_STRATEGY

SEARCH_SHARE = 0.35  # of the time left under a time limit, what the search may use (anytime: then its best so far)


@dataclass
class SolveResult:
    """What ``warpsmith solve`` did; ``status`` is ``accepted``, ``rejected``, ``refused`` (--strict)
    or ``unverified`` (verification skipped)."""

    problem: str
    status: str
    program: Program | None = None
    graph: Graph | None = None
    notes: list[str] = field(default_factory=list)
    verdict: dict[str, Any] = field(default_factory=dict)
    written: str | None = None
    proofs: Any = None  # proofs.ProgramProofs of the generated kernels (None: not proved)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # rejected candidates (see solve)

    def explain(self) -> str:
        out = [f"# {self.problem}"]
        if self.graph is not None:
            out += ["## graph IR (after lowering)", self.graph.format()]
        out += ["## lowering"] + (self.notes or ["(nothing lowered to library ops)"])
        if self.program is not None:
            out.append("## kernels")
            for k in self.program.kernels:
                out.append(f"{k.name}: {k.group.kind} over {list(k.group.domain)}; fuses {k.describe()}; "
                           f"writes {', '.join(n.name for n in k.outputs)}")
            for n in self.program.library_calls:
                out.append(f"library {n.op} ({n.name}): {n.attrs}")
            out.append("## generated kernel source")
            out += [k.source for k in self.program.kernels] or ["(none)"]
            if getattr(self.program, "search", None) is not None:
                out.append("## search")
                out += self.program.search.lines()
            out.append("## ATen fallbacks")
            out += [f"{n.name}: {n.target} {n.line}".rstrip() for n in self.program.fallbacks] or ["(none)"]
            if self.program.coverage:
                from .coverage import line

                out += ["## coverage", line(self.program.coverage)]
            out.append("## proofs (launch contracts of the generated kernels)")
            out += self.proofs.lines() if self.proofs is not None else ["(not proved: --no-prove)"]
            if self.attempts:
                out.append("## candidates rejected before this one (never written nor used)")
                out += [f"rank {a['choice']}{' with rewrites' if a.get('rewrites') else ''}: {a['partition']} "
                        f"({a['kernels']} kernels): {a['reason']}: {a['message']}" for a in self.attempts]
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        p = self.program
        return {
            "problem": self.problem, "status": self.status, "written": self.written,
            "kernels": [{"name": k.name, "kind": k.group.kind, "domain": list(k.group.domain),
                         "fuses": [{"node": n.name, "op": n.op, "line": n.line} for n in k.group.nodes],
                         "outputs": [n.name for n in k.outputs]} for k in (p.kernels if p else [])],
            "library_calls": [{"node": n.name, "op": n.op, "attrs": {k: v for k, v in n.attrs.items()},
                               "line": n.line} for n in (p.library_calls if p else [])],
            "fallbacks": [{"node": n.name, "op": str(n.target), "line": n.line} for n in (p.fallbacks if p else [])],
            "views": [{"node": n.name, "op": str(n.target)} for n in (p.views if p else [])],
            "lowering": self.notes, "check": self.verdict,
            "search": p.search.to_json() if p is not None and p.search is not None else None,
            "coverage": p.coverage if p is not None else None,
            "proofs": self.proofs.to_json() if self.proofs is not None else None,
            "rejected_candidates": self.attempts,
        }


def compile_problem(path: str | Path, seed: int = 0,
                    partitioner: Callable[[Graph], Partition] | None = None,
                    overrides: Any = None, target: str = "h100", choice: int = 0,
                    rewrites_on: bool = True, progress: Progress | None = None,
                    library_budget: int = DEFAULT_BUDGET,
                    sequences: int = SEQUENCE_BUDGET, strategy: str = DEFAULT_STRATEGY,
                    library_configs: bool = True) -> tuple[Graph, list[str], Program]:
    """Capture, lower, partition and emit (no verification); ``overrides`` are ``--set`` items (size
    constants rewritten before the problem runs). With no ``partitioner``, the search
    (:mod:`.sequence`: rewrites and partitions ranked by the cost model for ``target``) chooses, and
    its record is ``Program.search``; a given ``partitioner`` (e.g. ``fuse.partition``, greedy) is used as it is.
    ``choice`` takes the search's ``choice``-th best partition instead of its best (IndexError past the
    last explored one): the next candidate when a better one failed verification; ``rewrites_on=False``
    compiles the program as written (no rewrite, nothing folded out of the call). With the search and
    rewrites on, values between kernels may be stored in 16 bits (:mod:`.precision`), declared in
    ``Program.declared`` for the check. With the search, each library call whose launcher takes a
    config (GEMMs, softmax, norms, attention, conv, pooling: :data:`.library_tune.TUNABLE`) takes a
    tuning-DB record's config or one tuned here in ``library_budget`` predicted evaluations (:mod:`.library_tune`; 0: no
    tuning), emitted in its launcher call; ``library_configs=False`` keeps every launcher's default (no
    DB, no tuning). ``sequences``: states the search over rewrite decisions and partitions evaluates
    (:mod:`.sequence`; 1: greedy rewrites, then partitions), walked by ``strategy`` (:mod:`.strategies`:
    ``hill`` or ``mcts``). ``progress`` is told each stage (capture, search, emit); under a time limit
    (its ``deadline``, :func:`~.progress.time_limit`) the search may use :data:`SEARCH_SHARE` of the time
    left when it starts, then stops with its best so far (``stopped_early`` in its record)."""
    tell = progress or Progress()
    tell.stage("capture")
    problem = load_problem(path, seed=seed, overrides=overrides)
    cap = capture(problem)
    g = build(cap)
    tell.stage("search", "greedy partition" if partitioner is not None else f"partition rank {choice}"
               + ("" if rewrites_on else ", no rewrite"))
    notes, part, found = plan(g, partitioner, target, choice, rewrites_on, sequences=sequences, seed=seed,
                              strategy=strategy, stop=tell.stop_after(SEARCH_SHARE))
    declared = store_low(g, part, found, cap.program, problem.inputs, target, notes) if rewrites_on else None
    library = tune_library(g, found, get_target(target), library_budget, seed, tell, library_configs) \
        if found is not None else []
    tell.stage("emit")
    shapes = [tuple(x.shape) if hasattr(x, "shape") else None for x in problem.inputs]
    values = [None if hasattr(x, "shape") else x for x in problem.inputs]
    tgt = get_target(target)
    configure = (lambda graph, group, users: tune_kernel(graph, group, tgt, users)) if found is not None else None
    prog = emit(g, part, problem.source, Path(path).name, shapes, values, configure=configure)
    prog.search, prog.declared = found, declared
    if found is not None:
        record_configs(found, g, part, prog, tgt, library)
    return g, notes, prog


def tune_library(g: Graph, found: Any, tgt: Any, budget: int, seed: int, tell: Progress,
                 on: bool = True) -> list[dict[str, Any]]:
    """Each library call's launch config (:func:`.library_tune.choose`: a DB record, else tuned in
    ``budget`` predicted evaluations, else the launcher's default; ``on`` False: the launcher's default,
    after a program running chosen configs was rejected); a chosen config goes into the node's
    ``attrs["launch_config"]`` (its emitted launcher call), and its predicted gain over the default
    comes off ``found.best_ms`` (the program's predicted time was priced at the defaults)."""
    calls = [n for n in g.nodes if n.kind == "library"]
    if on and any(n.op in TUNED_OPS for n in calls):
        tell.stage("search", f"library configs ({budget} predicted evaluations per library call)")
    out = []
    for n in calls:
        c = choose(n, tgt, budget if on else 0, seed, use_db=on)
        if not on:
            c["detail"] = "launcher default (a program running chosen library configs was rejected by the check)"
        if c["tuned"]:
            n.attrs["launch_config"] = launcher_args(c["config"], row(n))
            n.attrs["launch_note"] = ", ".join(f"{k}={v}" for k, v in c["config"].items()) + f" ({c['source']})"
            found.best_ms -= c["default_ms"] - c["predicted_ms"]
        out.append(c)
    return out


def record_configs(found: Any, g: Graph, part: Partition, prog: Program, tgt: Any,
                   library: list[dict[str, Any]]) -> None:
    """Into the search's record: each generated kernel's launch config (the config search's, with the
    default's predicted time), each library call's config (``library``, :func:`tune_library`: its
    source, its predicted time and the default's), and the chosen program priced with every kernel at
    its default config (``untuned_ms``: generated kernels and library calls alike)."""
    found.kernels = [{"name": k.name, "kind": k.group.kind, "domain": list(k.group.domain), **k.choice.to_json()}
                     for k in prog.kernels if k.choice is not None]
    emitted = {n.name for n in prog.library_calls}
    found.library = [c for c in library if c["node"] in emitted]
    found.untuned_ms = program_ms(g, part, tgt, tuned=False)


def store_low(g: Graph, part: Partition, found: Any, program: Any, inputs: Sequence[Any], target: str,
              notes: list[str]) -> Any:
    """After the search (``found``, None: no search, nothing done): approximate functions in the
    generated kernels where :func:`.precision.approximate` takes them, then the values between kernels
    stored in 16 bits where :func:`.precision.lower_storage` takes it (``g`` changed in place), their
    records added to the search's and a line to ``notes``; the declaration for the check, or None."""
    if found is None:
        return None
    tgt = get_target(target)
    declares = {k: v for r in found.rewrites if r["taken"] for k, v in (r.get("declares") or {}).items()}
    approx_records, approx = approximate(g, part, program, inputs, tgt, declares)
    found.rewrites += approx_records
    for r in approx_records:
        if r["taken"]:
            notes.append(f"{r['at']}: {_REWRITE_NOTE['approximate']} ({r['rule']}, bound {r['bound']}, "
                         f"{r['deviation_share']:.3g}x KernelBench's tolerance on the problem's inputs; declared to the check)")
    records, declared = lower_storage(g, part, program, inputs, tgt, base=approx)
    found.rewrites += records
    if declared is not None and declared is not approx:
        r = records[0]
        found.best_ms = r["after_ms"]
        notes.append(f"{r['at']}: {_REWRITE_NOTE['storage']} {r['dtype']} (predicted {r['before_ms'] * 1e3:.4g} -> "
                     f"{r['after_ms'] * 1e3:.4g} us on {target}; declared to the check)")
    return declared


_REWRITE_NOTE = {"reassociate": "matmul chain reassociated to A @ (B @ C)",
                 "algebra": "algebraic rewrite", "approximate": "approximate transcendental functions",
                 "fold_reduction": "reduction over a GEMM's features folded into its weight",
                 "storage": "float32 values between kernels stored in",
                 "gemm_epilogue": "pointwise chain computed in the GEMM's epilogue (its output never written)",
                 "view_through": "view sunk below its pointwise producers (fused through)",
                 "split_reduction": "reduction split into parallel float32 partials and a combining pass"}


def plan(g: Graph, partitioner: Callable[[Graph], Partition] | None = None,
         target: str = "h100", choice: int = 0, rewrites_on: bool = True,
         clamp: bool = False, sequences: int = SEQUENCE_BUDGET, seed: int = 0,
         strategy: str = DEFAULT_STRATEGY, stop: Callable[[], bool] | None = None) -> tuple[list[str], Partition, Any]:
    """Lower ``g`` (in place) and choose its partition: the search's when ``partitioner`` is None
    (with rewrites, :mod:`.rewrite`, and the values folded out of the call, :mod:`.hoist`, searched
    together with the partitions by :func:`.sequence.search_sequences`, ``sequences`` states, moves
    ordered by ``seed``, walked by ``strategy``; unless ``rewrites_on`` is False: no rewrite, the partition search alone),
    else ``partitioner(g)``. Nodes no group took are marked ``aten``.
    ``choice`` past the last explored partition raises IndexError, or with ``clamp`` takes the last.
    Returns the lowering notes, the partition and the search's record (None without a search)."""
    notes = lower(g)
    found = None
    if partitioner is None:
        tgt = get_target(target)
        greedy = partition(g)
        greedy_ms = program_ms(g, greedy, tgt)  # the baseline: this graph, greedy fusion, no rewrite
        greedy_untuned = program_ms(g, greedy, tgt, tuned=False)  # ... and every kernel at its default config
        if rewrites_on:
            best, record = search_sequences(g, tgt, sequences, seed, strategy=strategy, stop=stop)
            g.__dict__.update(vars(best.graph))  # the winning state's rewritten graph, in place of g's
            rewrites, hoisted, found = best.records, best.hoisted, best.result
            found.sequence = record
        else:
            rewrites, hoisted, found = [], None, run_search(g, tgt, stop=stop)
        for r in rewrites:
            if not r["taken"]:
                continue
            what = r["chain"] + "; predicted" if r["rewrite"] == "gemm_epilogue" else "predicted"
            rule = " " + r["rule"] if r.get("rule") and r["rewrite"] != "gemm_epilogue" else ""
            notes.append(f"{r['at']}: {_REWRITE_NOTE[r['rewrite']]}{rule} ({what} {r['before_ms'] * 1e3:.2f} -> "
                         f"{r['after_ms'] * 1e3:.2f} us on {target})")
        if hoisted is not None:
            notes.append(hoisted["line"])
        found.greedy_ms, found.rewrites, found.hoisted = greedy_ms, rewrites, hoisted
        found.greedy_untuned_ms = greedy_untuned
        part = found.pick(min(choice, len(found.ranked) - 1) if clamp else choice)
    else:
        if choice:
            raise IndexError("a given partitioner has one partition, no other candidate")
        part = partitioner(g)
    bad = problems(g, part)
    if bad:
        raise ValueError(f"{getattr(partitioner, '__name__', partitioner)} gave an unusable partition: " + "; ".join(bad))
    mark_unfused(g, part)
    return notes, part, found


MAX_CANDIDATES = 3  # programs verified at most, best predicted first, before solve gives up


def solve(path: str | Path, out: str | Path | None = None, *, strict: bool = False, verify: bool = True,
          seed: int = 0, check_kwargs: dict[str, Any] | None = None,
          partitioner: Callable[[Graph], Partition] | None = None, overrides: Any = None,
          progress: Callable[[str], None] | Progress | None = None, target: str = "h100", prove: bool = True,
          prove_timeout_ms: int | None = None, candidates: int = MAX_CANDIDATES,
          library_budget: int = DEFAULT_BUDGET, sequences: int = SEQUENCE_BUDGET,
          strategy: str = DEFAULT_STRATEGY, write_configs: bool = True, record_moves: bool = True) -> SolveResult:
    """Compile a KernelBench problem into a verified ``ModelNew`` file.

    With ``prove``, the launch contract of every generated kernel is proved first (:mod:`.proofs`);
    a failed obligation rejects the program (reason ``proof_failed``) before the check runs. A
    rejected program is never written nor used: the search's next partition (in predicted order,
    at most ``candidates`` programs in all) is emitted, proved and checked in its place, and
    ``SolveResult.attempts`` says what each rejected one failed. When the search took a rewrite or
    folded values out of the call, the last of them is the program as written (no rewrite): a rewrite
    that fails verification costs its gain, never the solution. ``progress`` (a callable told lines, or
    a :class:`~.progress.Progress`) is told each stage, candidate and check call. ``library_budget``:
    predicted evaluations per library call tuned during the solve (:mod:`.library_tune`; 0: none).
    Once a program that ran chosen library configs (DB records or tuned) is rejected, the next
    candidates run every library call at its launcher's default, and when none of them passes, that
    program is verified once more at the defaults (one program beyond ``candidates``). With
    ``write_configs``, the library configs tuned during an accepted solve are verified by the tuner's
    verifier and recorded in the tuning DB (:func:`record_library`). ``sequences``: states of the
    search over rewrite decisions and partitions (:mod:`.sequence`), ``strategy`` its strategy
    (:mod:`.strategies`: ``hill``, the default, or ``mcts``). With ``record_moves``, the moves that
    search evaluated (:mod:`.move_prior`'s records: predicted outcomes) are appended beside the tuning
    DB (``<db stem>.moves.jsonl``, :func:`record_move_file`) when that DB exists; nothing is written
    without one.

    Raises:
        InvalidInputError: the problem file is unusable (exit 2); nothing is written.
        SolveTimeout: a time limit (:func:`~.progress.time_limit`) expired; its ``attempts`` are the
            candidates rejected before, nothing is written.
    """
    attempts: list[dict[str, Any]] = []
    res = None
    tell = as_progress(progress)
    order = Candidates(max(1, candidates) if partitioner is None else 1)
    library_on = True  # off for good once a program running chosen library configs was rejected
    retry = None  # that program's (choice, rewrites_on): run again at the launchers' defaults if nothing else passes
    searched = None  # the first candidate's sequence search (every candidate's runs the same search)
    try:
        while True:
            plan_ = order.next()
            if plan_ is None:
                if retry is None:
                    break
                plan_, retry = retry, None  # no candidate left: the rejected one again, at the defaults
            choice, rewrites_on = plan_
            tell.candidate(order.tried + 1, max(order.budget, order.tried + 1))
            try:
                g, notes, prog = compile_problem(path, seed=seed, partitioner=partitioner, overrides=overrides,
                                                 target=target, choice=choice, rewrites_on=rewrites_on, progress=tell,
                                                 library_budget=library_budget, sequences=sequences,
                                                 strategy=strategy, library_configs=library_on)
            except IndexError:  # no other partition was explored
                if order.exhausted():
                    if retry is None:
                        break
                    order.budget = order.tried  # nothing else: the retry comes next
                continue
            if searched is None and prog.search is not None and prog.search.sequence is not None:
                searched = prog.search.sequence
            if not order.fresh(prog.text, _rewritten(prog)):  # the very same program again: nothing new to verify
                continue
            res = _verify_one(path, g, notes, prog, out, strict=strict, verify=verify, seed=seed,
                              check_kwargs=check_kwargs, overrides=overrides, progress=tell, prove=prove,
                              prove_timeout_ms=prove_timeout_ms)
            if res.status != "rejected":
                break
            _rejected(attempts, res, prog, choice, rewrites_on, tell)
            if library_on and any(n.attrs.get("launch_config") for n in prog.library_calls):
                library_on = False  # the next candidates run every library call at its launcher's default
                attempts[-1]["library_configs"] = True
                retry = (choice, rewrites_on)
                tell(f"candidate {choice} ran chosen library configs: the next ones run the launchers' defaults")
    except SolveTimeout as stop:
        stop.attempts = attempts
        raise
    assert res is not None
    res.attempts = attempts  # when accepted, the better-predicted ones rejected; when rejected, every one tried
    if res.status == "accepted" and write_configs:
        record_library(res.program, get_target(target), seed)
    if record_moves and searched is not None:
        record_move_file(Path(path).stem, searched)
    return res


def record_move_file(problem: str, searched: Any, db_path: str | Path | None = None) -> Path | None:
    """Append the moves of ``searched`` (a :class:`.sequence.SequenceSearch`) to the file beside the
    tuning DB (``db_path``, default the settings' DB; :func:`.move_prior.moves_path`), one line per move
    with ``problem`` and the date, only where that DB file exists (a solve never creates one, nor writes
    anywhere else); an unwritable file is skipped. Returns the file written, or None."""
    from ..core.settings import settings
    from .move_prior import append_moves, moves_path

    db = Path(db_path) if db_path is not None else settings().db_path
    if not searched.moves or not db.is_file():
        return None
    try:
        append_moves(moves_path(db), problem, searched.moves)
    except OSError:
        return None
    return moves_path(db)


def record_library(prog: Program, tgt: Any, seed: int) -> None:
    """After ``prog`` was accepted by the check: each library config tuned during the solve
    (:func:`.library_tune.write_back`: the tuner's verifier, then the tuning DB), what was done kept in
    its report entry as ``db_record``."""
    if prog is None or prog.search is None:
        return
    calls = {n.name: n for n in prog.library_calls}
    done: dict[tuple, dict[str, Any]] = {}  # calls of one problem and config: verified and written once
    for c in prog.search.library:
        if c["source"] == "tuned" and c["node"] in calls:
            p = db_problem(calls[c["node"]])
            key = (repr(p), tuple(sorted(c["config"].items())))
            if key not in done:
                done[key] = write_back(calls[c["node"]], c, tgt, seed)
            c["db_record"] = done[key]


def _rejected(attempts: list[dict[str, Any]], res: SolveResult, prog: Program, choice: int, rewrites_on: bool,
              tell: Progress) -> None:
    """Record a rejected candidate in ``attempts`` and tell ``tell``."""
    search = prog.search
    attempts.append({"choice": choice, "rewrites": rewrites_on and _rewritten(prog),
                     "reason": res.verdict.get("reason"), "message": res.verdict.get("message"),
                     "kernels": len(prog.kernels),
                     "predicted_ms": search.best_ms if search is not None else None,
                     "partition": search.ranked[choice][0].label if search is not None else "given"})
    tell(f"candidate {choice} rejected ({attempts[-1]['reason']}): trying the next")


class Candidates:
    """The order programs are tried in: the search's partitions, best predicted first (``choice`` 0, 1,
    ...), a program emitting the same text as one already tried skipped, at most ``budget`` verified.
    When the search took a rewrite or folded values out of the call, the last one is the program as
    written (no rewrite), and so is the next one when the partitions run out."""

    def __init__(self, budget: int) -> None:
        self.budget, self.tried, self.choice, self.rewrites_on, self.took = budget, 0, 0, True, False
        self.texts: set[str] = set()

    def next(self) -> tuple[int, bool] | None:
        """``(choice, rewrites_on)`` to compile next; None when ``budget`` programs were verified."""
        if self.tried >= self.budget:
            return None
        if self.took and self.rewrites_on and self.tried == self.budget - 1:
            self.choice, self.rewrites_on = 0, False
        self.choice += 1
        return self.choice - 1, self.rewrites_on

    def exhausted(self) -> bool:
        """No partition is left this way: True when nothing is left at all, else the program as written
        comes next."""
        if self.took and self.rewrites_on:
            self.choice, self.rewrites_on = 0, False
            return False
        return True

    def fresh(self, text: str, rewritten: bool) -> bool:
        """Record a compiled program (``rewritten``: a rewrite was taken); whether it is new, to verify."""
        self.took = self.took or self.rewrites_on and rewritten
        if text in self.texts:
            return False
        self.texts.add(text)
        self.tried += 1
        return True


def _rewritten(prog: Program) -> bool:
    """Whether the search took a rewrite (:mod:`.rewrite`) or folded values out of the call (:mod:`.hoist`)."""
    s = prog.search
    return s is not None and (any(r["taken"] for r in s.rewrites) or s.hoisted is not None)


def _verify_one(path: str | Path, g: Graph, notes: list[str], prog: Program, out: str | Path | None, *,
                strict: bool, verify: bool, seed: int, check_kwargs: dict[str, Any] | None, overrides: Any,
                progress: Progress, prove: bool, prove_timeout_ms: int | None) -> SolveResult:
    """Prove and check one emitted program; write it to ``out`` only when accepted."""
    res = SolveResult(str(path), "unverified", prog, g, notes)
    if strict and prog.fallbacks:
        res.status = "refused"
        return res
    if prove:
        progress.stage("prove", f"{len(prog.kernels)} generated kernel(s)")
    if prove and not proved(res, prog.text, Path(out).name if out is not None else "model_new.py", prove_timeout_ms):
        return res
    if not verify:
        if out is not None:
            _write_atomic(prog.text, Path(out))
            res.written = str(out)
        return res
    from ..check import check

    with tempfile.TemporaryDirectory(prefix="warpsmith-solve-") as tmp:
        cand = Path(tmp) / (Path(out).name if out is not None else "model_new.py")
        cand.write_text(prog.text)
        progress.stage("check")
        report = check(path, cand, seed=seed, progress=progress, overrides=overrides, declared=prog.declared,
                       on_call=progress.check_call, **(check_kwargs or {}))
        doc = report.to_json() if hasattr(report, "to_json") else {}
        f = report.first_failure
        res.verdict = {"accepted": f is None, "reason": None if f is None else f.code,
                       "message": None if f is None else f.message, "coverage": report.coverage_line,
                       "report": doc}
        res.status = "accepted" if f is None else "rejected"
        if f is None and out is not None:
            dest = Path(out)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp_dest = dest.with_name(f".{dest.name}.tmp")
            shutil.copyfile(cand, tmp_dest)
            os.replace(tmp_dest, dest)
            res.written = str(dest)
    return res


def proved(res: Any, text: str, name: str, timeout_ms: int | None = None) -> bool:
    """Prove the generated kernels of ``text`` into ``res.proofs``; False (``res`` rejected, reason
    ``proof_failed``) when an obligation failed."""
    from .proofs import DEFAULT_TIMEOUT_MS, prove_text

    res.proofs = prove_text(text, name, timeout_ms or DEFAULT_TIMEOUT_MS)
    if res.proofs.failed:
        res.status, res.verdict = "rejected", res.proofs.verdict()
        return False
    return True


def _write_atomic(text: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, dest)


def write_report(res: SolveResult, dest: Path) -> None:
    _write_atomic(json.dumps(res.to_json(), indent=2, default=str), dest)
