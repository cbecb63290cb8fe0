"""Uniform random search: the baseline every other strategy should beat."""
from __future__ import annotations

from ..space import Point
from .strategy import Strategy


class RandomSearch(Strategy):
    """Propose the initial points, then uniform samples of unseen points.

    Draws are retried a bounded number of times to find an unseen point; a
    small space is then enumerated, so an exhausted space gives ``[]``.
    """

    name = "random"

    def _ask(self, n: int) -> list[Point]:
        return self._fresh_batch(n)
