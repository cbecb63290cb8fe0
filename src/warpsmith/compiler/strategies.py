"""Strategies of the search over rewrite decisions (:mod:`.sequence`): pure functions of an
``evaluate`` function, an initial state, a ``moves`` function, a budget and a random generator, so
that they are tested without the compiler (tests/compiler/test_sequence_strategies.py).

- A **state** is a dict of forced site decisions (``{site: take}``).
- ``evaluate(state) -> (score, value)``: the state's score (lower is better: the compiler's is a
  predicted time) and whatever ``moves`` needs (the compiler's: the rewritten graph, its records, its
  best partition). It may raise: the state is a **dead end**, its error kept in its :class:`Trial`
  (the initial state's error is raised).
- ``moves(state, value, rng) -> [(site, take), ...]``: the single-site flips of an evaluated state,
  in the order they are worth trying (the compiler's: the closest model calls first, ties in an order
  drawn from ``rng``). A flip of a site the state forces already is never taken (so every path of
  moves forces one more site per step and ends).
- ``budget``: the most states evaluated, the initial one included; a state is evaluated at most once
  (memoised: reached again by another path it costs nothing). The same ``rng`` seed gives the same
  states in the same order and the same winner.

Two strategies (:data:`STRATEGIES`):

- :func:`hill_climb` (``hill``, the default): first-improvement hill climbing. The moves of the best
  state are tried in order; the first that lowers the score becomes the best state and its moves are
  tried next; it stops when no move of the best state improves it, or at the budget. A change that
  pays only when two sites flip together (each flip alone worse) is out of its reach.
- :func:`mcts` (``mcts``): Monte Carlo tree search with UCT. A node is a state, its children the
  flips of its moves not yet tried; states reached by two paths share one node (the tree is a DAG,
  acyclic since each move forces one more site). Each iteration descends from the root by UCT
  (``mean reward + C * sqrt(ln N(parent) / N(child))``, :data:`UCT_C`) through fully expanded nodes
  to one with an untried move, evaluates that child, then a rollout of up to :data:`ROLLOUT_DEPTH`
  random further flips (each evaluated, memoised); the reward is the best of the child's and the
  rollout's, backed up along the path. Rewards are normalised from the score by the initial
  state's: ``s0 / (s0 + s)`` (0.5 at the initial state, towards 1 as the score falls, 0 for a dead
  end). Flips commute (a state is a set of them), so every flip of an iteration's best state is
  credited with its reward whatever the order it came in (all moves as first, as RAVE does); a
  node expands first the untried moves no iteration has credited yet (in ``moves``' order), then the
  one with the best mean credit. It stops at the budget or when every node is exhausted. The winner
  is the lowest-scoring state evaluated anywhere (a rollout's included), the earliest on ties.

Rollouts cost evaluations, the search's budget. On the synthetic landscape of
tests/compiler/test_sequence_strategies.py with 8 sites (a pair that pays only together, last in the move
order; 20 seeds), the budget at which :func:`mcts` first had the pair as its winner was 16 for every
seed without rollouts, 13 to 30 (median 28) with one flip and 19 to 62 (median 41) with two
(``python scripts/sequence_strategies.py``). ``rollout_depth`` is a parameter; the default, one
flip, keeps the random rollouts the search is named for at the smallest cost measured.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable

Forced = dict[str, bool]
Move = tuple[str, bool]
Evaluate = Callable[[Forced], tuple[float, Any]]
Moves = Callable[[Forced, Any, random.Random], list[Move]]
Stop = Callable[[], bool]  # true once the search's time share has run out (compiler.progress.Progress.stop_after)

UCT_C = 1 / math.sqrt(2)  # UCT's exploration constant for rewards in [0, 1] (Kocsis and Szepesvari)
ROLLOUT_DEPTH = 1  # random further flips after an expansion (module docstring: why not more)
IMPROVES = 1 - 1e-9  # a score below best * IMPROVES is an improvement (not a tie within rounding)


@dataclass
class Trial:
    """One evaluated state: its score and value, or its error (a dead end), how it was reached
    (``initial``; hill: ``move``; mcts: ``expand`` or ``rollout``) and from which state (``parent``: the
    evaluated state one flip away whose move it was; None for the initial state)."""
    forced: Forced
    score: float | None
    value: Any = field(default=None, repr=False)
    error: str | None = None
    via: str = "initial"
    parent: Forced | None = None


@dataclass
class Outcome:
    """What a strategy did: every evaluated state in order (``trials[0]`` the initial state), the
    winner's index, and for mcts its iterations and the states reached again at no cost."""
    strategy: str
    budget: int
    trials: list[Trial]
    winner: int = 0
    iterations: int = 0
    memo_hits: int = 0
    stopped: bool = False  # its time share ran out before its budget (anytime: the best state so far won)

    @property
    def best(self) -> Trial:
        return self.trials[self.winner]

    @property
    def dead_ends(self) -> int:
        return sum(t.error is not None for t in self.trials)


