"""The interface every search strategy implements, and the strategy registry.

A strategy proposes points of a :class:`~warpsmith.space.Space` (or
:class:`~warpsmith.space.JointSpace`) through :meth:`Strategy.ask` and learns
their scores (times: lower is better, ``inf`` for failures) through
:meth:`Strategy.tell`. It never proposes the same point twice, and all of its
randomness comes from one ``random.Random(seed)``, so the same seed and the
same ``tell`` calls give the same proposals.
"""
from __future__ import annotations

import abc
import math
import random
from typing import Any, ClassVar, Optional, Sequence, Union

from ..core.errors import UnknownNameError
from ..space import JointSpace, Point, Space

AnySpace = Union[Space, JointSpace]
Result = tuple[Point, float]

#: Spaces up to this size are enumerated when random draws keep hitting seen points.
ENUMERATE_LIMIT = 200_000

#: name -> strategy class; filled as subclasses with a ``name`` are defined.
STRATEGIES: dict[str, type["Strategy"]] = {}


def clean_score(score: Any) -> float:
    """Turn a reported score into a float; NaN and unparseable scores count as failures (``inf``)."""
    try:
        s = float(score)
    except (TypeError, ValueError):
        return math.inf
    return math.inf if math.isnan(s) else s


class Strategy(abc.ABC):
    """Base class: bookkeeping of seen points, initial points, results and the incumbent.

    Subclasses implement :meth:`_ask` (propose fresh points after the initial
    ones) and may override :meth:`_told` (react to new results).
    """

    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            STRATEGIES[cls.name] = cls

    def __init__(self, space: AnySpace, seed: int, initial: Sequence[Point] = ()) -> None:
        self.space = space
        self.seed = seed
        self.rng = random.Random(seed)
        self._seen: dict[tuple, Point] = {}          # every point proposed or told, by key
        self._outstanding: dict[tuple, Point] = {}   # proposed, result not yet told
        self.results: dict[tuple, Result] = {}       # key -> (point, score)
        self.history: list[Result] = []              # results in the order told
        self._best: Optional[Result] = None
        self._exhausted = False
        self._initial: list[Point] = []
        keys: set[tuple] = set()
        for p in initial:
            if space.contains(p) and space.key(p) not in keys:
                keys.add(space.key(p))
                self._initial.append(dict(p))
        self.initial_keys = keys

    # -- public interface -------------------------------------------------------------
    def ask(self, n: int) -> list[Point]:
        """Up to ``n`` new points: the untried initial points first, then the strategy's own."""
        out: list[Point] = []
        while len(out) < n and self._initial:
            p = self._initial.pop(0)
            if self._take(p):
                out.append(p)
        if len(out) < n:
            out += self._ask(n - len(out))
        return out

    def tell(self, results: Sequence[tuple[Point, float]]) -> None:
        """Record scores (lower is better; ``inf``/NaN mean the point failed)."""
        clean: list[Result] = []
        for point, score in results:
            p, s = dict(point), clean_score(score)
            k = self.space.key(p)
            self._seen.setdefault(k, p)
            self._outstanding.pop(k, None)
            self.results[k] = (p, s)
            self.history.append((p, s))
            if math.isfinite(s) and (self._best is None or s < self._best[1]):
                self._best = (p, s)
            clean.append((p, s))
        self._told(clean)

    @property
    def best(self) -> Optional[Result]:
        """The incumbent: the point with the lowest finite score told so far (None if none)."""
        return self._best

    # -- for subclasses ---------------------------------------------------------------
    @abc.abstractmethod
    def _ask(self, n: int) -> list[Point]:
        """Up to ``n`` fresh points (after the initial ones are used up)."""

    def _told(self, results: list[Result]) -> None:
        """Hook called after :meth:`tell` recorded ``results`` (scores already cleaned)."""

    def seen(self, point: Point) -> bool:
        return self.space.key(point) in self._seen

    def _take(self, point: Point) -> bool:
        """Mark ``point`` as proposed; False (and nothing marked) if it was seen before."""
        k = self.space.key(point)
        if k in self._seen:
            return False
        self._seen[k] = point
        self._outstanding[k] = point
        return True

    def _fresh(self, tries: int = 64) -> Optional[Point]:
        """An unseen point drawn uniformly (not yet marked), or None if the space is exhausted."""
        if self._exhausted:
            return None
        for _ in range(tries):
            p = self.space.sample(self.rng)
            if not self.seen(p):
                return p
        if self.space.size() > ENUMERATE_LIMIT:
            return None
        rest = [p for p in self.space.enumerate() if not self.seen(p)]
        if not rest:
            self._exhausted = True
            return None
        return self.rng.choice(rest)

    def _fresh_batch(self, n: int) -> list[Point]:
        """Up to ``n`` fresh points, marked as proposed."""
        out: list[Point] = []
        while len(out) < n:
            p = self._fresh()
            if p is None:
                break
            self._take(p)
            out.append(p)
        return out


def make_strategy(name: str, space: AnySpace, seed: int, initial: Sequence[Point] = ()) -> Strategy:
    """Build the strategy registered as ``name``; UnknownNameError if there is none."""
    from . import evolutionary, pattern, random_search  # noqa: F401  (registers the built-in strategies)

    if name not in STRATEGIES:
        raise UnknownNameError("strategy", name, list(STRATEGIES))
    return STRATEGIES[name](space, seed, initial)
