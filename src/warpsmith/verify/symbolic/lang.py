"""A symbolic stand-in for ``triton.language``: what a traced kernel's ``tl.*`` calls do.

Integer, boolean and pointer arithmetic builds z3 expressions (see ``values.py``); float work
is opaque ``DATA``. Loads and stores are recorded on the active tracer with their offset, mask
and the path conditions (loop ranges) under which they execute.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable

import z3

from .values import DATA, SymTensor, lane, tdiv, tmod

_select_ids = itertools.count()


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
    return SymTensor(expr, (1,) * k + t.shape, t.base, t.int64, t.elem, t.data)


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
    if kind in ("and", "or", "xor") and not (_is_bool(x) and _is_bool(y)):
        return _bitwise(a, b, kind, shape)
    if kind in ("lshift", "rshift"):
        return _shift_op(a, b, kind, shape)
    if kind not in ("and", "or", "xor", "eq"):
        x, y = _to_int(x), _to_int(y)
    elem = a.elem if a.is_ptr else b.elem
    out = SymTensor(op(x, y), shape, base if kind != "cmp" else None, a.int64 or b.int64, elem, a.data or b.data)
    if kind in ("add", "sub", "mul") and not out.int64 and base is None and _ACTIVE:
        _ACTIVE[-1].int32_result(out)  # Triton's int32 arithmetic wraps: the prover checks it does not
    return out


def _const(e: Any) -> int | None:
    e = z3.simplify(e)
    return e.as_long() if z3.is_int_value(e) else None


#: integer operators the solver does not reason about exactly: each is an uninterpreted function
#: ``ws_op_<kind>(x, y)`` (z3 knows only the sound facts of :func:`opaque_facts`) that the bounded
#: checks evaluate exactly (evaluate.py), and every obligation touching one is never ``failed`` on a
#: solver model alone (an uninterpreted function's model need not be the operator)
OPAQUE = {"and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
OPAQUE_PREFIX = "ws_op_"


def opaque(kind: str, x: Any, y: Any) -> Any:
    """``x <op> y`` as the uninterpreted application ``ws_op_<kind>(x, y)`` (one function per operator)."""
    f = z3.Function(f"{OPAQUE_PREFIX}{kind}", z3.IntSort(), z3.IntSort(), z3.IntSort())
    return f(_to_int(x), _to_int(y))


def opaque_facts(app: Any) -> list[Any]:
    """What is true of one ``ws_op_<kind>(x, y)`` application in two's complement, whatever the operands:
    enough to prove ``0 <= offs & (N - 1) <= offs`` and the like, never a fact the operator could break."""
    kind = app.decl().name()[len(OPAQUE_PREFIX):]
    x, y, r = app.arg(0), app.arg(1), app
    if kind == "and":  # clearing bits: below each non-negative operand, and below both when both are negative
        return [z3.Implies(x >= 0, z3.And(r >= 0, r <= x)), z3.Implies(y >= 0, z3.And(r >= 0, r <= y)),
                z3.Implies(z3.And(x < 0, y < 0), z3.And(r < 0, r <= x, r <= y))]
    if kind == "or":  # setting bits
        return [z3.Implies(z3.And(x >= 0, y >= 0), z3.And(r >= x, r >= y, r <= x + y)),
                z3.Implies(z3.Or(x < 0, y < 0), r < 0), z3.Implies(z3.And(x < 0, y < 0), z3.And(r >= x, r >= y))]
    if kind == "xor":
        return [z3.Implies(z3.And(x >= 0, y >= 0), z3.And(r >= 0, r <= x + y)),
                z3.Implies(z3.Xor(x < 0, y < 0), r < 0), z3.Implies(z3.And(x < 0, y < 0), r >= 0)]
    ok = z3.And(y >= 0, y < 63)
    if kind == "rshift":  # arithmetic shift: toward zero's side of x, keeping its sign
        return [z3.Implies(z3.And(ok, x >= 0), z3.And(r >= 0, r <= x)),
                z3.Implies(z3.And(ok, x < 0), z3.And(r < 0, r >= x))]
    if kind == "lshift":
        return [z3.Implies(z3.And(ok, x >= 0), r >= x), z3.Implies(z3.And(ok, x < 0), r <= x)]
    return []


def _bitwise(a: SymTensor, b: SymTensor, kind: str, shape: tuple) -> SymTensor:
    """Integer ``&`` with a constant low-bit mask is exact (``x & (2**k - 1)`` is ``x mod 2**k`` in two's
    complement, ``x & -2**k`` is ``x - x mod 2**k``); any other integer ``&``, ``|``, ``^`` (a runtime mask
    such as ``offs & (N - 1)``, a swizzle) is :func:`opaque`: proved only from its sound facts, evaluated
    exactly on the bounded shapes."""
    if kind == "and":
        for x, y in ((a, b), (b, a)):
            c = _const(y.expr) if not _is_bool(y.expr) else None
            if c is not None and not _is_bool(x.expr):
                if c >= 0 and (c + 1) & c == 0:
                    return SymTensor(x.expr % (c + 1), shape, None, a.int64 or b.int64, data=a.data or b.data)
                if c < 0 and (-c) & (-c - 1) == 0:
                    return SymTensor(x.expr - x.expr % (-c), shape, None, a.int64 or b.int64, data=a.data or b.data)
    return SymTensor(opaque(kind, a.expr, b.expr), shape, None, a.int64 or b.int64, data=a.data or b.data)


def _shift_op(a: SymTensor, b: SymTensor, kind: str, shape: tuple) -> SymTensor:
    """``x >> c`` is ``floor(x / 2**c)`` (arithmetic shift), ``x << c`` is ``x * 2**c`` (checked for int32); a
    loaded value of no declared range shifted by a runtime amount is data (any value, as the load was); a
    shift by a runtime amount is :func:`opaque` (evaluated exactly on the bounded shapes)."""
    c = _const(b.expr)
    if c is None and a.data and not _is_bool(a.expr):
        return DATA  # a loaded value of no declared range (unpacking packed data): nothing to track
    if (c is not None and c < 0) or _is_bool(a.expr):
        raise SymbolicError(f"integer `{'<<' if kind == 'lshift' else '>>'}` by a negative amount or of a boolean "
                            "is not modelled")
    if c is None:
        expr = opaque(kind, a.expr, b.expr)
    else:
        expr = a.expr / (2 ** c) if kind == "rshift" else a.expr * (2 ** c)
    out = SymTensor(expr, shape, None, a.int64, data=a.data)
    if kind == "lshift" and not out.int64 and _ACTIVE:
        _ACTIVE[-1].int32_result(out)
    return out


_ACTIVE: list = []  # the tracer running now (set by Tracer.compile's callers)


def _signs_known(x: Any, y: Any) -> bool:
    """Whether the running tracer shows ``x >= 0`` and ``y >= 1`` from the syntax (Tracer.lower_bound)."""
    if not _ACTIVE or _is_bool(x) or _is_bool(y):
        return False
    lo_x, lo_y = _ACTIVE[-1].lower_bound(x), _ACTIVE[-1].lower_bound(y)
    return lo_x is not None and lo_x >= 0 and lo_y is not None and lo_y >= 1


def _floordiv(x: Any, y: Any) -> Any:
    """Triton's ``//`` truncates toward zero (values.tdiv); with ``x >= 0`` and ``y >= 1`` it is floor division."""
    return x / y if _signs_known(x, y) else tdiv(x, y)