def _check(budget: int, rng: Any) -> None:
    from ..core.errors import InvalidInputError

    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidInputError("sequence search budget", "at least 1 state (the greedy rewrites)", budget)
    if not isinstance(rng, random.Random):
        raise InvalidInputError("sequence search rng", "a random.Random", type(rng).__name__)


class _Evaluator:
    """``evaluate`` memoised by state, within ``budget``; every new state appended to ``trials``."""

    def __init__(self, evaluate: Evaluate, budget: int, stop: Stop | None = None) -> None:
        self.evaluate, self.budget, self.stop = evaluate, budget, stop
        self.trials: list[Trial] = []
        self.memo: dict[frozenset, Trial] = {}
        self.hits = 0
        self.stopped = False  # ``stop`` said so before the budget was spent

    @property
    def spent(self) -> bool:
        if len(self.trials) >= self.budget:
            return True
        if self.stop is not None and self.trials and self.stop():  # the initial state is always evaluated
            self.stopped = True
        return self.stopped

    def initial(self, forced: Forced) -> Trial:
        score, value = self.evaluate(dict(forced))  # the initial state's error is raised
        return self._keep(Trial(dict(forced), float(score), value, None, "initial"))

    def __call__(self, forced: Forced, via: str, parent: Forced | None = None) -> Trial | None:
        """The state's trial (memoised), or None when it is new and the budget is spent; ``parent``: the
        state whose move it is (kept in a new trial)."""
        key = frozenset(forced.items())
        if key in self.memo:
            self.hits += 1
            return self.memo[key]
        if self.spent:
            return None
        try:
            score, value = self.evaluate(dict(forced))
        except Exception as e:  # noqa: BLE001 - a forced site a later pass cannot work with: a dead end, reported
            return self._keep(Trial(dict(forced), None, None, f"{type(e).__name__}: {str(e)[:200]}", via,
                                    None if parent is None else dict(parent)))
        return self._keep(Trial(dict(forced), float(score), value, None, via, None if parent is None else dict(parent)))

    def _keep(self, t: Trial) -> Trial:
        self.trials.append(t)
        self.memo[frozenset(t.forced.items())] = t
        return t


def _winner(trials: list[Trial]) -> int:
    best = 0
    for i, t in enumerate(trials):
        if t.score is not None and t.score < trials[best].score * IMPROVES:
            best = i
    return best


def hill_climb(evaluate: Evaluate, initial: Forced, moves: Moves, budget: int, rng: random.Random,
               stop: Stop | None = None) -> Outcome:
    """First-improvement hill climbing over single-site flips (module docstring); no new state once
    ``stop()`` is true."""
    _check(budget, rng)
    ev = _Evaluator(evaluate, budget, stop)
    best = ev.initial(initial)
    winner = 0
    improved = True
    while improved and not ev.spent:
        improved = False
        for key, take in moves(best.forced, best.value, rng):
            if key in best.forced:  # flipping it back is the state this one came from
                continue
            forced = {**best.forced, key: take}
            if frozenset(forced.items()) in ev.memo:
                continue
            if ev.spent:
                break
            t = ev(forced, "move", best.forced)
            if t is not None and t.score is not None and t.score < best.score * IMPROVES:
                best, winner, improved = t, len(ev.trials) - 1, True
                break
    return Outcome("hill", budget, ev.trials, winner, stopped=ev.stopped)


class _Node:
    __slots__ = ("trial", "untried", "children", "visits", "total", "exhausted")

    def __init__(self, trial: Trial, moves: Moves, rng: random.Random) -> None:
        self.trial = trial
        self.untried: list[Move] = ([] if trial.score is None
                                    else _fresh(trial.forced, moves(trial.forced, trial.value, rng)))
        self.children: list[_Node] = []
        self.visits = 0
        self.total = 0.0
        self.exhausted = trial.score is None

    def uct(self, parent_visits: int) -> float:
        if self.visits == 0:
            return math.inf
        return self.total / self.visits + UCT_C * math.sqrt(math.log(parent_visits) / self.visits)


def _fresh(forced: Forced, moves: list[Move]) -> list[Move]:
    """``moves`` without flips of sites ``forced`` names, each site once, in order."""
    seen: set[str] = set()
    out = []
    for key, take in moves:
        if key not in forced and key not in seen:
            seen.add(key)
            out.append((key, take))
    return out


