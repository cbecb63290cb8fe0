"""A steady-state genetic algorithm over a search space.

The population is the best ``pop_size`` distinct points with a finite score
(so the elite always survives; failures never become parents). Children come
from tournament selection, ``space.crossover`` and ``space.mutate``; a child
already seen is mutated again, and after a few tries replaced by a fresh
sample. When the incumbent has not improved for a while, a share of the next
proposals are random immigrants.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ..space import Point
from .strategy import AnySpace, Result, Strategy


class Evolutionary(Strategy):
    """Steady-state GA with tournament selection, elitism and random immigrants."""

    name = "evolutionary"

    def __init__(
        self,
        space: AnySpace,
        seed: int,
        initial: Sequence[Point] = (),
        *,
        pop_size: int = 12,
        tournament: int = 3,
        crossover_rate: float = 0.5,
        mutation_rate: float = 0.2,
        stall_limit: int = 40,
        immigrant_share: float = 0.25,
        retries: int = 8,
    ) -> None:
        super().__init__(space, seed, initial)
        self.pop_size = max(2, pop_size)
        self.tournament = max(1, tournament)
        self.crossover_rate = crossover_rate
        self.mutation_rate = mutation_rate
        self.stall_limit = stall_limit
        self.immigrant_share = immigrant_share
        self.retries = retries
        self.population: list[Result] = []   # finite scores only, best first
        self._stall = 0                       # results told since the incumbent last improved
        self._immigrants = 0                  # random immigrants still to propose

    def _ask(self, n: int) -> list[Point]:
        out: list[Point] = []
        while len(out) < n:
            if self._immigrants > 0 or len(self._seen) < self.pop_size or not self.population:
                self._immigrants = max(0, self._immigrants - 1)
                p = self._fresh()
            else:
                p = self._child()
            if p is None:
                break
            self._take(p)
            out.append(p)
        return out

    def _select(self) -> Point:
        """Tournament selection among the (finite-scored) population."""
        k = min(self.tournament, len(self.population))
        picks = [self.rng.randrange(len(self.population)) for _ in range(k)]
        return self.population[min(picks)][0]  # population is sorted best first

    def _child(self) -> Optional[Point]:
        """An unseen child of two selected parents, or a fresh sample if breeding keeps repeating."""
        a = self._select()
        if self.rng.random() < self.crossover_rate and len(self.population) > 1:
            child = self.space.crossover(self.rng, a, self._select())
        else:
            child = dict(a)
        child = self.space.mutate(self.rng, child, self.mutation_rate)
        for _ in range(self.retries):
            if not self.seen(child):
                return child
            child = self.space.mutate(self.rng, child, self.mutation_rate)
        return self._fresh()

    def _told(self, results: list[Result]) -> None:
        before = self.population[0][1] if self.population else math.inf
        fresh = [(p, s) for p, s in results if math.isfinite(s)]
        if fresh:
            merged = list(self.population)
            have = {self.space.key(p) for p, _ in merged}
            for p, s in fresh:
                if self.space.key(p) not in have:
                    have.add(self.space.key(p))
                    merged.append((p, s))
            merged.sort(key=lambda r: r[1])  # stable: ties keep the earlier point
            self.population = merged[: self.pop_size]
        after = self.population[0][1] if self.population else math.inf
        if after < before:
            self._stall = 0
        else:
            self._stall += len(results)
        if self._stall >= self.stall_limit:
            self._stall = 0
            self._immigrants += max(1, int(self.pop_size * self.immigrant_share))
