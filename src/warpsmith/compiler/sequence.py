"""The search over sequences of rewrites and partitions, ranked by the program cost model.

Each rewrite pass decides its sites one by one by the cost model under *greedy* fusion
(:mod:`.decisions`); the partition search (:mod:`.search`) then searches partitions of the result.
That order misses a rewrite that only pays once the partition search has merged, split or
recomputed (the greedy price says no), and a rewrite taken early that blocks a better fusion
(the greedy price says yes). This search treats the pair as one state:

- a **state** is a set of forced site decisions (apply a rewrite at a site the model kept as
  written, or keep as written a site the model took; every other site decided by the model as
  before), the rewrite passes run in their fixed order under it (:func:`apply_rewrites`), and the
  best partition the partition search finds for the graph they leave; its score is that
  partition's predicted time (:func:`warpsmith.cost.program.program_ms`, predicted, not measured);
- the **seed state** forces nothing: greedy rewrites, then the partition search, which is what
  the compiler did before this search (``greedy_rewrites_ms`` in the report);
- a **move** flips the decision at one site a state's passes met (sites appear and disappear with
  the decisions before them; a site the state forces already is not flipped back), listed in the
  order of the model's margin at the site (the closest calls first: ``|after - before| / before``
  of the site's record), ties in an order drawn from ``seed``;
- a **strategy** (:mod:`.strategies`) walks the states: ``hill`` (the default) takes the first move
  of the best state that lowers the score and tries its moves next (first-improvement hill
  climbing); ``mcts`` grows a search tree of states by UCT with random rollouts, which can reach a
  pair of flips that pays only together (each alone worse), where the hill climb stops;
- at most ``budget`` states are evaluated (the seed state included; a state reached again is not
  evaluated again); the same seed gives the same states and the same winner. A state whose passes
  or partition search raise is a dead end: its error is kept in the record, and the search goes on
  (the seed state's errors are raised).

Every evaluated move (parent state, flipped site, child state) is kept in the record (``moves``:
features known before the child was evaluated, and its outcome, ``log(child / parent)`` of the
predicted times, or a dead end; :mod:`.move_prior`), and ``solve`` appends them beside its tuning DB.
A **learned move prior** trained on such records (:mod:`.move_prior`; ``warpsmith db moves train``)
orders the moves instead of the margins where one is saved for the target beside the tuning DB,
its held-out evaluation has it at least level with the margins (``MovePrior.gate``) and
``WARPSMITH_MOVE_PRIOR`` is not ``0``: most negative predicted outcome first, ties in the same
seeded order; ``mcts`` expands in that order too. Without one the order is the margins' (the
report's ``move order`` says which, and for the prior what it was trained on). Every choice is
allowed only because the emitted program is verified at the end, as before.
"""
from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field
from typing import Any

from .decisions import forcing, site
from .gemm_epilogue import fuse_epilogues
from .hoist import hoist
from .ir import Graph
from .rewrite import rewrite
from .search import SearchResult, search as run_search
from .split import split_reductions
from .strategies import DEFAULT_STRATEGY, STRATEGIES, Stop, run as run_strategy
from .views import fuse_views

SEQUENCE_BUDGET = 8  # states evaluated by default (solve --sequences)
MOVE_ORDER = ("the cost model's margins at each site (closest calls first; no learned move prior for this target "
              "beside the tuning DB)")


