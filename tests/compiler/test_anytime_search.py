"""The search is anytime under a time limit: once its share of the time left runs out it evaluates no
new state nor partition, and the best found so far is emitted (and still proved and checked by
solve); the record says it stopped early."""
from __future__ import annotations

import random
import time
from pathlib import Path

from warpsmith.compiler import compile_problem
from warpsmith.compiler.progress import Progress
from warpsmith.compiler.search import search
from warpsmith.compiler.strategies import hill_climb, mcts

HERE = Path(__file__).parent / "problems"


def _evaluate(forced):
    return 10.0 - len(forced), None


def _moves(forced, value, rng):
    return [(f"s{i}", True) for i in range(6)]


def test_a_strategy_stops_when_told_and_keeps_its_best():
    for strategy in (hill_climb, mcts):
        free = strategy(_evaluate, {}, _moves, 5, random.Random(0))
        assert len(free.trials) == 5 and not free.stopped
        told = []
        out = strategy(_evaluate, {}, _moves, 5, random.Random(0), stop=lambda: len(told) >= 1 or told.append(1))
        assert 1 <= len(out.trials) < 5 and out.stopped
        assert out.best.score == min(t.score for t in out.trials)


def test_the_partition_search_stops_with_greedy_at_worst():
    from warpsmith.compiler.capture import capture, load_problem
    from warpsmith.compiler.ir import build
    from warpsmith.compiler.lower import lower
    from warpsmith.targets import get_target

    g = build(capture(load_problem(HERE / "swish_chain.py")))
    lower(g)
    full = search(g, get_target("h100"))
    cut = search(g, get_target("h100"), stop=lambda: True)
    assert cut.stopped and not full.stopped
    assert len(cut.explored) < len(full.explored)
    assert cut.best_ms <= cut.greedy_ms and cut.best_ms >= full.best_ms


def test_a_solve_out_of_search_time_emits_the_best_so_far():
    p = Progress()
    p.deadline = time.monotonic()  # no time left: the search's share is spent at once
    _, _, prog = compile_problem(HERE / "swish_chain.py", progress=p)
    s = prog.search
    assert s.early and s.to_json()["stopped_early"] and s.sequence.stopped
    assert len(s.sequence.states) == 1  # the seed state only
    assert "stopped early" in s.lines()[0]
    _, _, free = compile_problem(HERE / "swish_chain.py")
    assert not free.search.early and len(free.search.explored) > len(s.explored)