def _remainder(x: Any, y: Any) -> Any:
    """Triton's ``%`` takes the dividend's sign (values.tmod); with ``x >= 0`` and ``y >= 1`` it is z3's ``mod``."""
    return x % y if _signs_known(x, y) else tmod(x, y)


_OPS = {
    "__add__": (lambda x, y: x + y, "add"), "__sub__": (lambda x, y: x - y, "sub"),
    "__mul__": (lambda x, y: x * y, "mul"), "__floordiv__": (_floordiv, "div"), "__mod__": (_remainder, "mod"),
    "__lt__": (lambda x, y: x < y, "cmp"), "__le__": (lambda x, y: x <= y, "cmp"),
    "__gt__": (lambda x, y: x > y, "cmp"), "__ge__": (lambda x, y: x >= y, "cmp"),
    "__eq__": (lambda x, y: x == y, "eq"), "__ne__": (lambda x, y: x != y, "eq"),
    "__and__": (lambda x, y: z3.And(x, y), "and"), "__or__": (lambda x, y: z3.Or(x, y), "or"),
    "__xor__": (lambda x, y: z3.Xor(x, y), "xor"),
    "__lshift__": (None, "lshift"), "__rshift__": (None, "rshift"),
}


def _install_ops() -> None:
    for name, (fn, kind) in _OPS.items():
        def op(self, other, fn=fn, kind=kind):
            return binop(self, other, fn, kind)

        def rop(self, other, fn=fn, kind=kind):
            return binop(other, self, fn, kind)

        setattr(SymTensor, name, op)
        if name in ("__add__", "__sub__", "__mul__", "__floordiv__", "__mod__", "__and__", "__or__", "__xor__",
                    "__lshift__", "__rshift__"):
            setattr(SymTensor, "__r" + name[2:], rop)

    def truediv(self, other):
        return DATA  # true division is float work

    def neg(self):
        return binop(0, self, lambda x, y: x - y, "sub")

    def invert(self):
        if not _is_bool(self.expr):  # two's complement: ~x == -x - 1
            return SymTensor(-self.expr - 1, self.shape, None, self.int64, data=self.data)
        return SymTensor(z3.Not(self.expr), self.shape, data=self.data)

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
        return SymTensor(expr, tuple(shape), self.base, self.int64, self.elem, self.data)

    def to(self, dtype, bitcast=False, **_):
        if getattr(dtype, "is_int", False) and not bitcast:
            return SymTensor(_to_int(self.expr), self.shape, None, dtype.name == "int64", data=self.data)
        return DATA

    def __bool__(self):
        e = z3.simplify(self.expr)
        if z3.is_true(e):
            return True
        if z3.is_false(e):
            return False
        raise SymbolicError("control flow on a runtime value is not modelled")

    def index(self):
        """A Python integer where one is needed (``range`` bounds of a concrete trace, ``int(x)``): only a
        value that is a constant here."""
        e = z3.simplify(_to_int(self.expr))
        if z3.is_int_value(e):
            return e.as_long()
        raise SymbolicError("a runtime value where Python needs an integer (a loop bound, a shape) is not modelled")

    def absolute(self):
        if _is_bool(self.expr):
            return self
        return SymTensor(z3.If(self.expr < 0, -self.expr, self.expr), self.shape, None, self.int64, data=self.data)

    SymTensor.__truediv__ = truediv
    SymTensor.__rtruediv__ = truediv
    SymTensor.__pow__ = truediv  # float work (Triton has no integer power operator on blocks)
    SymTensor.__rpow__ = truediv
    SymTensor.__abs__ = absolute
    SymTensor.__neg__ = neg
    SymTensor.__invert__ = invert
    SymTensor.__getitem__ = getitem
    SymTensor.to = to
    SymTensor.__bool__ = __bool__
    SymTensor.__index__ = index
    SymTensor.__int__ = index
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


