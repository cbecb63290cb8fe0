"""Names a package imports on first use (PEP 562), so that importing one of its submodules does not
load the others (the check's child imports ``warpsmith.check`` and ``warpsmith.verify`` for a few
submodules and must not pay for the harness, the prover and z3)."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


def attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name of ``where`` is imported on first use from
    the module ``where[name]`` names (relative to ``package``, e.g. ``".formats"``) and kept in the
    package's namespace; any other name is an ``AttributeError``."""
    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name], package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
