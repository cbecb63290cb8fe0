"""Evaluating traced expressions on concrete shapes, block-wide with numpy (bounded checks)."""
from __future__ import annotations

import itertools
from typing import Any, Mapping

import numpy as np
import z3

from .lang import SymbolicError
from .values import lane

_BIN = {
    z3.Z3_OP_LE: np.less_equal, z3.Z3_OP_LT: np.less, z3.Z3_OP_GE: np.greater_equal, z3.Z3_OP_GT: np.greater,
    z3.Z3_OP_IDIV: np.floor_divide, z3.Z3_OP_MOD: np.mod,
}


def _shift_amount(s: Any) -> Any:
    """A shift amount as numpy takes it: one outside [0, 63] is undefined in Triton (LLVM's poison) and only
    ever seen in lanes a mask drops; it is clipped so that evaluating those lanes does not fail."""
    return np.clip(np.asarray(s, dtype=np.int64), 0, 63)


#: the exact values of lang.opaque's operators (int64 two's complement, as Triton's integers)
_OPAQUE = {
    "ws_op_and": lambda x, y: np.bitwise_and(np.int64(0) + x, np.int64(0) + y),
    "ws_op_or": lambda x, y: np.bitwise_or(np.int64(0) + x, np.int64(0) + y),
    "ws_op_xor": lambda x, y: np.bitwise_xor(np.int64(0) + x, np.int64(0) + y),
    "ws_op_lshift": lambda x, s: np.left_shift(np.int64(0) + x, _shift_amount(s)),
    "ws_op_rshift": lambda x, s: np.right_shift(np.int64(0) + x, _shift_amount(s)),
}


def evaluate(expr: Any, env: Mapping[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    """Value of ``expr`` for every lane of a block of ``shape``; ``env`` maps other symbol names to ints."""
    if not isinstance(expr, z3.ExprRef):
        return np.broadcast_to(np.asarray(expr), shape) if shape else np.asarray(expr)
    lanes = {str(lane(d)): np.arange(n, dtype=np.int64).reshape([-1 if i == d else 1 for i in range(len(shape))])
             for d, n in enumerate(shape)}
    values: list[Any] = []
    for op, args in _program(expr):
        if op is _SYMBOL:
            if args in lanes:
                values.append(lanes[args])
            elif args in env:
                values.append(np.int64(env[args]))
            else:
                raise KeyError(args)
        elif op is _CONSTANT:
            values.append(args)
        else:
            values.append(op(*[values[i] for i in args]))
    r = values[-1]
    return np.broadcast_to(r, shape) if shape else np.asarray(r)


# ---- an expression compiled once into steps (a bounded check evaluates it for every program and iteration) ----
_SYMBOL, _CONSTANT = object(), object()


def _add(*a: Any) -> Any:
    return sum(a[1:], a[0])


def _sub(*a: Any) -> Any:
    return a[0] - sum(a[1:], np.int64(0)) if len(a) > 1 else -a[0]


def _mul(*a: Any) -> Any:
    r = a[0]
    for x in a[1:]:
        r = r * x
    return r


def _and(*a: Any) -> Any:
    return np.logical_and.reduce(np.broadcast_arrays(*a)) if len(a) > 1 else a[0]


def _or(*a: Any) -> Any:
    return np.logical_or.reduce(np.broadcast_arrays(*a)) if len(a) > 1 else a[0]


def _binary(f: Any) -> Any:
    return lambda *a: f(a[0], a[1])  # the first two operands, as numpy's third positional is its output


_OPS = {
    z3.Z3_OP_ADD: _add, z3.Z3_OP_SUB: _sub, z3.Z3_OP_UMINUS: lambda *a: -a[0], z3.Z3_OP_MUL: _mul,
    **{k: _binary(f) for k, f in _BIN.items()}, z3.Z3_OP_EQ: _binary(np.equal),
    z3.Z3_OP_DISTINCT: _binary(np.not_equal), z3.Z3_OP_ITE: lambda *a: np.where(a[0], a[1], a[2]),
    z3.Z3_OP_AND: _and, z3.Z3_OP_OR: _or, z3.Z3_OP_NOT: lambda *a: np.logical_not(a[0]),
    z3.Z3_OP_TO_REAL: lambda *a: a[0], z3.Z3_OP_TO_INT: lambda *a: a[0],
}
_COMPILED: dict[int, tuple[Any, list[tuple[Any, Any]]]] = {}  # expr id -> (expr, steps): the expr kept alive


def _program(expr: Any) -> list[tuple[Any, Any]]:
    """``expr`` as steps in dependency order, each shared subterm once; the last step is ``expr``. A step is
    (function, indices of earlier steps), (_CONSTANT, value) or (_SYMBOL, name): a lane's or ``env``'s."""
    hit = _COMPILED.get(expr.get_id())  # each cached expr is kept alive: its id is never another's
    if hit is not None:
        return hit[1]
    steps: list[tuple[Any, Any]] = []
    index: dict[int, int] = {}

    def visit(e: Any) -> int:
        k = e.get_id()
        if k in index:
            return index[k]
        kind = e.decl().kind() if z3.is_app(e) else None
        if z3.is_int_value(e):
            step: tuple[Any, Any] = (_CONSTANT, np.int64(e.as_long()))
        elif z3.is_true(e):
            step = (_CONSTANT, np.bool_(True))
        elif z3.is_false(e):
            step = (_CONSTANT, np.bool_(False))
        elif kind == z3.Z3_OP_UNINTERPRETED and e.num_args() == 0:
            step = (_SYMBOL, e.decl().name())
        else:
            args = tuple(visit(c) for c in e.children())
            if kind in _OPS:
                step = (_OPS[kind], args)
            elif kind == z3.Z3_OP_UNINTERPRETED and e.decl().name() in _OPAQUE:
                step = (_OPAQUE[e.decl().name()], args)
            else:
                raise SymbolicError(f"cannot evaluate {e.decl()} in a bounded check")
        index[k] = len(steps)
        steps.append(step)
        return index[k]

    visit(expr)
    if len(_COMPILED) >= 1 << 14:
        _COMPILED.clear()
    _COMPILED[expr.get_id()] = (expr, steps)
    return steps


def instances(access: Any, env: Mapping[str, int], grid: tuple[int, ...], pids: Mapping[int, Any]):
    """Every (env with program ids and loop iterations) under which ``access`` executes."""
    axes = sorted(pids)
    for combo in itertools.product(*(range(grid[a]) for a in axes)):
        e = dict(env)
        e.update({str(pids[a]): v for a, v in zip(axes, combo)})
        yield from _loops(access.loops, e)


def _loops(loops: list, env: dict):
    if not loops:
        yield env
        return
    (t, trip), rest = loops[0], loops[1:]
    n = int(evaluate(trip, env, ()))
    for i in range(max(0, n)):
        yield from _loops(rest, {**env, str(t): i})