def apply_rewrites(g: Graph, target: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Every rewrite pass on ``g`` (in place), in the compiler's order: :func:`.rewrite.rewrite`
    (reassociation, folded reductions, algebra), views sunk, long reductions split, the fold at init
    (:func:`.hoist.hoist`), then GEMM epilogues (they match bare GEMMs). Returns the records (each
    site's, taken or not) and the fold's record (None: nothing folded)."""
    records = rewrite(g, target) + fuse_views(g, target) + split_reductions(g, target)
    hoisted = hoist(g, target)
    return records + fuse_epilogues(g, target), hoisted


def site_of(r: dict[str, Any]) -> str:
    """The :func:`.decisions.site` name of a rewrite record."""
    return site(r["rewrite"], r["at"], r.get("rule") if r["rewrite"] == "algebra" else None)


def _named(forced: dict[str, bool]) -> dict[str, str]:
    return {k: ("apply" if v else "keep as written") for k, v in forced.items()}


@dataclass
class State:
    forced: dict[str, bool]
    graph: Graph
    records: list[dict[str, Any]]
    hoisted: dict[str, Any] | None
    result: SearchResult

    def summary(self) -> dict[str, Any]:
        label = self.result.ranked[0][0].label if self.result.ranked else "greedy"
        return {"forced": _named(self.forced),
                "taken": [site_of(r) for r in self.records if r["taken"]] + (["hoist"] if self.hoisted else []),
                "predicted_ms": self.result.best_ms, "partition": label,
                "kernels": len([g for g in self.result.best.groups if g.nodes])}


@dataclass
class SequenceSearch:
    """The record of :func:`search_sequences` (``SearchResult.sequence``; figures predicted)."""
    budget: int
    seed: int
    states: list[dict[str, Any]] = field(default_factory=list)  # every evaluated state, in order
    winner: int = 0  # index in ``states``
    greedy_rewrites_ms: float = 0.0  # the seed state: greedy rewrites, then the partition search
    strategy: str = DEFAULT_STRATEGY  # strategies.STRATEGIES
    iterations: int = 0  # mcts: tree iterations (hill: 0)
    memo_hits: int = 0  # mcts: states reached again by another path, not evaluated again
    stopped: bool = False  # the search's time share ran out: the best state and partition found so far won
    moves: list[dict[str, Any]] = field(default_factory=list)  # every evaluated move (move_prior's records)
    move_order: str = MOVE_ORDER  # the order the moves were tried in (the margins', or the learned prior's)
    move_prior: dict[str, Any] | None = None  # the prior used: what it was trained on (None: the margins)

    def to_json(self) -> dict[str, Any]:
        best = self.states[self.winner]["predicted_ms"] if self.states else None
        return {"strategy": self.strategy, "strategy_description": STRATEGIES[self.strategy][1],
                "budget": self.budget, "seed": self.seed, "evaluated": len(self.states),
                "dead_ends": sum("error" in st for st in self.states), "iterations": self.iterations,
                "memo_hits": self.memo_hits, "move_order": self.move_order, "move_prior": self.move_prior,
                "stopped": self.stopped,
                "winner": self.winner, "winner_forced": self.states[self.winner]["forced"] if self.states else {},
                "predicted_ms": best, "greedy_rewrites_ms": self.greedy_rewrites_ms,
                "gain_over_greedy_rewrites": self.greedy_rewrites_ms / best if best else None,
                "states": self.states, "moves": self.moves}


def _moves(state: State, rng: random.Random, prior: Any = None, target: str = "") -> list[tuple[str, bool]]:
    """The single-site flips of ``state`` at sites it does not force already, closest model calls
    first, ties in a seeded order; with a ``prior`` (:class:`.move_prior.MovePrior`), most negative
    predicted outcome first instead (the same seeded order on ties)."""
    sites: dict[str, tuple[float, bool]] = {}
    for r in state.records:
        if site_of(r) in state.forced:  # flipping it back is the state this one came from
            continue
        before, after = r.get("before_ms"), r.get("after_ms")
        margin = abs(after - before) / before if before and after is not None else float("inf")
        sites.setdefault(site_of(r), (margin, not r["taken"]))
    keys = sorted(sites)
    rng.shuffle(keys)
    if prior is None:
        keys.sort(key=lambda k: sites[k][0])  # stable: equal margins keep the seeded order
    elif keys:
        from .move_prior import state_features

        predicted = prior.predict([state_features(state, k, sites[k][1], target) for k in keys])
        score = {k: float(v) for k, v in zip(keys, predicted)}
        keys.sort(key=lambda k: score[k])  # stable: equal predictions keep the seeded order
    return [(k, sites[k][1]) for k in keys]


def _move_records(trials: list[Any], target: str) -> list[dict[str, Any]]:
    """One record per evaluated state reached by a move (:mod:`.move_prior`): its parent's and its own
    index in ``trials``, the flip, the features known before it was evaluated (from the parent), and
    its outcome, ``log(child / parent)`` of the predicted times (None for a dead end)."""
    from .move_prior import TIMING_KIND, state_features

    index = {frozenset(t.forced.items()): i for i, t in enumerate(trials)}
    out = []
    for j, t in enumerate(trials):
        if t.parent is None:
            continue
        i = index.get(frozenset(t.parent.items()))
        if i is None:
            continue
        p = trials[i]
        flipped = [(k, v) for k, v in t.forced.items() if p.forced.get(k) != v]
        if len(flipped) != 1 or p.value is None:
            continue
        key, take = flipped[0]
        dead = t.score is None
        rec: dict[str, Any] = {"parent": i, "child": j, "site": key, "take": "apply" if take else "keep as written",
                               "via": t.via, "features": state_features(p.value, key, take, target),
                               "parent_ms": p.score, "child_ms": t.score,
                               "outcome": None if dead or not (t.score > 0 and p.score > 0) else math.log(t.score / p.score),
                               "dead_end": dead, "timing_kind": TIMING_KIND}
        if dead:
            rec["error"] = t.error
        out.append(rec)
    return out


def _prior_for(prior: Any, target: str) -> tuple[Any, str | None]:
    """``prior`` as given, or for ``"auto"`` the one saved for ``target`` beside the tuning DB where its
    gate lets it order moves (None: none, ``WARPSMITH_MOVE_PRIOR=0``, or the gate says no), and why a
    saved one is not used (else None)."""
    if not isinstance(prior, str):
        return prior, None
    if prior != "auto":
        from ..core.errors import InvalidInputError

        raise InvalidInputError("sequence search move prior", "'auto', None or a MovePrior", prior)
    from ..core.settings import settings
    from .move_prior import load_for

    return load_for(settings().db_path, target)


def search_sequences(g: Graph, target: Any, budget: int = SEQUENCE_BUDGET, seed: int = 0,
                     partitions: int = 200, strategy: str = DEFAULT_STRATEGY,
                     stop: Stop | None = None, prior: Any = "auto") -> tuple[State, SequenceSearch]:
    """Search rewrite decisions and partitions of ``g`` (lowered, not rewritten; left unchanged)
    together, at most ``budget`` states, with ``strategy`` (:data:`.strategies.STRATEGIES`: ``hill``
    or ``mcts``; see the module docstring). Returns the best state (its own graph, rewritten) and the
    search's record. Anytime: once ``stop()`` is true, no new state is evaluated and each partition
    search in progress returns its best so far (the record says ``stopped``). ``prior``: the learned
    move prior ordering the moves (:mod:`.move_prior`); ``"auto"``, the one saved for the target beside
    the tuning DB, if any; None: the cost model's margins."""
    if strategy not in STRATEGIES:
        from ..core.errors import InvalidInputError

        raise InvalidInputError("sequence search strategy", " or ".join(STRATEGIES), strategy)
    base = copy.deepcopy(g)
    name = str(getattr(target, "name", target))
    prior, unused = _prior_for(prior, name)

    def evaluate(forced: dict[str, bool]) -> tuple[float, State]:
        h = copy.deepcopy(base)
        with forcing(forced):
            records, hoisted = apply_rewrites(h, target)
        state = State(dict(forced), h, records, hoisted, run_search(h, target, partitions, stop=stop))
        return state.result.best_ms, state

    out = run_strategy(strategy, evaluate, {}, lambda forced, state, rng: _moves(state, rng, prior, name), budget,
                       random.Random(seed), stop=stop)
    states = [t.value.summary() if t.error is None else
              {"forced": _named(t.forced), "error": t.error, "predicted_ms": None} for t in out.trials]
    for st, t in zip(states, out.trials):
        st["via"] = t.via
    rec = SequenceSearch(budget, seed, states, out.winner, out.trials[0].score, strategy=strategy,
                         iterations=out.iterations, memo_hits=out.memo_hits,
                         stopped=out.stopped or any(t.value.result.stopped for t in out.trials if t.value is not None),
                         moves=_move_records(out.trials, name))
    if unused is not None:
        rec.move_order = f"{MOVE_ORDER}; {unused}"
    if prior is not None:
        rec.move_order = prior.describe()
        rec.move_prior = {"target": prior.target, **{k: prior.trained_on.get(k) for k in
                                                     ("records", "problems", "trained", "training_target", "timing_kind")}}
    return out.best.value, rec
