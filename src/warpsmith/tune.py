"""The tuning loop: space -> search -> measure (or predict) -> verify finalists -> record.

One function, :func:`tune`, used by the CLI, the benchmarks and the API alike.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .core.errors import InvalidInputError, VerificationError
from .core.opspec import Problem
from .db import TuningDB, TuningRecord
from .measure import Evaluator, Score
from .measure.evaluate import expired, span
from .ops import get_op, variants as op_variants
from .search.strategy import make_strategy
from .space import JointSpace
from .targets import Target, current_device, fingerprint, get_target, measures
from .verify import Certificate, verify_candidate

PRESCREEN_PER_EVAL = 32  # random points ranked by the cost model per evaluation of budget
PRESCREEN_MAX = 4096


@dataclass
class Rejected:
    score: Score
    reason: str
    certificate: dict[str, Any]


@dataclass
class TuneResult:
    problem: Problem
    target: Target
    timing_kind: str  # "measured" | "predicted"
    strategy: str
    seed: int
    leaderboard: list[Score]
    evaluations: int
    elapsed_s: float
    winner: Score | None = None
    certificate: Certificate | None = None
    baseline_ms: float | None = None
    rejected: list[Rejected] = field(default_factory=list)
    record_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        w = self.winner
        return {
            "op": self.problem.op, "shape": dict(self.problem.shape), "dtype": self.problem.dtype_name,
            "attrs": dict(self.problem.attrs), "variant": w.variant if w else None, "config": w.config if w else None,
            "target": self.target.name, "timing_kind": self.timing_kind,
            "time_ms": (w.ms if w else None), "predicted_ms": (w.predicted_ms if w else None),
            "baseline_ms": self.baseline_ms,
            "compiler_facts": w.facts.to_json() if w and w.facts else None,
            "compiler_sass": [c.to_json() for c in w.sass] if w and w.sass else None,
            "speedup": (self.baseline_ms / w.ms if w and self.baseline_ms else None),
            "verified": bool(self.certificate and self.certificate.passed),
            "certificate": self.certificate.to_json() if self.certificate else None,
            "rejected": [{"variant": r.score.variant, "config": r.score.config, "reason": r.reason} for r in self.rejected],
            "strategy": self.strategy, "seed": self.seed, "evaluations": self.evaluations,
            "elapsed_s": round(self.elapsed_s, 3), "record_id": self.record_id,
        }


def _prescreen(space: JointSpace, evaluator: Evaluator, budget: int, rng: random.Random,
               log: Callable[[str], None] | None = None, ranker: Any = None) -> list[dict]:
    """Rank many random points (and each variant's default) by the cost model; return the best.

    With a learned ranker (``warpsmith.ranker``, trained on measured times), the pool is first
    ranked by it and only its best ``ranker.KEEP_FRACTION`` (at least ``budget`` points) go on to the
    cost model; without one (none trained for the target) the cost model ranks the whole pool."""
    n = min(PRESCREEN_MAX, PRESCREEN_PER_EVAL * budget, space.size())
    pool = {space.key(p): p for p in space.defaults()}
    for _ in range(n):
        p = space.sample(rng)
        pool.setdefault(space.key(p), p)
    points = list(pool.values())
    note = ""
    if ranker is not None and len(points) > budget:
        from . import ranker as learned

        prob = evaluator.problem
        samples = [learned.Sample(prob.op, p["variant"], dict(prob.shape), prob.dtype_name, dict(prob.key_attrs),
                                  {k: v for k, v in p.items() if k != "variant"}) for p in points]
        keep = ranker.prescreen(samples, learned.KEEP_FRACTION, min_keep=budget)
        note = f" (the learned ranker kept {len(keep)} of them)"
        points = [points[i] for i in sorted(keep)]  # pool order: ties of the cost model stay seed-fixed
    predicted = sorted(((evaluator.predict(p).predicted_ms, i, p) for i, p in enumerate(points)),
                       key=lambda t: t[:2])
    kept = [p for ms, _, p in predicted[: max(1, budget // 4)] if math.isfinite(ms)]
    if log:
        log(f"prescreen: ranked {len(pool)} configs{note} by the cost model, the best {len(kept)} start the search")
    return kept


def _items(s: Score) -> set[tuple[str, Any]]:
    return {("variant", s.variant), *s.config.items()}


def _finalists(board: list[Score], rejected: list[Rejected], limit: int):
    """Leaderboard entries to verify, best first, at most ``limit``.

    Failures teach: once two finalists have failed, the knob values they all share are taken as
    the failing region, and candidates holding all of those values are skipped (e.g. after two
    tf32 configs fail an fp32 contract, the next verified is an ieee one).
    """
    tried = 0
    for cand in board:
        if tried >= limit:
            return
        if len(rejected) >= 2:
            region = set.intersection(*(_items(r.score) for r in rejected))
            if region and region <= _items(cand):
                continue
        tried += 1
        yield cand


def search(space: JointSpace, evaluator: Evaluator, strategy: str, *, budget: int, seed: int,
           initial: Sequence[dict] = (), batch: int = 8, deadline: float | None = None,
           progress: Callable[[int, int, Score | None], None] | None = None) -> list[Score]:
    """The search loop: ask the strategy, score (predict or measure), tell; until the budget in
    evaluations is spent, the deadline (``time.perf_counter()``) passes, or the strategy is done. The
    deadline also bounds a measured batch: the evaluator starts no candidate after it. The first batch
    is asked for whatever the deadline, so a predicted search always has candidates (the prescreen
    before it may take a short deadline's time on a slow CPU)."""
    strat = make_strategy(strategy, space, seed, initial=initial)
    scores: list[Score] = []
    while len(scores) < budget and (not scores or not expired(deadline)):
        points = strat.ask(min(batch, budget - len(scores)))
        if not points:
            break
        got = evaluator.evaluate(points, deadline=deadline)
        strat.tell([(p, s.ms) for p, s in zip(points, got)])
        scores += got
        if progress:
            best = min((s for s in scores if math.isfinite(s.ms)), key=lambda s: s.ms, default=None)
            progress(len(scores), budget, best)
    return scores


def tune(problem: Problem, *, target: str | None = None, budget: int = 64, time_budget_s: float | None = None,
         strategy: str = "evolutionary", seed: int = 0, finalists: int = 4, db: TuningDB | None = None,
         verify_trials: int = 1, prove: bool = False, batch: int = 8, progress: Callable[[int, int, Score | None], None] | None = None,
         compiler_facts: bool = False, log: Callable[[str], None] | None = None, ranker: bool = True,
         trace: Any = None) -> TuneResult:
    """Search the variants of ``problem``'s op for it, verify the best, and record the winner in ``db``.

    With a GPU the candidates are compiled in parallel and timed (``measured``); without one the
    cost model of ``target`` ranks them (``predicted``) and the finalists run under Triton's
    interpreter for verification. With ``prove``, each finalist's exact kernels are also proved
    symbolically (their statuses go into the certificate; a failed obligation rejects the
    finalist). Raises VerificationError if no finalist passes.

    On a GPU the compiler's facts about each candidate (registers, spills, pipelining) come from its
    real compilation, and one that spills or cannot pipeline is skipped. Without one, with
    ``compiler_facts`` each candidate the search evaluates is also compiled for the target's GPU in a
    compile-only worker (``warpsmith.targets.compiler.CompilerFacts``; cached on disk), and the cost model uses
    those facts the same way.

    With ``ranker`` (the default) and a ``db``, a learned ranker trained for the target (saved beside
    the DB by ``warpsmith db ranker train``) prescreens the random pool before the cost model ranks
    it (off where none is trained, or with ``WARPSMITH_RANKER=0``); a measured run also records every
    measured candidate (unverified, never dispatched) as the ranker's training data and retrains it
    once ``RETRAIN_EVERY`` new measured records are in (``warpsmith.ranker.maybe_retrain``).

    ``progress`` is called after each batch of the search (evaluations done, budget, best so far);
    ``log`` gets one line per stage (prescreen, search finished, each finalist verified, proving,
    testing, its outcome), for a user watching a log rather than a progress bar.

    ``trace`` (a ``warpsmith.profile.trace.TraceRecorder``, or None) records the run's spans: the
    prescreen and the search on the tuner's track; each evaluated candidate's compile (on the
    compile-only worker's track, or a compile thread's on a GPU), prediction and measurement; each
    finalist's verification with its stages (prove, test); the baseline.
    """
    say = log or (lambda _: None)
    if budget < 1:
        raise InvalidInputError("budget", "a positive number of evaluations", budget)
    if time_budget_s is not None and time_budget_s <= 0:
        raise InvalidInputError("time budget", "a positive number of seconds", time_budget_s)
    t0 = time.perf_counter()
    spec = get_op(problem.op)
    dev = current_device()
    tgt = get_target(target) if target else dev.target
    measured = measures(tgt)
    variants = op_variants(problem.op)
    space = JointSpace({n: v.space(problem, tgt) for n, v in variants.items()})
    evaluator = Evaluator(spec, problem, variants, tgt, measured, seed=seed, trace=trace)
    if compiler_facts and not measured:
        from .targets.compiler import CompilerFacts

        evaluator.facts = CompilerFacts(tgt)
    kind = "measured" if measured else "predicted"
    say(f"tuning {problem.describe()} for {tgt.name}: {kind} times"
        + ("" if measured else " (no GPU here: the cost model ranks, finalists run under Triton's interpreter)")
        + f", {len(variants)} variant(s), budget {budget} evaluations")
    learned = None
    if db is not None and ranker:
        from .ranker import for_prescreen

        learned, why = for_prescreen(db.path, tgt.name)
        if learned is not None or "no ranker trained" not in why:
            say(f"learned ranker: {why}")
    with span(trace, "prescreen") as out:
        initial = _prescreen(space, evaluator, budget, random.Random(seed), say, learned)
        out["kept"] = len(initial)
    with span(trace, "search", strategy=strategy, budget=budget) as out:
        scores = search(space, evaluator, strategy, budget=budget, seed=seed, initial=initial, batch=batch,
                        deadline=None if time_budget_s is None else t0 + time_budget_s, progress=progress)
        out["evaluated"] = len(scores)

    # a stable sort: candidates with equal times (a cost model often cannot separate them) keep the
    # order the search evaluated them in, which the seed fixes
    board = sorted((s for s in scores if math.isfinite(s.ms)), key=lambda s: s.ms)
    say(f"search: {len(scores)} candidates evaluated, {len(board)} ranked"
        + (f", best {board[0].ms:.4g} ms {kind} ({board[0].variant})" if board else "")
        + f" ({time.perf_counter() - t0:.1f} s)")
    result = TuneResult(problem, tgt, kind, strategy, seed, board, len(scores), 0.0)
    device = "cuda" if dev.measured else "cpu"  # kernels run where Triton runs, whatever target was predicted
    n_final = min(finalists, len(board))
    for k, cand in enumerate(_finalists(board, result.rejected, finalists), 1):
        say(f"verifying finalist {k} of {n_final}: {cand.variant} {_config_line(cand.config)} ({cand.ms:.4g} ms {kind})")
        stages = _StageSpans(trace, candidate=k, variant=cand.variant)
        with span(trace, "verify", candidate=k, variant=cand.variant, config=cand.config) as out:
            cert = verify_candidate(spec, problem, variants[cand.variant], cand.config, tgt, device=device, seed=seed,
                                    trials=verify_trials, prove=prove,
                                    progress=lambda stage: (say(f"  {stage}"), stages(stage)))
            stages.close()
            out["passed"] = cert.passed
        if cert.passed:
            say(f"  passed ({time.perf_counter() - t0:.1f} s)")
            result.winner, result.certificate = cand, cert
            break
        failure = cert.first_failure()
        result.rejected.append(Rejected(cand, f"{failure.name}: {failure.status}" if failure else "?", cert.to_json()))
        say(f"  rejected: {result.rejected[-1].reason}")
    if measured:
        say("timing torch's own implementation (the baseline)")
    with span(trace, "baseline") if measured else span(None, ""):
        result.baseline_ms = evaluator.baseline_ms()
    result.elapsed_s = time.perf_counter() - t0

    if db is not None:
        for rec in records_of(result):  # failures are kept (never dispatched) so they are visible and avoidable
            if rec.verified:
                result.record_id = db.put(rec)
            else:
                db.put(rec, allow_unverified=True)
        if measured and ranker:
            _record_candidates(db, result, board)
            from .ranker import maybe_retrain

            if maybe_retrain(db, tgt.name) is not None:
                say(f"learned ranker for {tgt.name} retrained on the measured records of {db.path}")
    if result.winner is None:
        reasons = "; ".join(f"{r.score.variant}: {r.reason}" for r in result.rejected) or "no valid candidate found"
        raise VerificationError(f"no finalist of {problem.describe()} passed verification ({reasons})", result)
    return result


class _StageSpans:
    """The verifier's stages (its progress phrases) as spans on a trace: ``prove`` (the symbolic proofs),
    ``test`` (contracts, determinism, odd shapes), each from its phrase to the next or to ``close``."""

    def __init__(self, trace: Any, **args: Any) -> None:
        self.trace, self.args, self.open = trace, args, None

    def __call__(self, phrase: str) -> None:
        if self.trace is None:
            return
        self.close()
        name = "prove" if phrase.startswith("proving") else "test" if phrase.startswith("testing") else phrase.split(":")[0]
        self.open = (name, phrase, self.trace.now_us())

    def close(self) -> None:
        if self.trace is not None and self.open is not None:
            name, phrase, start = self.open
            self.trace.add(name, start, self.trace.now_us() - start, None, stage=phrase, **self.args)
            self.open = None


def _record_candidates(db: TuningDB, result: TuneResult, board: Sequence[Score]) -> int:
    """Record every measured candidate of ``board`` other than the winner and the rejected finalists
    (already recorded) as an unverified record (never dispatched), with its compiler facts: the
    learned ranker's training data. Returns how many were written."""
    done = {id(result.winner)} | {id(r.score) for r in result.rejected}
    n = 0
    for s in board:
        if id(s) not in done and s.measured_ms is not None and math.isfinite(s.measured_ms) and s.measured_ms > 0:
            note = {"verdict": "not verified", "note": "a measured search candidate (learned ranker data)",
                    "compiler_facts": s.facts.to_json() if s.facts else None,
                    "compiler_sass": [c.to_json() for c in s.sass] if s.sass else None}
            db.put(_record(result, s, note, False), allow_unverified=True)
            n += 1
    return n


def records_of(result: TuneResult) -> list[TuningRecord]:
    """The records a tuning run leaves: each rejected finalist (unverified, never dispatched), then the
    verified winner if there is one (last)."""
    out = [_record(result, r.score, r.certificate, False) for r in result.rejected]
    if result.winner is not None:
        out.append(_record(result, result.winner, result.certificate.to_json(), True))
    return out


def _config_line(cfg: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def _record(result: TuneResult, s: Score, cert: dict[str, Any] | None, verified: bool) -> TuningRecord:
    p = result.problem
    return TuningRecord(
        op=p.op, variant=s.variant, shape=dict(p.shape), dtype=p.dtype_name, attrs=p.key_attrs,
        target=result.target.name, fingerprint=fingerprint(op_variants(p.op)[s.variant].source_hash()),
        config=dict(s.config), timing_kind=result.timing_kind, time_ms=s.ms, baseline_ms=result.baseline_ms,
        verified=verified, certificate=cert)
