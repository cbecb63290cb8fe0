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
    lanes = {str(lane(d)): np.arange(n, dtype=np.int64).reshape([-1 if i == d else 1 for i in range(len(shape))])
             for d, n in enumerate(shape)}
    memo: dict[int, Any] = {}
    if not isinstance(expr, z3.ExprRef):
        return np.broadcast_to(np.asarray(expr), shape) if shape else np.asarray(expr)

    def ev(e: Any) -> Any:
        k = e.get_id()
        if k in memo:
            return memo[k]
        kind = e.decl().kind() if z3.is_app(e) else None
        if z3.is_int_value(e):
            r = np.int64(e.as_long())
        elif z3.is_true(e):
            r = np.bool_(True)
        elif z3.is_false(e):
            r = np.bool_(False)
        elif kind == z3.Z3_OP_UNINTERPRETED and e.num_args() == 0:
            name = e.decl().name()
            if name in lanes:
                r = lanes[name]
            elif name in env:
                r = np.int64(env[name])
            else:
                raise KeyError(name)
        else:
            args = [ev(c) for c in e.children()]
            if kind == z3.Z3_OP_ADD:
                r = sum(args[1:], args[0])
            elif kind == z3.Z3_OP_SUB:
                r = args[0] - sum(args[1:], np.int64(0)) if len(args) > 1 else -args[0]
            elif kind == z3.Z3_OP_UMINUS:
                r = -args[0]
            elif kind == z3.Z3_OP_MUL:
                r = args[0]
                for a in args[1:]:
                    r = r * a
            elif kind in _BIN:
                r = _BIN[kind](args[0], args[1])
            elif kind == z3.Z3_OP_EQ:
                r = np.equal(args[0], args[1])
            elif kind == z3.Z3_OP_DISTINCT:
                r = np.not_equal(args[0], args[1])
            elif kind == z3.Z3_OP_ITE:
                r = np.where(args[0], args[1], args[2])
            elif kind == z3.Z3_OP_AND:
                r = np.logical_and.reduce(np.broadcast_arrays(*args)) if len(args) > 1 else args[0]
            elif kind == z3.Z3_OP_OR:
                r = np.logical_or.reduce(np.broadcast_arrays(*args)) if len(args) > 1 else args[0]
            elif kind == z3.Z3_OP_NOT:
                r = np.logical_not(args[0])
            elif kind == z3.Z3_OP_TO_REAL or kind == z3.Z3_OP_TO_INT:
                r = args[0]
            elif kind == z3.Z3_OP_UNINTERPRETED and e.decl().name() in _OPAQUE:
                r = _OPAQUE[e.decl().name()](*args)
            else:
                raise SymbolicError(f"cannot evaluate {e.decl()} in a bounded check")
        memo[k] = r
        return r

    return np.broadcast_to(ev(expr), shape) if shape else np.asarray(ev(expr))


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
