"""Helpers shared by the CLI commands: one error style, exit code 2 for bad input."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import WarpsmithError

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: object) -> click.exceptions.Exit:
    """Print ``error: <message>`` (one line) to stderr and return the exit-2 exception to raise."""
    click.echo("error: " + " ".join(str(message).split()), err=True)
    return click.exceptions.Exit(2)


def handle_errors(f: F) -> F:
    """Turn a :class:`WarpsmithError` raised by ``f`` into ``error: ...`` and exit code 2."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except WarpsmithError as e:
            raise fail(e) from None

    return wrapper  # type: ignore[return-value]
