"""Loading the contracts a kernel file (or module) declares, for ``warpsmith prove``."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from ...core.errors import InvalidInputError
from .contract import LaunchContract


def load_contracts(target: str) -> list[LaunchContract]:
    """Contracts of a file path (``kernels.py``) or a dotted module name (``warpsmith.ops.matmul.contract``).

    The module must define ``CONTRACTS`` (a list of LaunchContract) or ``CONTRACT`` (one).
    """
    path = Path(target)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise InvalidInputError("kernel file", "an existing .py file defining CONTRACTS or CONTRACT", target)
        name = f"_warpsmith_prove_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise InvalidInputError(f"kernel file {target}", "a Python file that imports cleanly",
                                    f"{type(exc).__name__}: {exc}") from exc
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise InvalidInputError("kernel file or module", "a .py path or an importable module name", target) from exc
    found = getattr(module, "CONTRACTS", None)
    if found is None and getattr(module, "CONTRACT", None) is not None:
        found = [module.CONTRACT]
    if not found or not all(isinstance(c, LaunchContract) for c in found):
        raise InvalidInputError(f"contracts in {target}", "CONTRACTS = [LaunchContract(...), ...] or CONTRACT = "
                                "LaunchContract(...)", type(found).__name__ if found is not None else "nothing")
    return list(found)
