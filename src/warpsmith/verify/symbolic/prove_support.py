"""What the prover's obligations share (:mod:`.prove`): walks of z3 terms, counterexample values as
plain JSON, the reason a trace stopped, and element offsets decoded back to flat indices."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import z3

from .lang import SymbolicError


def plain(x: Any) -> Any:
    """Counterexample values as plain JSON types (numpy scalars and arrays, tuples, z3 values)."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return plain(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, z3.IntNumRef):
        return x.as_long()
    return str(x)


def gathered(expr: Any) -> dict[str, Any]:
    """The loaded values an address depends on, for a counterexample: tensor, offset read, value read."""
    out = {}
    for prefix in ("gathered_", "value_"):
        for app in apps([expr], prefix, prefix=True):
            name = app.decl().name()[len(prefix):]
            tensor = name.rsplit("_", 1)[0] if prefix == "gathered_" else name
            out[f"loaded {tensor} offset"] = app.arg(0)
            out[f"loaded {tensor} value"] = app
    return out


def free(e: Any) -> list[Any]:
    from .contract import _symbols

    return _symbols(e)


def construct(exc: BaseException) -> str:
    """The reason a trace or check stopped, naming the construct where the tracer knows it."""
    if isinstance(exc, SymbolicError):
        return str(exc)
    if isinstance(exc, AttributeError) and "SimpleNamespace" in str(exc):
        name = str(exc).rsplit(" ", 1)[-1].strip("'")
        return f"tl.{name} is not modelled"
    return f"{type(exc).__name__}: {exc}"


class Decoder:
    """Element offsets of a (shape, strides) tensor back to flat indices (-1: not an element)."""

    def __init__(self, shape: tuple[int, ...], strides: list[int]) -> None:
        grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in shape], indexing="ij") if shape else []
        offs = sum((g * st for g, st in zip(grids, strides)), np.zeros(shape, dtype=np.int64)).ravel()
        self.size = offs.size
        self.order = np.argsort(offs, kind="stable")
        self.sorted = offs[self.order]

    def flat(self, offsets: np.ndarray) -> np.ndarray:
        o = np.asarray(offsets, dtype=np.int64).ravel()
        pos = np.clip(np.searchsorted(self.sorted, o), 0, max(0, self.size - 1))
        hit = self.sorted[pos] == o if self.size else np.zeros(o.shape, bool)
        return np.where(hit, self.order[pos], -1)


def contiguous_stride(shape: tuple, r: int) -> Any:
    out = z3.IntVal(1)
    for d in shape[r + 1:]:
        out = out * d
    return out


def apps(facts: list[Any], name: str, prefix: bool = False) -> list[Any]:
    out, seen, todo = [], set(), list(facts)
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_app(e) and (e.decl().name().startswith(name) if prefix else e.decl().name() == name):
            out.append(e)
        todo.extend(e.children())
    return out
