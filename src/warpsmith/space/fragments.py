"""Typed search-space fragments.

Each fragment knows its default, a random draw, its neighbours, a mutation and a
numeric encoding in [0, 1], so every strategy works on every op without knowing
what a knob means.
"""
from __future__ import annotations

import abc
import math
import random
from dataclasses import dataclass
from typing import Any, Sequence


class Fragment(abc.ABC):
    """One knob's domain. Values are plain Python scalars (int, bool, str)."""

    default: Any

    @abc.abstractmethod
    def values(self) -> list[Any]:
        """Every value of the domain, in order."""

    def __contains__(self, value: Any) -> bool:
        return value in self.values()

    def sample(self, rng: random.Random) -> Any:
        return rng.choice(self.values())

    def neighbours(self, value: Any) -> list[Any]:
        vals = self.values()
        i = vals.index(value)
        return [vals[j] for j in (i - 1, i + 1) if 0 <= j < len(vals)]

    def mutate(self, rng: random.Random, value: Any) -> Any:
        near = self.neighbours(value)
        return rng.choice(near) if near else value

    def encode(self, value: Any) -> float:
        vals = self.values()
        return vals.index(value) / max(1, len(vals) - 1)

    def describe(self) -> str:
        return f"{type(self).__name__}({self.values()})"


@dataclass(frozen=True)
class Pow2(Fragment):
    """Powers of two in [lo, hi]."""

    lo: int
    hi: int
    default: int

    def __post_init__(self) -> None:
        for v in (self.lo, self.hi, self.default):
            if v < 1 or v & (v - 1):
                raise ValueError(f"Pow2 bounds and default must be powers of two, got {v}")
        if not self.lo <= self.default <= self.hi:
            raise ValueError(f"default {self.default} outside [{self.lo}, {self.hi}]")

    def values(self) -> list[int]:
        return [1 << e for e in range(int(math.log2(self.lo)), int(math.log2(self.hi)) + 1)]

    def describe(self) -> str:
        return f"pow2[{self.lo}..{self.hi}]"


@dataclass(frozen=True)
class IntRange(Fragment):
    """Integers lo, lo+step, ..., <= hi."""

    lo: int
    hi: int
    default: int
    step: int = 1

    def __post_init__(self) -> None:
        if self.hi < self.lo or (self.default - self.lo) % self.step or not self.lo <= self.default <= self.hi:
            raise ValueError(f"bad IntRange {self}")

    def values(self) -> list[int]:
        return list(range(self.lo, self.hi + 1, self.step))

    def describe(self) -> str:
        return f"int[{self.lo}..{self.hi} step {self.step}]"


@dataclass(frozen=True)
class Enum(Fragment):
    """One of a fixed list of choices (order matters only for neighbours)."""

    choices: tuple[Any, ...]
    default: Any

    def __post_init__(self) -> None:
        if self.default not in self.choices:
            raise ValueError(f"default {self.default!r} not in {self.choices}")

    def values(self) -> list[Any]:
        return list(self.choices)

    def neighbours(self, value: Any) -> list[Any]:  # unordered: every other choice is a neighbour
        return [c for c in self.choices if c != value]

    def describe(self) -> str:
        return "{" + ", ".join(map(str, self.choices)) + "}"


@dataclass(frozen=True)
class Bool(Fragment):
    default: bool = False

    def values(self) -> list[bool]:
        return [False, True]

    def describe(self) -> str:
        return "bool"


def fixed(value: Any) -> Enum:
    """A fragment with one choice (a knob pinned for this problem)."""
    return Enum((value,), value)


def choices(values: Sequence[Any], default: Any) -> Enum:
    return Enum(tuple(values), default)
