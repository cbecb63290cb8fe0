"""The strategies of the search over rewrite decisions (compiler.strategies), on synthetic landscapes
(no compiler): Monte Carlo tree search reaches a pair of flips that pays only together, where the
hill climb stops; both are deterministic for a seed, keep their budget, evaluate a state once and
report dead ends."""
import random

import pytest

from warpsmith.compiler import strategies as S
from warpsmith.errors import InvalidInputError

DECOYS = ["c", "d"]  # tried first: the move order does not favour the pair
SITES = DECOYS + ["a", "b"]
JOINT = {"a": True, "b": True}


def pair_landscape(forced):
    """10 at no flip; every flip costs 1, but flipping a and b together saves 7: {a, b} scores 5,
    each single flip 11 (worse than no flip)."""
    return 10.0 + len(forced) - (7.0 if forced.get("a") and forced.get("b") else 0.0), None


def all_sites(forced, value, rng):
    return [(k, True) for k in SITES if k not in forced]


class Counting:
    """``evaluate`` that records every call (to see budgets and memoisation)."""

    def __init__(self, f, fail=()):
        self.f, self.fail, self.calls = f, [frozenset(x) for x in fail], []

    def __call__(self, forced):
        self.calls.append(frozenset(forced.items()))
        if frozenset(forced) in self.fail:
            raise ValueError(f"cannot apply {sorted(forced)}")
        return self.f(forced)


WIDE = [f"s{i}" for i in range(6)] + ["a", "b"]  # 2**8 = 256 states; the pair is last in the move order


def wide_sites(forced, value, rng):
    return [(k, True) for k in WIDE if k not in forced]


@pytest.mark.parametrize("seed", range(10))
def test_mcts_finds_the_pair_that_pays_only_together_and_hill_does_not(seed):
    # 32 states: fewer than the 256 there are, and fewer than every single flip and then every pair
    # in the move order (1 + 8 + 28 = 37)
    budget = 32
    m = S.mcts(pair_landscape, {}, wide_sites, budget, random.Random(seed))
    assert m.best.forced == JOINT and m.best.score == 5.0 and len(m.trials) <= budget
    h = S.hill_climb(pair_landscape, {}, wide_sites, budget, random.Random(seed))
    # every single flip is worse: the hill climb tries the eight and stops at the initial state
    assert h.winner == 0 and h.best.forced == {} and len(h.trials) == 1 + len(WIDE)
    assert [t.via for t in h.trials] == ["initial"] + ["move"] * len(WIDE)


def test_the_hill_climb_takes_the_first_improvement_and_goes_on_from_there():
    def landscape(forced):  # each flip of a site in "ab" saves 1, others cost 1
        return 10.0 - sum(1 if k in "ab" else -1 for k in forced), None

    h = S.hill_climb(landscape, {}, all_sites, 20, random.Random(0))
    assert h.best.forced == JOINT and h.best.score == 8.0
    assert [sorted(t.forced) for t in h.trials] == [[], ["c"], ["d"], ["a"], ["a", "c"], ["a", "d"], ["a", "b"],
                                                    ["a", "b", "c"], ["a", "b", "d"]]


@pytest.mark.parametrize("strategy", sorted(S.STRATEGIES))
def test_a_strategy_is_deterministic_for_a_seed(strategy):
    def trace(seed):
        o = S.run(strategy, pair_landscape, {}, all_sites, 12, random.Random(seed))
        return [(t.forced, t.score, t.via) for t in o.trials], o.winner, o.iterations, o.memo_hits

    assert trace(3) == trace(3)
    if strategy == "mcts":  # the seed draws the rollouts: some other seed walks other states
        assert any(trace(s)[0] != trace(3)[0] for s in range(4, 12))


@pytest.mark.parametrize("strategy", sorted(S.STRATEGIES))
@pytest.mark.parametrize("budget", [1, 2, 5, 9, 40])
def test_the_budget_is_kept_and_each_state_is_evaluated_once(strategy, budget):
    ev = Counting(pair_landscape)
    o = S.run(strategy, ev, {}, all_sites, budget, random.Random(1))
    assert len(ev.calls) == len(o.trials) <= budget and len(set(ev.calls)) == len(ev.calls)
    assert o.trials[0].forced == {} and o.trials[0].via == "initial"
    if strategy == "mcts":
        # 16 states in all (every subset of 4 sites): a budget above it stops when the tree is exhausted
        assert len(o.trials) == min(budget, 2 ** len(SITES))
        assert budget < 2 ** len(SITES) or o.best.forced == JOINT


def test_mcts_reports_dead_ends_and_goes_on():
    ev = Counting(pair_landscape, fail=[{"c"}, {"d"}])
    o = S.mcts(ev, {}, all_sites, 16, random.Random(0))
    dead = [t for t in o.trials if t.error is not None]
    assert o.dead_ends == len(dead) == 2 and all("cannot apply" in t.error and t.score is None for t in dead)
    assert o.best.forced == JOINT  # the dead ends' subtrees are not searched, the rest is


def test_the_initial_state_s_error_is_raised_and_bad_arguments_are_named():
    def broken(forced):
        raise ValueError("the greedy rewrites fail")

    for strategy in S.STRATEGIES:
        with pytest.raises(ValueError, match="greedy rewrites fail"):
            S.run(strategy, broken, {}, all_sites, 4, random.Random(0))
        with pytest.raises(InvalidInputError, match="sequence search budget"):
            S.run(strategy, pair_landscape, {}, all_sites, 0, random.Random(0))
        with pytest.raises(InvalidInputError, match="random.Random"):
            S.run(strategy, pair_landscape, {}, all_sites, 4, 0)
    with pytest.raises(InvalidInputError, match="rollout_depth"):
        S.mcts(pair_landscape, {}, all_sites, 4, random.Random(0), rollout_depth=-1)
    with pytest.raises(InvalidInputError, match="hill or mcts"):
        S.run("anneal", pair_landscape, {}, all_sites, 4, random.Random(0))


def test_the_cli_offers_the_strategies_the_module_has():
    from warpsmith.cli.solve_cmd import solve

    opt = next(p for p in solve.params if p.name == "strategy")
    assert sorted(opt.type.choices) == sorted(S.STRATEGIES)
