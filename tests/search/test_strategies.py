"""Search strategies: determinism, uniqueness, failure handling, exhaustion and search quality."""
from __future__ import annotations

import math
import random
import statistics
from typing import Callable

import pytest

from warpsmith.errors import InvalidInputError, UnknownNameError
from warpsmith.search import STRATEGIES, Evolutionary, PatternSearch, RandomSearch, Strategy, make_strategy
from warpsmith.space import Bool, Enum, IntRange, JointSpace, Pow2, Space, choices

NAMES = ["random", "evolutionary", "pattern"]

# 5 * 5 * 5 * 4 * 2 * 4 = 4000 points.
SPACE = Space({
    "BLOCK_M": Pow2(16, 256, 64),
    "BLOCK_N": Pow2(16, 256, 64),
    "STAGES": IntRange(1, 5, 2),
    "ORDER": Enum(("a", "b", "c", "d"), "a"),
    "SPLIT": Bool(False),
    "WARPS": Pow2(1, 8, 4),
})

# ORDER x SPLIT interaction: (b, False) is a local optimum (a trap for coordinate search), (c, True) the global one.
ORDER_COST = {False: {"a": 0.30, "b": 0.20, "c": 0.50, "d": 0.40}, True: {"a": 0.35, "b": 0.25, "c": 0.0, "d": 0.40}}


def objective(p: dict) -> float:
    """Quadratic-ish in the knobs' indices, with an interaction term and infeasible (inf) regions."""
    m, n = p["BLOCK_M"], p["BLOCK_N"]
    if m * n > 128 * 128 or (p["WARPS"] == 1 and m >= 128) or (p["STAGES"] == 5 and m * n >= 128 * 128):
        return math.inf
    i, j, w = int(math.log2(m)) - 4, int(math.log2(n)) - 4, int(math.log2(p["WARPS"]))
    v = 1.0 + 0.08 * (i - 3) ** 2 + 0.06 * (j - 3) ** 2 + 0.04 * (p["STAGES"] - 4) ** 2 + 0.05 * (w - 3) ** 2
    v += ORDER_COST[p["SPLIT"]][p["ORDER"]]
    if p["WARPS"] >= 8 and m < 64:
        v += 0.3
    return v


OPTIMUM = min(objective(p) for p in SPACE.enumerate())

# 128 + 192 = 320 points.
JOINT = JointSpace({
    "tiled": Space({"BLOCK_M": Pow2(16, 128, 64), "BLOCK_N": Pow2(16, 128, 64), "WARPS": Pow2(1, 8, 4),
                    "SPLIT": Bool(False)}),
    "persistent": Space({"BLOCK_M": Pow2(32, 256, 128), "BLOCK_N": Pow2(16, 128, 64), "STAGES": IntRange(1, 4, 2),
                         "ORDER": choices(["row", "col", "zig"], "row")}),
})


def joint_objective(p: dict) -> float:
    m, n = p["BLOCK_M"], p["BLOCK_N"]
    if m * n > 128 * 128:
        return math.inf
    base = 2.0 if p["variant"] == "tiled" else 1.0
    v = base + 0.1 * abs(math.log2(m) - 7) + 0.1 * abs(math.log2(n) - 6)
    if p["variant"] == "tiled":
        return v + 0.05 * abs(math.log2(p["WARPS"]) - 2) + (0.1 if p["SPLIT"] else 0.0)
    return v + 0.05 * abs(p["STAGES"] - 3) + {"row": 0.1, "col": 0.0, "zig": 0.2}[p["ORDER"]]


TINY = Space({"A": Pow2(1, 4, 1), "B": Bool(False), "C": choices(["x", "y"], "x")})              # 12 points
TINY_JOINT = JointSpace({"u": Space({"A": IntRange(0, 2, 0)}),
                         "v": Space({"A": IntRange(1, 3, 1), "B": Bool(True)})})               # 3 + 6 points
SPACES = {"space": (SPACE, objective), "joint": (JOINT, joint_objective)}


def drive(strategy: Strategy, f: Callable[[dict], float], budget: int, batch: int = 1,
          ) -> tuple[list[dict], float]:
    """Ask/evaluate/tell until ``budget`` evaluations or the strategy has nothing left; (proposals, best)."""
    proposals: list[dict] = []
    best = math.inf
    for _ in range(10 * budget + 10):  # bounded: a strategy that keeps returning [] cannot hang the test
        if len(proposals) >= budget:
            break
        points = strategy.ask(min(batch, budget - len(proposals)))
        if not points:
            break
        results = [(p, f(p)) for p in points]
        strategy.tell(results)
        proposals += points
        best = min([best] + [s for _, s in results])
    return proposals, best