class BlockPtr:
    """``tl.make_block_ptr``: a block of ``block_shape`` at ``offsets`` in a (shape, strides) view of ``base``.

    A load or store addresses ``base + sum((offset_d + lane_d) * stride_d)``; each dimension named in
    ``boundary_check`` is masked to ``0 <= offset_d + lane_d < shape_d`` (the others are not checked,
    as on the GPU). A block pointer carried through a loop is modelled when each ``tl.advance`` moves it
    by an amount that does not depend on the iteration (its offsets are then affine in the iteration).
    """

    def __init__(self, base, shape, strides, offsets, block_shape) -> None:
        if not (isinstance(base, SymTensor) and base.is_ptr) or any(v is DATA for v in (*shape, *strides, *offsets)):
            raise SymbolicError("tl.make_block_ptr with a data-dependent base, shape, stride or offset")
        if not len(shape) == len(strides) == len(offsets) == len(block_shape):
            raise SymbolicError("tl.make_block_ptr with mismatched ranks")
        self.base, self.shape, self.strides, self.offsets, self.block = base, shape, strides, offsets, block_shape

    def with_offsets(self, offsets) -> "BlockPtr":
        return BlockPtr(self.base, self.shape, self.strides, list(offsets), self.block)

    def moved(self, delta) -> "BlockPtr":
        if any(v is DATA for v in delta) or len(delta) != len(self.offsets):
            raise SymbolicError("tl.advance by a data-dependent or mismatched offset")
        return self.with_offsets([o + d for o, d in zip(self.offsets, delta)])

    def addresses(self, boundary_check) -> tuple[SymTensor, Any]:
        n = len(self.block)
        ptr, mask = _shift(self.base, n), SymTensor(z3.BoolVal(True), (1,) * n)
        for d in range(n):
            idx = SymTensor(lane(d), tuple(self.block[k] if k == d else 1 for k in range(n)))
            pos = _shift(as_sym(self.offsets[d]), n) + idx
            ptr = ptr + pos * self.strides[d]
            if d in tuple(int(b) for b in boundary_check):
                mask = mask & (pos >= 0) & (pos < self.shape[d])
        shape = tuple(self.block)
        ptr = SymTensor(_shift(ptr, n).expr, shape, ptr.base, ptr.int64, ptr.elem)
        return ptr, (None if z3.is_true(z3.simplify(mask.expr)) else mask)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise SymbolicError(f"block pointer attribute {name!r} is not modelled")


