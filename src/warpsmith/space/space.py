"""Search spaces built from fragments.

:class:`Space` is a flat set of named knobs (one variant's space).
:class:`JointSpace` joins several variants' spaces under a ``variant`` choice;
a point is ``{"variant": name, **that variant's knobs}``. Knobs with the same
name in two variants carry over when a strategy switches variant.

Both offer the same operations (``default``, ``sample``, ``neighbours``,
``mutate``, ``crossover``, ``encode``, ``key``), which is all a strategy uses.
"""
from __future__ import annotations

import itertools
import random
from typing import Any, Iterator, Mapping

from .fragments import Fragment

Point = dict[str, Any]


class Space:
    def __init__(self, fragments: Mapping[str, Fragment]) -> None:
        self.fragments: dict[str, Fragment] = dict(fragments)

    def names(self) -> list[str]:
        return list(self.fragments)

    def default(self) -> Point:
        return {k: f.default for k, f in self.fragments.items()}

    def sample(self, rng: random.Random) -> Point:
        return {k: f.sample(rng) for k, f in self.fragments.items()}

    def neighbours(self, point: Point) -> list[Point]:
        out = []
        for k, f in self.fragments.items():
            for v in f.neighbours(point[k]):
                out.append({**point, k: v})
        return out

    def mutate(self, rng: random.Random, point: Point, rate: float = 0.3) -> Point:
        new = dict(point)
        keys = [k for k, f in self.fragments.items() if len(f.values()) > 1]
        if not keys:
            return new
        chosen = [k for k in keys if rng.random() < rate] or [rng.choice(keys)]
        for k in chosen:
            new[k] = self.fragments[k].mutate(rng, new[k])
        return new

    def crossover(self, rng: random.Random, a: Point, b: Point) -> Point:
        return {k: (a if rng.random() < 0.5 else b)[k] for k in self.fragments}

    def encode(self, point: Point) -> list[float]:
        return [f.encode(point[k]) for k, f in self.fragments.items()]

    def project(self, point: Mapping[str, Any]) -> Point:
        """Keep this space's knobs from ``point``; missing or out-of-domain ones take the default."""
        return {k: (point[k] if k in point and point[k] in f else f.default) for k, f in self.fragments.items()}

    def contains(self, point: Mapping[str, Any]) -> bool:
        return set(point) == set(self.fragments) and all(point[k] in f for k, f in self.fragments.items())

    def size(self) -> int:
        n = 1
        for f in self.fragments.values():
            n *= len(f.values())
        return n

    def enumerate(self) -> Iterator[Point]:
        names = list(self.fragments)
        for combo in itertools.product(*(self.fragments[k].values() for k in names)):
            yield dict(zip(names, combo))

    @staticmethod
    def key(point: Mapping[str, Any]) -> tuple:
        return tuple(sorted(point.items()))


class JointSpace:
    """Several variants' spaces, chosen among by a ``variant`` knob."""

    def __init__(self, spaces: Mapping[str, Space]) -> None:
        if not spaces:
            raise ValueError("JointSpace needs at least one variant")
        self.spaces = dict(spaces)
        self.variants = list(self.spaces)

    def _split(self, point: Point) -> tuple[str, Point]:
        name = point["variant"]
        return name, {k: v for k, v in point.items() if k != "variant"}

    def _join(self, name: str, knobs: Point) -> Point:
        return {"variant": name, **knobs}

    def default(self) -> Point:
        return self._join(self.variants[0], self.spaces[self.variants[0]].default())

    def defaults(self) -> list[Point]:
        return [self._join(n, s.default()) for n, s in self.spaces.items()]

    def sample(self, rng: random.Random) -> Point:
        name = rng.choice(self.variants)
        return self._join(name, self.spaces[name].sample(rng))

    def switch(self, point: Point, name: str) -> Point:
        _, knobs = self._split(point)
        return self._join(name, self.spaces[name].project(knobs))

    def neighbours(self, point: Point) -> list[Point]:
        name, knobs = self._split(point)
        out = [self._join(name, p) for p in self.spaces[name].neighbours(knobs)]
        out += [self.switch(point, other) for other in self.variants if other != name]
        return out

    def mutate(self, rng: random.Random, point: Point, rate: float = 0.3) -> Point:
        name, knobs = self._split(point)
        if len(self.variants) > 1 and rng.random() < 0.15:
            return self.switch(point, rng.choice([v for v in self.variants if v != name]))
        return self._join(name, self.spaces[name].mutate(rng, knobs, rate))

    def crossover(self, rng: random.Random, a: Point, b: Point) -> Point:
        name = a["variant"] if rng.random() < 0.5 else b["variant"]
        ka, kb = self.spaces[name].project(a), self.spaces[name].project(b)
        return self._join(name, self.spaces[name].crossover(rng, ka, kb))

    def encode(self, point: Point) -> list[float]:
        name, knobs = self._split(point)
        vec = [1.0 if v == name else 0.0 for v in self.variants]
        for n, s in self.spaces.items():
            vec += s.encode(s.project(knobs)) if n == name else [0.0] * len(s.fragments)
        return vec

    def contains(self, point: Point) -> bool:
        name, knobs = self._split(point)
        return name in self.spaces and self.spaces[name].contains(knobs)

    def size(self) -> int:
        return sum(s.size() for s in self.spaces.values())

    def enumerate(self) -> Iterator[Point]:
        for n, s in self.spaces.items():
            for p in s.enumerate():
                yield self._join(n, p)

    key = staticmethod(Space.key)