def keys(space, points: list[dict]) -> list[tuple]:
    return [space.key(p) for p in points]


# -- registry -------------------------------------------------------------------------------

def test_registry_and_make_strategy() -> None:
    assert {"random": RandomSearch, "evolutionary": Evolutionary, "pattern": PatternSearch}.items() <= STRATEGIES.items()
    for name in NAMES:
        s = make_strategy(name, SPACE, 0)
        assert isinstance(s, STRATEGIES[name]) and s.name == name


def test_unknown_strategy_raises() -> None:
    with pytest.raises(UnknownNameError) as exc:
        make_strategy("annealing", SPACE, 0)
    assert isinstance(exc.value, InvalidInputError)
    assert "annealing" in str(exc.value) and "evolutionary" in str(exc.value)


# -- determinism, uniqueness, validity -----------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("space_name", list(SPACES))
@pytest.mark.parametrize("batch", [1, 6])
def test_deterministic_per_seed(name: str, space_name: str, batch: int) -> None:
    space, f = SPACES[space_name]
    a, _ = drive(make_strategy(name, space, 7), f, 150, batch)
    b, _ = drive(make_strategy(name, space, 7), f, 150, batch)
    c, _ = drive(make_strategy(name, space, 8), f, 150, batch)
    assert len(a) == 150 and a == b
    assert a != c


@pytest.mark.parametrize("name", ["evolutionary", "pattern"])
def test_proposals_depend_on_scores(name: str) -> None:
    """A strategy that ignored tell() would propose the same points whatever the scores."""
    a, _ = drive(make_strategy(name, SPACE, 1), objective, 80)
    b, _ = drive(make_strategy(name, SPACE, 1), lambda p: -objective(p) if math.isfinite(objective(p)) else 9.0, 80)
    assert a != b


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("space_name", list(SPACES))
@pytest.mark.parametrize("batch", [1, 7])
def test_no_duplicates_and_all_valid(name: str, space_name: str, batch: int) -> None:
    space, f = SPACES[space_name]
    budget = 300 if space is SPACE else space.size()
    points, _ = drive(make_strategy(name, space, 3), f, budget, batch)
    assert len(points) == budget
    assert len(set(keys(space, points))) == len(points)
    assert all(space.contains(p) for p in points)


@pytest.mark.parametrize("name", NAMES)
def test_initial_points_first_deduplicated(name: str) -> None:
    d = SPACE.default()
    other = {**d, "BLOCK_M": 128, "ORDER": "c"}
    bogus = {**d, "BLOCK_M": 48}                                  # not in the space: dropped
    s = make_strategy(name, SPACE, 0, initial=[other, d, other, bogus])
    first = s.ask(1) + s.ask(1)
    assert first == [other, d]
    s.tell([(p, objective(p)) for p in first])
    rest, _ = drive(s, objective, 100, 4)
    assert SPACE.key(other) not in keys(SPACE, rest) and SPACE.key(d) not in keys(SPACE, rest)


@pytest.mark.parametrize("name", NAMES)
def test_asking_again_before_tell_gives_new_points(name: str) -> None:
    s = make_strategy(name, SPACE, 5)
    got = s.ask(5) + s.ask(5) + s.ask(1)
    assert len(got) == 11 and len(set(keys(SPACE, got))) == 11
    assert s.ask(0) == []


# -- failures (inf) ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("space_name", list(SPACES))
def test_inf_scores_never_crash_nor_become_incumbent(name: str, space_name: str) -> None:
    space, f = SPACES[space_name]
    # Over half of the points fail; the finite scores are large, but any of them beats a failure.
    def harsh(p: dict) -> float:
        v = f(p)
        return v + 100.0 if math.isfinite(v) and space.encode(p)[0] < 0.5 else math.inf

    s = make_strategy(name, space, 11, initial=[space.sample(random.Random(0))])
    points, best = drive(s, harsh, 120, 3)
    finite = [harsh(p) for p in points if math.isfinite(harsh(p))]
    assert finite, "test objective should leave some finite points"
    assert s.best is not None and s.best[1] == min(finite) == best
    if isinstance(s, Evolutionary):
        assert s.population and all(math.isfinite(sc) for _, sc in s.population)
    if isinstance(s, PatternSearch) and s.center is not None:
        assert math.isfinite(s.center[1])