def _pick(untried: list[Move], amaf: dict[Move, tuple[float, int]]) -> int:
    """The untried move to expand: the first never seen in an iteration's best state (the moves'
    order), else the one with the best mean reward over the iterations whose best state held it."""
    best, value = 0, -1.0
    for i, m in enumerate(untried):
        if m not in amaf:
            return i
        v = amaf[m][0] / amaf[m][1]
        if v > value:
            best, value = i, v
    return best


def mcts(evaluate: Evaluate, initial: Forced, moves: Moves, budget: int, rng: random.Random,
         rollout_depth: int = ROLLOUT_DEPTH, stop: Stop | None = None) -> Outcome:
    """Monte Carlo tree search (UCT) over single-site flips, rollouts of up to ``rollout_depth``
    random flips (module docstring)."""
    _check(budget, rng)
    if isinstance(rollout_depth, bool) or not isinstance(rollout_depth, int) or rollout_depth < 0:
        from ..core.errors import InvalidInputError

        raise InvalidInputError("mcts rollout_depth", "an integer >= 0", rollout_depth)
    ev = _Evaluator(evaluate, budget, stop)
    root_trial = ev.initial(initial)
    s0 = root_trial.score

    def reward(t: Trial) -> float:
        if t.score is None:
            return 0.0
        return s0 / (s0 + t.score) if s0 + t.score > 0 else 0.5

    nodes: dict[frozenset, _Node] = {}

    def node(t: Trial) -> _Node:
        key = frozenset(t.forced.items())
        if key not in nodes:
            nodes[key] = _Node(t, moves, rng)
        return nodes[key]

    root = node(root_trial)
    amaf: dict[Move, tuple[float, int]] = {}
    iterations = 0
    while not ev.spent and not root.exhausted:
        path = [root]
        cur = root
        while not cur.untried:  # descend through fully expanded nodes by UCT
            live = [c for c in cur.children if not c.exhausted]
            if not live:
                cur.exhausted = True
                break
            parent = cur.visits
            cur = max(live, key=lambda c: c.uct(parent))  # max keeps the first of equals
            path.append(cur)
        if cur.exhausted:
            continue  # start again from the root (the loop stops once the root is exhausted)
        iterations += 1
        key, take = cur.untried.pop(_pick(cur.untried, amaf))
        t = ev({**cur.trial.forced, key: take}, "expand", cur.trial.forced)
        if t is None:  # a new state, and the budget is spent
            break
        child = node(t)
        if child not in cur.children:
            cur.children.append(child)
        path.append(child)
        best = reward(t)
        state = top = t
        for _ in range(rollout_depth):  # random further flips from the new child
            if state.score is None or ev.spent:
                break
            options = _fresh(state.forced, moves(state.forced, state.value, rng))
            if not options:
                break
            k, v = options[rng.randrange(len(options))]
            nxt = ev({**state.forced, k: v}, "rollout", state.forced)
            if nxt is None:
                break
            if reward(nxt) > best:
                best, top = reward(nxt), nxt
            state = nxt
        for n in path:
            n.visits += 1
            n.total += best
        for m in top.forced.items():  # all moves as first: a flip's worth, whatever the order it came in
            s_, c_ = amaf.get(m, (0.0, 0))
            amaf[m] = (s_ + best, c_ + 1)
    return Outcome("mcts", budget, ev.trials, _winner(ev.trials), iterations, ev.hits, ev.stopped)


STRATEGIES: dict[str, tuple[Callable[..., Outcome], str]] = {
    "hill": (hill_climb, "first-improvement hill climbing over single-site flips"),
    "mcts": (mcts, f"Monte Carlo tree search (UCT, C={UCT_C:.3g}) over single-site flips, expanded by "
                   f"all-moves-as-first credit, rollouts of up to {ROLLOUT_DEPTH} random flip(s), reward "
                   "s0/(s0+s) from the predicted time"),
}
DEFAULT_STRATEGY = "hill"


def run(strategy: str, evaluate: Evaluate, initial: Forced, moves: Moves, budget: int,
        rng: random.Random, stop: Stop | None = None) -> Outcome:
    """The named strategy (:data:`STRATEGIES`) on the arguments; an unknown name raises
    :class:`~warpsmith.core.errors.InvalidInputError`. ``stop``: evaluated before each new state past
    the initial one; once true, the strategy ends with the best state so far (``Outcome.stopped``)."""
    if strategy not in STRATEGIES:
        from ..core.errors import InvalidInputError

        raise InvalidInputError("sequence search strategy", " or ".join(STRATEGIES), strategy)
    return STRATEGIES[strategy][0](evaluate, initial, moves, budget, rng, stop=stop)
