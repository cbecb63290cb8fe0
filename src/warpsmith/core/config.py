"""Configs as frozen typed objects.

A config travels as a plain mapping (a point of the search space, a DB record's JSON, a test's
dict). A variant that declares ``knobs`` (a :class:`Knobs` subclass) reads it through
:meth:`Knobs.of` (``Variant.typed``): every knob is a typed attribute, optional knobs have their
default written once, in the class, instead of ``c.get("KNOB", default)`` at each use, and an
unknown or missing knob is an error that names it. Whether a config can run a problem stays one
predicate, ``Variant.rejection`` (validity, then guards).

Example:
    >>> @dataclass(frozen=True, kw_only=True)
    ... class RowKnobs(Knobs):
    ...     num_warps: int
    ...     ROWS_PER_PROGRAM: int = 1
    >>> RowKnobs.of({"num_warps": 4}).ROWS_PER_PROGRAM
    1
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Iterator, Mapping, TypeVar

from .errors import InvalidInputError

K = TypeVar("K", bound="Knobs")


@dataclass(frozen=True, kw_only=True)
class Knobs(Mapping[str, Any]):
    """Base of a variant's config type: a frozen, keyword-only dataclass whose fields are the knobs.

    It is also a read-only mapping over every knob (defaults included), so code that indexes a
    config (``c["BLOCK_N"]``) takes either form."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls: type[K], config: Mapping[str, Any]) -> K:
        """``config`` as this type (itself if it already is one); defaults fill the knobs it omits."""
        if isinstance(config, cls):
            return config
        names = cls.names()
        unknown = [k for k in config if k not in names]
        if unknown:
            raise InvalidInputError(f"knob of {cls.__name__}", "one of " + ", ".join(names), ", ".join(unknown))
        required = [f.name for f in fields(cls) if f.name not in config and f.default is f.default_factory]
        if required:
            raise InvalidInputError(f"config of {cls.__name__}", "a value for " + ", ".join(required), dict(config))
        return cls(**config)

    def __getitem__(self, name: str) -> Any:
        if name not in self.names():
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
