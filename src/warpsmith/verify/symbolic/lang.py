"""A symbolic stand-in for ``triton.language``: what a traced kernel's ``tl.*`` calls do.

Integer, boolean and pointer arithmetic builds z3 expressions (see ``values.py``); float work
is opaque ``DATA``. Loads and stores are recorded on the active tracer with their offset, mask
and the path conditions (loop ranges) under which they execute.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import z3

from .values import DATA, SymTensor, lane, tdiv, tmod


class SymbolicError(Exception):
    """The kernel does something the tracer cannot model (the obligations become ``unknown``)."""


# ---- conversions -----------------------------------------------------------------------------
def as_sym(x: Any) -> SymTensor | Any:
    if x is DATA or isinstance(x, SymTensor):
        return x
    if isinstance(x, bool):
        return SymTensor(z3.BoolVal(x))
    if isinstance(x, int):
        return SymTensor(z3.IntVal(x))
    if isinstance(x, float):
        return DATA
    if isinstance(x, z3.ExprRef):
        return SymTensor(x)
    if isinstance(x, constexpr):
        return as_sym(x.value)
    raise SymbolicError(f"cannot model value {x!r} of type {type(x).__name__}")


def _shift(t: SymTensor, ndim: int) -> SymTensor:
    """Align ``t`` to ``ndim`` dimensions by prepending size-1 dimensions (numpy broadcasting)."""
    k = ndim - len(t.shape)
    if k <= 0:
        return t
    pairs = [(lane(d), lane(d + k)) for d in range(len(t.shape))]
    expr = z3.substitute(t.expr, *pairs) if pairs else t.expr
    return SymTensor(expr, (1,) * k + t.shape, t.base, t.int64, t.elem)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise SymbolicError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _is_bool(e: Any) -> bool:
    return isinstance(e, z3.BoolRef)


def _to_int(e: Any) -> Any:
    return z3.If(e, z3.IntVal(1), z3.IntVal(0)) if _is_bool(e) else e


def binop(a: Any, b: Any, op: Callable[[Any, Any], Any], kind: str) -> Any:
    a, b = as_sym(a), as_sym(b)
    if a is DATA or b is DATA:
        return DATA
    shape = broadcast_shape(a.shape, b.shape)
    a, b = _shift(a, len(shape)), _shift(b, len(shape))
    base = None
    if a.is_ptr or b.is_ptr:
        if kind == "sub" and a.is_ptr and b.is_ptr:
            raise SymbolicError("pointer difference is not modelled")
        if kind not in ("add", "sub", "cmp"):
            raise SymbolicError(f"pointer arithmetic {kind} is not modelled")
        if kind != "cmp":
            base = a.base or b.base
    x, y = a.expr, b.expr
    if kind in ("and", "or") and not (_is_bool(x) and _is_bool(y)):
        raise SymbolicError("bitwise and/or on integers is not modelled")
    if kind not in ("and", "or", "eq"):
        x, y = _to_int(x), _to_int(y)
    elem = a.elem if a.is_ptr else b.elem
    out = SymTensor(op(x, y), shape, base if kind != "cmp" else None, a.int64 or b.int64, elem)
    if kind in ("add", "sub", "mul") and not out.int64 and base is None and _ACTIVE:
        _ACTIVE[-1].int32_result(out)  # Triton's int32 arithmetic wraps: the prover checks it does not
    return out


_ACTIVE: list = []  # the tracer running now (set by Tracer.compile's callers)


_OPS = {
    "__add__": (lambda x, y: x + y, "add"), "__sub__": (lambda x, y: x - y, "sub"),
    "__mul__": (lambda x, y: x * y, "mul"), "__floordiv__": (tdiv, "div"), "__mod__": (tmod, "mod"),
    "__lt__": (lambda x, y: x < y, "cmp"), "__le__": (lambda x, y: x <= y, "cmp"),
    "__gt__": (lambda x, y: x > y, "cmp"), "__ge__": (lambda x, y: x >= y, "cmp"),
    "__eq__": (lambda x, y: x == y, "eq"), "__ne__": (lambda x, y: x != y, "eq"),
    "__and__": (lambda x, y: z3.And(x, y), "and"), "__or__": (lambda x, y: z3.Or(x, y), "or"),
}


def _install_ops() -> None:
    for name, (fn, kind) in _OPS.items():
        def op(self, other, fn=fn, kind=kind):
            return binop(self, other, fn, kind)

        def rop(self, other, fn=fn, kind=kind):
            return binop(other, self, fn, kind)

        setattr(SymTensor, name, op)
        if name in ("__add__", "__sub__", "__mul__", "__floordiv__", "__mod__", "__and__", "__or__"):
            setattr(SymTensor, "__r" + name[2:], rop)

    def truediv(self, other):
        return DATA  # true division is float work

    def neg(self):
        return binop(0, self, lambda x, y: x - y, "sub")

    def invert(self):
        if not _is_bool(self.expr):
            raise SymbolicError("bitwise not on integers is not modelled")
        return SymTensor(z3.Not(self.expr), self.shape)

    def getitem(self, key):
        key = key if isinstance(key, tuple) else (key,)
        src, shape, pairs = 0, [], []
        for k in key:
            if k is None:
                shape.append(1)
            elif isinstance(k, slice) and k == slice(None):
                pairs.append((lane(src), lane(len(shape))))
                shape.append(self.shape[src])
                src += 1
            else:
                raise SymbolicError(f"indexing with {k!r} is not modelled")
        shape += list(self.shape[src:])
        pairs += [(lane(d), lane(d + len(shape) - len(self.shape))) for d in range(src, len(self.shape))]
        moved = [(a, b) for a, b in pairs if not a.eq(b)]
        expr = z3.substitute(self.expr, *moved) if moved else self.expr
        return SymTensor(expr, tuple(shape), self.base, self.int64, self.elem)

    def to(self, dtype, bitcast=False, **_):
        if getattr(dtype, "is_int", False) and not bitcast:
            return SymTensor(_to_int(self.expr), self.shape, None, dtype.name == "int64")
        return DATA

    def __bool__(self):
        e = z3.simplify(self.expr)
        if z3.is_true(e):
            return True
        if z3.is_false(e):
            return False
        raise SymbolicError("control flow on a runtime value is not modelled")

    SymTensor.__truediv__ = truediv
    SymTensor.__rtruediv__ = truediv
    SymTensor.__neg__ = neg
    SymTensor.__invert__ = invert
    SymTensor.__getitem__ = getitem
    SymTensor.to = to
    SymTensor.__bool__ = __bool__
    SymTensor.__hash__ = object.__hash__
    SymTensor.dtype = property(lambda self: _PtrType(self.elem) if self.is_ptr else None)


class _PtrType:
    def __init__(self, elem: Any) -> None:
        self.element_ty = elem


_install_ops()


# ---- dtypes and constexpr ------------------------------------------------------------------
class dtype:
    def __init__(self, name: str) -> None:
        self.name = name
        self.is_int = name.startswith(("int", "uint"))

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dtype) and other.name == self.name

    __hash__ = object.__hash__


class constexpr:
    """Annotation marker; constexpr arguments arrive as plain Python values."""

    def __init__(self, value: Any = None) -> None:
        self.value = value


_DTYPES = ["float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5", "int1", "int8", "int16", "int32",
           "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES = {n: dtype(n) for n in _DTYPES}


# ---- the module namespace a traced kernel sees as ``tl`` ---------------------------------
def make_tl(tracer: Any) -> Any:
    import types

    ns = types.SimpleNamespace(**DTYPES, constexpr=constexpr, tensor=SymTensor, dtype=dtype)

    def program_id(axis):
        return SymTensor(tracer.pid(int(axis)))

    def num_programs(axis):
        return SymTensor(tracer.grid(int(axis)))

    def arange(start, end):
        start, end = int(start), int(end)
        return SymTensor(lane(0) + start, (end - start,))

    def zeros(shape, dtype=None):
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        return SymTensor(z3.IntVal(0), shape) if dtype is not None and dtype.is_int else DATA

    def full(shape, value, dtype=None):
        if dtype is not None and dtype.is_int and isinstance(value, int):
            return SymTensor(z3.IntVal(value), tuple(int(s) for s in shape))
        return DATA

    def cdiv(x, y):
        return (x + y - 1) // y if not (isinstance(x, int) and isinstance(y, int)) else -(-x // y)

    def _select(c, x, y):
        c, x, y = as_sym(c), as_sym(x), as_sym(y)
        if c is DATA:
            raise SymbolicError("a select on data values is not modelled")
        if x is DATA or y is DATA:
            return DATA
        shape = broadcast_shape(broadcast_shape(c.shape, x.shape), y.shape)
        c, x, y = (_shift(t, len(shape)) for t in (c, x, y))
        return SymTensor(z3.If(c.expr, _to_int(x.expr), _to_int(y.expr)), shape, x.base or y.base, x.int64 or y.int64)

    def _is_data(*vals):
        return any(as_sym(v) is DATA for v in vals)

    def minimum(x, y, **_):
        return DATA if _is_data(x, y) else _select(binop(x, y, lambda a, b: a < b, "cmp"), x, y)

    def maximum(x, y, **_):
        return DATA if _is_data(x, y) else _select(binop(x, y, lambda a, b: a > b, "cmp"), x, y)

    def where(c, x, y):
        return _select(c, x, y)

    def load(ptr, mask=None, other=None, **_):
        return tracer.access("load", ptr, mask)

    def store(ptr, value, mask=None, **_):
        tracer.access("store", ptr, mask)

    def atomic_add(ptr, val, mask=None, **_):
        tracer.access("atomic", ptr, mask)
        return DATA

    def data(*args, **kwargs):
        return DATA

    def static_range(*args):
        return range(*(int(a) for a in args))

    def multiple_of(x, _):
        return x

    ns.__dict__.update(
        program_id=program_id, num_programs=num_programs, arange=arange, zeros=zeros, full=full, cdiv=cdiv,
        minimum=minimum, maximum=maximum, where=where, load=load, store=store, atomic_add=atomic_add,
        static_range=static_range, multiple_of=multiple_of, max_contiguous=multiple_of,
        dot=data, sum=data, max=data, min=data, exp=data, exp2=data, log=data, log2=data, sqrt=data, rsqrt=data,
        erf=data, sigmoid=data, abs=data, fma=data, cos=data, sin=data, tanh=data, argmax=data, argmin=data,
        cumsum=data, softmax=data, math=types.SimpleNamespace(erf=data, exp=data, rsqrt=data, tanh=data),
        device_assert=lambda *a, **k: None, static_assert=lambda *a, **k: None, debug_barrier=lambda: None,
    )
    ns.range = tracer.range_not_rewritten
    return ns


def fake_triton(tl_ns: Any) -> Any:
    import types

    return types.SimpleNamespace(jit=lambda fn=None, **_: fn if fn else (lambda f: f), cdiv=tl_ns.cdiv,
                                 language=tl_ns, next_power_of_2=lambda n: 1 << (int(n) - 1).bit_length(),
                                 math=math)
