"""Helpers shared by the CLI commands: one error style, exit code 2 for bad input."""
from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from ..core.errors import InvalidInputError, WarpsmithError

F = TypeVar("F", bound=Callable[..., Any])

# numpy's warnings inside Triton's CPU interpreter: the verifier's NaN/Inf inputs ("specials") and
# silu/sigmoid of large negative inputs (whose result, 0, is right); pyproject's pytest
# filterwarnings keeps the same ones out of the test output
INTERPRETER_WARNINGS = ("overflow encountered", "invalid value encountered", "divide by zero encountered")


@contextlib.contextmanager
def quiet_interpreter() -> Iterator[None]:
    """Within this block, numpy's RuntimeWarnings from kernels run under the interpreter are not shown."""
    with warnings.catch_warnings():
        for text in INTERPRETER_WARNINGS:
            warnings.filterwarnings("ignore", message=text, category=RuntimeWarning)
        yield


def fail(message: object) -> click.exceptions.Exit:
    """Print ``error: <message>`` (one line) to stderr and return the exit-2 exception to raise."""
    click.echo("error: " + " ".join(str(message).split()), err=True)
    return click.exceptions.Exit(2)


def check_suffix(option: str, path: Any, suffix: str) -> None:
    """Raise :class:`InvalidInputError` unless ``path`` (None: not asked for) ends in ``suffix``."""
    from pathlib import Path

    if path is not None and Path(path).suffix.lower() != suffix:
        raise InvalidInputError(option, f"a file name ending in {suffix}", str(path))


def handle_errors(f: F) -> F:
    """Turn a :class:`WarpsmithError` raised by ``f`` into ``error: ...`` and exit code 2."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except WarpsmithError as e:
            raise fail(e) from None

    return wrapper  # type: ignore[return-value]
