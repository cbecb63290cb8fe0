"""Symbolic values a traced Triton kernel computes with.

A block value (``SymTensor``) is one z3 expression over *lane variables*: ``lane(d)`` stands
for the index along dimension ``d`` (``0 <= lane(d) < shape[d]``). ``tl.arange(0, B)`` is
``lane(0)``; ``x[:, None]`` keeps the expression and adds a size-1 dimension;
``x[None, :]`` renames ``lane(0)`` to ``lane(1)``. Broadcasting needs no work: a size-1
dimension's lane never occurs in the expression. Scalars are z3 expressions (or Python
numbers for constexprs) with shape ``()``.

Values that do not matter for addresses (floating-point data: loads of data tensors, dots,
reductions) are ``DATA``; arithmetic on them stays ``DATA``. If ``DATA`` reaches an address or
a mask, the trace is marked data-dependent and the obligations it touches cannot be proved
without a declared precondition on the loaded values.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

_LANES: dict[int, z3.ArithRef] = {}


def lane(d: int) -> z3.ArithRef:
    if d not in _LANES:
        _LANES[d] = z3.Int(f"lane{d}")
    return _LANES[d]


class _Data:
    """Opaque data: float values, dot products, reductions. Every operation on it gives DATA."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DATA"

    def _same(self, *args, **kwargs):
        return self

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._same  # x.to(...), x.reshape(...), ...

    def __bool__(self) -> bool:
        raise TypeError("control flow on data values is not modelled")


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lt", "le", "gt", "ge",
              "eq", "ne", "lshift", "rshift"):
    setattr(_Data, f"__{_name}__", _Data._same)
    setattr(_Data, f"__r{_name}__", _Data._same)
for _name in ("neg", "pos", "invert", "abs", "getitem"):
    setattr(_Data, f"__{_name}__", _Data._same)
_Data.__hash__ = object.__hash__

DATA = _Data()


def tdiv(a, b):
    """Integer division truncating toward zero (Triton / C semantics)."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return z3.If(a >= 0, z3.If(b > 0, a / b, -(a / -b)), z3.If(b > 0, -((-a) / b), (-a) / -b))


def tmod(a, b):
    """Remainder with the sign of the dividend (Triton / C semantics)."""
    if isinstance(a, int) and isinstance(b, int):
        return a - tdiv(a, b) * b
    return a - tdiv(a, b) * b


@dataclass
class SymTensor:
    """A block (or scalar, shape ()) of integers, booleans or pointers.

    Attributes:
        expr: z3 expression over lane(0..len(shape)-1); for pointers, the element offset.
        shape: concrete block shape.
        base: for pointers, the name of the tensor argument the pointer points into.
        int64: the value is 64-bit (Triton int64, or derived from one).
        data: derived from a load of a tensor with no declared value range: an unconstrained value
            (an over-approximation of whatever the tensor holds, integer or float).
    """

    expr: Any
    shape: tuple[int, ...] = ()
    base: str | None = None
    int64: bool = False
    elem: Any = field(default=None)  # pointer element dtype (triton dtype) where known
    data: bool = False  # derived from loaded values with no declared range (maybe float data: no int32 check)

    @property
    def is_ptr(self) -> bool:
        return self.base is not None