@pytest.mark.parametrize("name", NAMES)
def test_all_failures_and_nan(name: str) -> None:
    s = make_strategy(name, SPACE, 2)
    points, best = drive(s, lambda p: float("nan") if p["SPLIT"] else math.inf, 60, 4)
    assert len(points) == 60 and math.isinf(best)                 # NaN counts as a failure
    assert s.best is None
    s.tell([(points[0], 5.0), (points[1], math.inf)])             # one finite score: it is the incumbent
    assert s.best == (points[0], 5.0)
    assert len(s.ask(4)) == 4


# -- exhaustion --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("tiny", [TINY, TINY_JOINT], ids=["space", "joint"])
@pytest.mark.parametrize("batch", [1, 5])
def test_exhausting_a_tiny_space_returns_empty(name: str, tiny, batch: int) -> None:
    f = lambda p: math.inf if p.get("B") else float(sum(tiny.encode(p)))  # noqa: E731
    s = make_strategy(name, tiny, 4, initial=[tiny.default()])
    points, _ = drive(s, f, 10 * tiny.size(), batch)
    assert len(points) == tiny.size() and len(set(keys(tiny, points))) == tiny.size()
    assert sorted(keys(tiny, points)) == sorted(keys(tiny, list(tiny.enumerate())))
    assert s.ask(batch) == [] and s.ask(3) == []


# -- search quality ----------------------------------------------------------------------------

SEEDS = [0, 1, 2, 3, 4, 5, 6, 7]


def best_over_seeds(name: str, batch: int) -> list[float]:
    return [drive(make_strategy(name, SPACE, seed), objective, 200, batch)[1] for seed in SEEDS]


@pytest.mark.parametrize("name", ["evolutionary", "pattern"])
@pytest.mark.parametrize("batch", [1, 8])
def test_reaches_optimum_and_beats_random(name: str, batch: int) -> None:
    assert OPTIMUM == pytest.approx(1.0)  # the known exhaustive optimum of the 4000-point space
    bests = best_over_seeds(name, batch)
    hits = sum(b <= OPTIMUM * 1.02 for b in bests)
    assert hits >= 6, f"{name}: within 2% of the optimum for only {hits}/{len(SEEDS)} seeds: {bests}"
    rand = best_over_seeds("random", batch)
    assert statistics.mean(bests) < statistics.mean(rand) - 0.05, (bests, rand)


def test_failed_points_are_never_parents_or_centres() -> None:
    pts = [SPACE.sample(random.Random(i)) for i in range(30)]
    ga = Evolutionary(SPACE, 0)
    ga.ask(len(pts))
    ga.tell([(p, math.inf) for p in pts[:20]] + [(pts[20], 5.0)] + [(p, float("nan")) for p in pts[21:]])
    assert ga.population == [(pts[20], 5.0)] and ga.best == (pts[20], 5.0)
    assert len(ga.ask(10)) == 10

    ps = PatternSearch(SPACE, 0, initial=pts[:3])
    ps.tell([(p, s) for p, s in zip(ps.ask(3), [math.inf, 7.0, math.inf])])
    assert ps.center == (pts[1], 7.0)
    assert all(p in SPACE.neighbours(pts[1]) for p in ps.ask(3))  # it explores around the finite point

    ps = PatternSearch(SPACE, 0, initial=pts[:3])
    ps.tell([(p, math.inf) for p in ps.ask(3)])
    assert ps.center is None and ps.best is None
    assert len(ps.ask(4)) == 4


def test_pattern_moves_downhill_then_restarts_from_best_untried_initial() -> None:
    line = Space({"X": IntRange(0, 20, 0)})
    f = lambda p: (p["X"] - 5) ** 2 if p["X"] <= 10 else (p["X"] - 15) ** 2 + 0.5  # noqa: E731  local min 15, global 5
    s = PatternSearch(line, 0, initial=[{"X": 14}, {"X": 3}])
    centres: list[int] = []
    for _ in range(12):
        s.tell([(p, f(p)) for p in s.ask(1)])
        if s.center is not None and (not centres or centres[-1] != s.center[0]["X"]):
            centres.append(s.center[0]["X"])
    assert centres[:5] == [14, 15, 3, 4, 5]
    assert s.best == ({"X": 5}, 0) and s.restarts >= 1
