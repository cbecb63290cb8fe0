"""Exceptions raised by warpsmith.

Every message says what was expected and what was given. The CLI maps
:class:`WarpsmithError` to exit code 2.
"""
from __future__ import annotations


class WarpsmithError(Exception):
    """Base class of every error warpsmith raises on purpose."""


class InvalidInputError(WarpsmithError, ValueError):
    """A user's argument (tensor, shape, dtype, name) is not acceptable."""

    def __init__(self, what: str, expected: str, given: object) -> None:
        self.what, self.expected, self.given = what, expected, given
        super().__init__(f"{what}: expected {expected}, got {given!r}")


class UnknownNameError(InvalidInputError):
    """A name (op, dtype, axis, target, strategy, variant) is not one we know."""

    def __init__(self, kind: str, given: str, known: list[str] | tuple[str, ...]) -> None:
        super().__init__(f"unknown {kind}", "one of " + ", ".join(sorted(known)), given)


class GuardError(WarpsmithError):
    """A guarded specialization was asked for where its guard does not hold."""


class DatabaseError(WarpsmithError):
    """The tuning database or an import file is unusable."""


class VerificationError(WarpsmithError):
    """No candidate passed verification; ``result`` holds what the search found (if any)."""

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result