class TensorDescriptor:
    """``tl.make_tensor_descriptor``: TMA loads and stores, bounds-checked by the hardware against
    the descriptor's shape (out-of-shape elements are zero-filled or dropped)."""

    def __init__(self, base, shape, strides, block_shape, tracer) -> None:
        self.bp = BlockPtr(base, shape, strides, [SymTensor(z3.IntVal(0))] * len(shape), block_shape)
        self.tracer = tracer

    def _at(self, offsets) -> tuple[SymTensor, Any]:
        bp = self.bp.moved([as_sym(o) for o in offsets])
        return bp.addresses(tuple(range(len(self.bp.block))))

    def load(self, offsets):
        return self.tracer.access("load", *self._at(offsets))

    def store(self, offsets, value):
        self.tracer.access("store", *self._at(offsets))

    def atomic_add(self, offsets, value):
        self.tracer.access("atomic", *self._at(offsets))


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
        if x is DATA or y is DATA:
            return DATA
        if c is DATA:  # a choice made by float data (NaN tests, signs): either value, no telling which
            shape = broadcast_shape(x.shape, y.shape)
            x, y = _shift(x, len(shape)), _shift(y, len(shape))
            pick = z3.Function(f"data_select_{next(_select_ids)}", *([z3.IntSort()] * len(shape)), z3.BoolSort())
            which = pick(*[lane(d) for d in range(len(shape))]) if shape else z3.Bool(f"data_select_{next(_select_ids)}")
            both_bool = _is_bool(x.expr) and _is_bool(y.expr)
            return SymTensor(z3.If(which, *((x.expr, y.expr) if both_bool else (_to_int(x.expr), _to_int(y.expr)))),
                             shape, x.base or y.base, x.int64 or y.int64, data=True)
        shape = broadcast_shape(broadcast_shape(c.shape, x.shape), y.shape)
        c, x, y = (_shift(t, len(shape)) for t in (c, x, y))
        return SymTensor(z3.If(c.expr, _to_int(x.expr), _to_int(y.expr)), shape, x.base or y.base, x.int64 or y.int64,
                         data=c.data or x.data or y.data)

    def _is_data(*vals):
        return any(as_sym(v) is DATA for v in vals)

    def minimum(x, y, **_):
        return DATA if _is_data(x, y) else _select(binop(x, y, lambda a, b: a < b, "cmp"), x, y)

    def maximum(x, y, **_):
        return DATA if _is_data(x, y) else _select(binop(x, y, lambda a, b: a > b, "cmp"), x, y)

    def where(c, x, y):
        return _select(c, x, y)

    def load(ptr, mask=None, other=None, boundary_check=(), **_):
        if isinstance(ptr, BlockPtr):
            return tracer.access("load", *ptr.addresses(boundary_check))
        return tracer.access("load", ptr, mask)

    def store(ptr, value, mask=None, boundary_check=(), **_):
        if isinstance(ptr, BlockPtr):
            tracer.access("store", *ptr.addresses(boundary_check))
            return
        tracer.access("store", ptr, mask)

    def data(*args, **kwargs):
        return DATA

    def _lanes_to(t: SymTensor, exprs: list, shape: tuple) -> SymTensor:
        """``t`` re-indexed: old lane d becomes ``exprs[d]`` (an expression of the new lanes)."""
        tmp = [z3.Int(f"__relane{d}") for d in range(len(t.shape))]
        e = z3.substitute(t.expr, *[(lane(d), v) for d, v in enumerate(tmp)]) if tmp else t.expr
        e = z3.substitute(e, *[(v, x) for v, x in zip(tmp, exprs)]) if tmp else e
        return SymTensor(e, tuple(shape), t.base, t.int64, t.elem, t.data)

    def permute(x, *dims):
        x = as_sym(x)
        dims = tuple(int(d) for d in (dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims))
        if x is DATA:
            return DATA
        if sorted(dims) != list(range(len(x.shape))):
            raise SymbolicError(f"tl.permute with dims {dims} of a {len(x.shape)}-d block")
        new = [None] * len(dims)
        for i, d in enumerate(dims):  # new dim i is old dim d
            new[d] = lane(i)
        return _lanes_to(x, new, tuple(x.shape[d] for d in dims))

    def trans(x, *dims):
        x = as_sym(x)
        if x is DATA:
            return DATA
        if not dims:
            if len(x.shape) != 2:
                raise SymbolicError(f"tl.trans without dims of a {len(x.shape)}-d block")
            dims = (1, 0)
        return permute(x, *dims)

    def reshape(x, *shape, can_reorder=False):
        x = as_sym(x)
        shape = tuple(int(d) for d in (shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape))
        if x is DATA:
            return DATA
        if can_reorder:
            raise SymbolicError("tl.reshape with can_reorder=True (an unspecified element order) is not modelled")
        if math.prod(x.shape) != math.prod(shape):
            raise SymbolicError(f"tl.reshape of {x.shape} to {shape}")
        flat = sum((lane(j) * math.prod(shape[j + 1:]) for j in range(len(shape))), z3.IntVal(0))
        old = [(flat / math.prod(x.shape[d + 1:])) % x.shape[d] for d in range(len(x.shape))]
        return _lanes_to(x, old, shape)

    def flip(x, dim=None):
        x = as_sym(x)
        if x is DATA:
            return DATA
        d = len(x.shape) - 1 if dim is None else int(dim) % len(x.shape)
        new = [lane(i) if i != d else x.shape[d] - 1 - lane(i) for i in range(len(x.shape))]
        return _lanes_to(x, new, x.shape)

    def join(a, b):
        a, b = as_sym(a), as_sym(b)
        if a is DATA or b is DATA:
            return DATA
        shape = broadcast_shape(a.shape, b.shape)
        a, b = _shift(a, len(shape)), _shift(b, len(shape))
        if a.is_ptr != b.is_ptr or (a.is_ptr and a.base != b.base):
            raise SymbolicError("tl.join of pointers into different tensors is not modelled")
        both_bool = _is_bool(a.expr) and _is_bool(b.expr)
        expr = z3.If(lane(len(shape)) == 0, *((a.expr, b.expr) if both_bool else (_to_int(a.expr), _to_int(b.expr))))
        return SymTensor(expr, shape + (2,), a.base, a.int64 or b.int64, a.elem, a.data or b.data)

    def split(x):
        x = as_sym(x)
        if x is DATA:
            return DATA, DATA
        if not x.shape or x.shape[-1] != 2:
            raise SymbolicError(f"tl.split of a block of shape {x.shape} (the last dimension must be 2)")
        n = len(x.shape) - 1
        return tuple(_lanes_to(x, [lane(i) for i in range(n)] + [z3.IntVal(k)], x.shape[:-1]) for k in (0, 1))

    def expand_dims(x, axis):
        x = as_sym(x)
        if x is DATA:
            return DATA
        axes = sorted(int(a) % (len(x.shape) + 1) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
        key = []
        for i in range(len(x.shape) + len(axes)):
            key.append(None if i in axes else slice(None))
        return x[tuple(key)]

    def broadcast_to(x, *shape):
        x = as_sym(x)
        shape = tuple(int(d) for d in (shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape))
        if x is DATA:
            return DATA
        broadcast_shape(x.shape, shape)
        y = _shift(x, len(shape))
        return SymTensor(y.expr, shape, y.base, y.int64, y.elem, y.data)

    def scan(name):
        def op(x, axis=0, reverse=False, **_):
            x = as_sym(x)
            if x is DATA or x.data:
                return DATA  # float data (or values of no declared range): nothing to track
            raise SymbolicError(f"tl.{name} of integer indices is not modelled")
        op.__name__ = name
        return op

    def reduce(x, axis, combine, **_):
        x = as_sym(x) if not isinstance(x, tuple) else DATA
        if x is DATA or x.data:
            return DATA  # a reduction of data (the combine function is float or data work)
        raise SymbolicError("tl.reduce of integer indices is not modelled")

    def atomic(name):
        def op(ptr, *args, mask=None, **_):
            tracer.access("atomic", ptr, mask)
            return DATA
        op.__name__ = name
        return op

    def atomic_cas(ptr, cmp, val, **_):
        tracer.access("atomic", ptr, None)
        return DATA

    def make_block_ptr(base, shape, strides, offsets, block_shape, order):
        return BlockPtr(as_sym(base), [as_sym(v) for v in shape], [as_sym(v) for v in strides],
                        [as_sym(v) for v in offsets], tuple(int(b) for b in block_shape))

    def advance(bp, offsets):
        if not isinstance(bp, BlockPtr):
            raise SymbolicError("tl.advance of something that is not a block pointer")
        return bp.moved([as_sym(o) for o in offsets])

    def make_tensor_descriptor(base, shape, strides, block_shape, **_):
        return TensorDescriptor(as_sym(base), [as_sym(v) for v in shape], [as_sym(v) for v in strides],
                                tuple(int(b) for b in block_shape), tracer)

    def static_range(*args):
        return range(*(int(a) for a in args))

    def multiple_of(x, _):
        return x

    ns.__dict__.update(
        program_id=program_id, num_programs=num_programs, arange=arange, zeros=zeros, full=full, cdiv=cdiv,
        minimum=minimum, maximum=maximum, where=where, load=load, store=store,
        atomic_add=atomic("atomic_add"), atomic_max=atomic("atomic_max"), atomic_min=atomic("atomic_min"),
        atomic_and=atomic("atomic_and"), atomic_or=atomic("atomic_or"), atomic_xor=atomic("atomic_xor"),
        atomic_xchg=atomic("atomic_xchg"), atomic_cas=atomic_cas,
        trans=trans, permute=permute, reshape=reshape, view=lambda x, *s: reshape(x, *s, can_reorder=True),
        flip=flip, join=join, split=split, expand_dims=expand_dims, broadcast_to=broadcast_to,
        make_block_ptr=make_block_ptr, advance=advance, make_tensor_descriptor=make_tensor_descriptor,
        static_range=static_range, multiple_of=multiple_of, max_contiguous=multiple_of,
        dot=data, sum=data, max=data, min=data, exp=data, exp2=data, log=data, log2=data, sqrt=data, rsqrt=data,
        fdiv=data, div_rn=data, sqrt_rn=data,  # float division and rounding-mode forms: data (float values)
        erf=data, sigmoid=data, abs=data, fma=data, cos=data, sin=data, tanh=data, argmax=data, argmin=data,
        cumsum=scan("cumsum"), cumprod=scan("cumprod"), reduce=reduce, floor=data, ceil=data, softmax=data, math=types.SimpleNamespace(erf=data, exp=data, rsqrt=data, tanh=data),
        rand=data, randn=data, randint=data,  # Philox draws: data (a value, like a float load's)
        device_assert=lambda *a, **k: None, static_assert=lambda *a, **k: None, debug_barrier=lambda: None,
        PropagateNan=types.SimpleNamespace(ALL="all", NONE="none"),  # minimum/maximum's NaN flag: float data only
    )
    ns.range = tracer.range_not_rewritten
    for name in ("reshape", "trans", "permute", "expand_dims", "broadcast_to", "split"):
        setattr(SymTensor, name, ns.__dict__[name])
    SymTensor.T = property(lambda self: trans(self))
    return ns


def fake_triton(tl_ns: Any) -> Any:
    import types

    return types.SimpleNamespace(jit=lambda fn=None, **_: fn if fn else (lambda f: f), cdiv=tl_ns.cdiv,
                                 language=tl_ns, next_power_of_2=lambda n: 1 << (int(n) - 1).bit_length(),
                                 math=math)
