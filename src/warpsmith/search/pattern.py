"""Coordinate / pattern search (steepest descent over ``space.neighbours``) with restarts.

The search starts from the best initial point (or ``space.default()``),
evaluates the unseen neighbours of its current centre, and once all of them
are scored moves to the best one that improves on the centre. At a local
optimum it restarts from the best initial point not yet used as a centre, or
else from fresh random samples (the best of which becomes the new centre).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ..space import Point
from .strategy import AnySpace, Result, Strategy


class PatternSearch(Strategy):
    """Steepest-descent neighbourhood search with random restarts."""

    name = "pattern"

    def __init__(
        self, space: AnySpace, seed: int, initial: Sequence[Point] = (), *, restart_samples: int = 4
    ) -> None:
        super().__init__(space, seed, initial)
        self.restart_samples = max(1, restart_samples)  # random draws scored before a restart picks
        self.center: Optional[Result] = None   # current centre and its (finite) score
        self._frontier: list[Point] = []       # neighbours of the centre still to propose
        self._step: list[Result] = []          # results told since the centre was last decided
        self._used: set[tuple] = set()         # keys of points that have been centres
        self._draws = 0                        # random start candidates proposed since the last start
        self.moves = 0
        self.restarts = 0

    def _ask(self, n: int) -> list[Point]:
        out: list[Point] = []
        while self._frontier and len(out) < n:
            p = self._frontier.pop(0)
            if self._take(p):
                out.append(p)
        if self.center is None and len(out) < n:
            # Looking for a start: the default first, then random samples (best one wins).
            d = self.space.default()
            if not self._seen and self._take(d):
                out.append(d)
            draws = self._fresh_batch(n - len(out))
            self._draws += len(draws)
            out += draws
        if not out and n > 0:
            # Still waiting for the centre's neighbours: explore rather than return [] (= exhausted).
            out = self._fresh_batch(1)
        return out

    def _told(self, results: list[Result]) -> None:
        self._step += results
        if not self._outstanding and not self._frontier and not self._initial:
            self._advance()

    def _set_center(self, result: Result) -> None:
        """Centre on ``result``; queue its unseen neighbours, count its already-scored ones."""
        self.center = result
        self._used.add(self.space.key(result[0]))
        self._frontier, self._step = [], []
        for p in self.space.neighbours(result[0]):
            k = self.space.key(p)
            if k in self.results:
                self._step.append(self.results[k])
            elif k not in self._seen:
                self._frontier.append(p)

    def _best_in(self, results: list[Result], below: float = math.inf) -> Optional[Result]:
        """The lowest finite result under ``below`` whose point has not been a centre."""
        best: Optional[Result] = None
        for p, s in results:
            if math.isfinite(s) and s < below and (best is None or s < best[1]):
                if self.space.key(p) not in self._used:
                    best = (p, s)
        return best

    def _advance(self) -> None:
        """Every proposal of this step is scored: start, move, or restart."""
        while True:
            if self.center is None and 0 < self._draws < self.restart_samples and not self._exhausted:
                return                                         # random start: draw some more first
            step, self._step = self._step, []
            if self.center is None:
                self._draws = 0
                nxt = self._best_in(step)                      # start: best scored candidate
            else:
                nxt = self._best_in(step, self.center[1])      # move: best improving neighbour
                self.moves += nxt is not None
            if nxt is None:
                self.restarts += self.center is not None
                self.center = None
                inits = [self.results[k] for k in self.results if k in self.initial_keys]
                nxt = self._best_in(inits)                     # best untried initial point
                if nxt is None:
                    return                                     # _ask proposes random starts
            self._set_center(nxt)
            if self._frontier or self._outstanding:
                return
