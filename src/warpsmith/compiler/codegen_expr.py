"""Codegen's expressions: the Triton text of one pointwise IR node from its operands' texts.

Values in a generated kernel have one of three types: ``f`` (float32: every float dtype is computed
in fp32 and rounded once, when stored), ``i`` (int64) and ``b`` (bool); Python scalars are ``c``
(a literal, written in the type its use needs). A node's type is its dtype's (float -> ``f``, int
-> ``i``, bool -> ``b``). NaN semantics follow torch: ``relu``, ``clamp``, ``maximum``/``minimum``
propagate a NaN where ``tl.maximum`` alone would drop it.

:func:`supported` says whether a node can be written at all; fusion (:mod:`.fuse`) asks it, so an
op with no form here stays an ATen fallback.
"""
from __future__ import annotations

from typing import Any

import torch

HELPERS = '''
@triton.jit
def _ws_log1p(x):
    """log(1 + x), accurate for small x (the rounding of 1 + x is divided out)."""
    u = 1.0 + x
    d = u - 1.0
    return tl.where(d == 0.0, x, tl.log(u) * (x / tl.where(d == 0.0, 1.0, d)))


@triton.jit
def _ws_expm1(x):
    """exp(x) - 1, accurate for small x (Kahan's trick)."""
    u = tl.exp(x)
    d = u - 1.0
    lu = tl.log(u)
    return tl.where(u == 1.0, x, tl.where(d == -1.0, -1.0, d * (x / tl.where(lu == 0.0, 1.0, lu))))


@triton.jit
def _ws_tanh(x):
    """tanh(|x|), sign restored: -expm1(-2|x|) / (2 + expm1(-2|x|)) below 0.55 (accurate near 0), and
    1 - 2 / (exp(2|x|) + 1) above, where tanh nears 1 and ``1 + tanh(x)`` cancels: that form rounds once
    near 1 (the expm1 form erred 2 to 3 ulps there, and GELU's 1 + tanh for x near -4 amplified it
    past the error contract)."""
    a = tl.abs(x)
    t = _ws_expm1(-2.0 * a)
    near0 = -t / (2.0 + t)
    far = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    y = tl.where(a < 0.55, near0, far)
    return tl.where(x != x, x, tl.where(x < 0, -y, y))


@triton.jit
def _ws_mul(a, b):
    return a * b


@triton.jit
def _ws_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def _ws_round(x):
    """Round half to even, as torch.round."""
    r = tl.floor(x)
    d = x - r
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(d > 0.5, r + 1.0, tl.where(d < 0.5, r, tl.where(odd, r + 1.0, r)))


@triton.jit
def _ws_signbit(x):
    return (x.to(tl.uint32, bitcast=True) >> 31) != 0
'''

LOG2E = 1.4426950408889634  # the prescale of exp as exp2 (compiler.precision, rewrite "approximate")

TL_DTYPE = {torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16", torch.float32: "tl.float32",
            torch.int32: "tl.int32", torch.int64: "tl.int64", torch.bool: "tl.int1"}

FLOAT_ONLY = {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "reciprocal", "erf", "sin", "cos", "tan",
              "silu", "gelu", "log1p", "expm1", "leaky_relu", "softplus", "elu", "hardsigmoid", "hardswish", "mish",
              "floor", "ceil", "trunc", "round", "exp2", "log2", "log10", "relu6", "logsigmoid", "frac", "pow",
              "pow_general", "exp_base", "div", "fmax", "fmin", "copysign", "lerp", "addcmul", "addcdiv",
              "threshold", "xlogy", "hypot"}
NUMERIC = {"add", "sub", "rsub", "mul", "neg", "abs", "maximum", "minimum", "clamp", "clamp_t", "square", "sign",
           "where", "masked_fill", "cast", "identity", "full", "iota", "flip", "cat", "floor_divide", "trunc_divide",
           "remainder", "fmod"}
TO_BOOL = {"gt", "lt", "ge", "le", "eq", "ne", "isnan", "isinf", "isfinite", "signbit"}
LOGIC = {"and", "or", "xor", "not"}


def vtype(dtype: Any) -> str:
    return "b" if dtype == torch.bool else "f" if dtype.is_floating_point else "i"


def supported(n: Any) -> bool:
    """Whether :func:`pointwise` can write ``n`` (its op, for its result type)."""
    t = vtype(n.dtype)
    if n.op in FLOAT_ONLY:
        return t == "f"
    if n.op in NUMERIC:
        return t in ("f", "i") or n.op in ("where", "masked_fill", "cast", "identity", "full", "flip", "cat")
    if n.op in TO_BOOL | LOGIC:
        return t == "b"
    return False


def lit(c: object, t: str = "f") -> str:
    """A Python scalar as a literal of type ``t``."""
    if isinstance(c, bool):
        return ("True" if c else "False") if t == "b" else ("1" if c else "0")
    if t == "i":
        return str(int(c))  # type: ignore[call-overload]
    if t == "b":
        return "True" if c else "False"
    f = float(c)  # type: ignore[arg-type]
    if f != f:
        return 'float("nan")'
    if f in (float("inf"), float("-inf")):
        return f'float("{"-" if f < 0 else ""}inf")'
    return repr(f)


Operand = tuple[Any, str]  # (text, type) or (Python scalar, "c")


def as_f(o: Operand) -> str:
    s, t = o
    return lit(s, "f") if t == "c" else s if t == "f" else f"{s}.to(tl.float32)"


def as_i(o: Operand) -> str:
    s, t = o
    return lit(s, "i") if t == "c" else s if t == "i" else f"{s}.to(tl.int64)"


def as_b(o: Operand) -> str:
    s, t = o
    return lit(bool(s), "b") if t == "c" else s if t == "b" else f"({s} != 0)"


def as_t(o: Operand, t: str) -> str:
    return as_f(o) if t == "f" else as_i(o) if t == "i" else as_b(o)


def pointwise(n: Any, ops: list[Operand]) -> str:
    """The Triton expression of pointwise node ``n`` (not a generator, flip or cat: codegen writes
    those from indices) given its operands; its type is ``vtype(n.dtype)``."""
    op, at, t = n.op, n.attrs, vtype(n.dtype)
    if op in ("gt", "lt", "ge", "le", "eq", "ne"):
        sym = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}[op]
        ct = "f" if any(tt in ("f",) or tt == "c" and isinstance(s, float) for s, tt in ops) else "i"
        return f"({as_t(ops[0], ct)} {sym} {as_t(ops[1], ct)})"
    if op in ("and", "or", "xor"):
        return f"({as_b(ops[0])} {'&' if op == 'and' else '|' if op == 'or' else '^'} {as_b(ops[1])})"
    if op == "not":
        return f"({as_b(ops[0])} == 0)"
    if op in ("isnan", "isinf", "isfinite"):
        if ops[0][1] != "f":
            return {"isnan": "False", "isinf": "False", "isfinite": "True"}[op] if ops[0][1] == "c" else \
                f"({as_i(ops[0])} != {as_i(ops[0])})" if op != "isfinite" else f"({as_i(ops[0])} == {as_i(ops[0])})"
        a = as_f(ops[0])
        return {"isnan": f"({a} != {a})", "isinf": f"(tl.abs({a}) == float(\"inf\"))",
                "isfinite": f"(tl.abs({a}) < float(\"inf\"))"}[op]
    if op == "signbit":
        return f"_ws_signbit({as_f(ops[0])})"
    if op == "where":
        return f"tl.where({as_b(ops[0])}, {as_t(ops[1], t)}, {as_t(ops[2], t)})"
    if op == "masked_fill":
        return f"tl.where({as_b(ops[1])}, {as_t(ops[2], t)}, {as_t(ops[0], t)})"
    if op == "cast":
        if t == "f":
            a = as_f(ops[0])
            return a if n.dtype == torch.float32 else f"{a}.to({TL_DTYPE[n.dtype]}).to(tl.float32)"
        if t == "i":
            a = as_i(ops[0])
            return a if n.dtype == torch.int64 else f"{a}.to(tl.int32).to(tl.int64)"
        return as_b(ops[0])
    if op == "identity":
        return as_t(ops[0], t)
    if t == "i":
        return _integer(op, at, [as_i(o) for o in ops])
    a = as_f(ops[0])
    b = as_f(ops[1]) if len(ops) > 1 else ""
    return _float(op, at, a, b, [as_f(o) for o in ops])


def _integer(op: str, at: dict, xs: list[str]) -> str:
    a = xs[0]
    b = xs[1] if len(xs) > 1 else ""
    if op in ("add", "sub", "rsub"):
        al = at.get("alpha", 1)
        sb = b if al == 1 else f"({lit(al, 'i')} * {b})"
        sa = a if al == 1 else f"({lit(al, 'i')} * {a})"
        return {"add": f"({a} + {sb})", "sub": f"({a} - {sb})", "rsub": f"({b} - {sa})"}[op]
    if op == "mul":
        return f"({a} * {b})"
    if op == "neg":
        return f"(-{a})"
    if op == "abs":
        return f"tl.abs({a})"
    if op == "square":
        return f"({a} * {a})"
    if op == "sign":
        return f"tl.where({a} > 0, 1, tl.where({a} < 0, -1, 0))"
    if op in ("maximum", "minimum"):
        return f"tl.{op}({a}, {b})"
    if op == "clamp":
        y = a
        if at.get("min") is not None:
            y = f"tl.maximum({y}, {lit(at['min'], 'i')})"
        if at.get("max") is not None:
            y = f"tl.minimum({y}, {lit(at['max'], 'i')})"
        return y
    if op == "clamp_t":
        return f"tl.minimum(tl.maximum({a}, {b}), {xs[2]})"
    if op in ("floor_divide", "remainder"):  # Python semantics (floor); Triton's // and % truncate
        q = f"({a} // {b})"
        fix = f"((({a} % {b}) != 0) & (({a} < 0) != ({b} < 0)))"
        if op == "floor_divide":
            return f"tl.where({fix}, {q} - 1, {q})"
        return f"tl.where({fix}, ({a} % {b}) + {b}, {a} % {b})"
    if op in ("trunc_divide", "fmod"):
        return f"({a} // {b})" if op == "trunc_divide" else f"({a} % {b})"
    raise KeyError(f"codegen has no integer form for {op}")


def _float(op: str, at: dict, a: str, b: str, xs: list[str]) -> str:
    if op in ("add", "sub", "rsub"):
        al = at.get("alpha", 1)
        sb = b if al == 1 else f"({lit(al)} * {b})"
        sa = a if al == 1 else f"({lit(al)} * {a})"
        return {"add": f"({a} + {sb})", "sub": f"({a} - {sb})", "rsub": f"({b} - {sa})"}[op]
    if op == "div" and at.get("approx") == "fast_div":  # compiler.precision: declared, div.approx.f32 on NVIDIA
        return f"tl.fdiv({a}, {b}, approx=True)"
    if op == "exp" and at.get("approx") == "exp2":  # compiler.precision: declared, exp2 with a prescale
        return f"tl.exp2({a} * {lit(LOG2E)})"
    if op in ("mul", "div"):
        return f"({a} {'*' if op == 'mul' else '/'} {b})"
    if op in ("maximum", "minimum"):
        fn = "tl.maximum" if op == "maximum" else "tl.minimum"
        return f"tl.where({a} != {a}, {a}, tl.where({b} != {b}, {b}, {fn}({a}, {b})))"
    if op in ("fmax", "fmin"):
        fn = "tl.maximum" if op == "fmax" else "tl.minimum"
        return f"tl.where({a} != {a}, {b}, tl.where({b} != {b}, {a}, {fn}({a}, {b})))"
    if op == "pow":
        e = at["exponent"]
        if e == 0:
            return f"tl.where({a} == {a}, 1.0, 1.0)"  # pow(x, 0) = 1, NaN and inf included (a block of ones)
        if e in (0.5, -0.5):
            return f"tl.sqrt({a})" if e > 0 else f"tl.rsqrt({a})"
        if e in (1.5, -1.5):
            return f"({a} * tl.sqrt({a}))" if e > 0 else f"(1.0 / ({a} * tl.sqrt({a})))"
        prod = "(" + " * ".join([a] * abs(int(e))) + ")"
        return prod if e > 0 else f"(1.0 / {prod})"
    if op == "pow_general":
        e = at["exponent"]
        at0 = "0.0" if e > 0 else 'float("inf")'
        return f"tl.where({a} > 0, tl.exp({lit(e)} * tl.log({a})), tl.where({a} == 0, {at0}, float(\"nan\")))"
    if op == "exp_base":
        import math

        return f"tl.exp({a} * {lit(math.log(at['base']))})"
    if op == "clamp":
        y = a
        if at.get("min") is not None:
            y = f"tl.maximum({y}, {lit(at['min'])})"
        if at.get("max") is not None:
            y = f"tl.minimum({y}, {lit(at['max'])})"
        return f"tl.where({a} != {a}, {a}, {y})"
    if op == "clamp_t":
        lo, hi = xs[1], xs[2]
        y = f"tl.minimum(tl.maximum({a}, {lo}), {hi})"
        return f"tl.where(({a} != {a}) | ({lo} != {lo}) | ({hi} != {hi}), {a} + {lo} + {hi}, {y})"
    if op in ("floor_divide", "trunc_divide"):
        return f"tl.floor({a} / {b})" if op == "floor_divide" else f"_ws_trunc({a} / {b})"
    if op == "remainder":
        return f"({a} - {b} * tl.floor({a} / {b}))"
    if op == "fmod":
        return f"({a} - {b} * _ws_trunc({a} / {b}))"
    if op == "copysign":
        return f"tl.where(_ws_signbit({b}), -tl.abs({a}), tl.abs({a}))"
    if op == "lerp":
        return f"({a} + {xs[2]} * ({b} - {a}))"
    if op in ("addcmul", "addcdiv"):
        sym = "*" if op == "addcmul" else "/"
        return f"({a} + {lit(at.get('value', 1))} * ({b} {sym} {xs[2]}))"
    if op == "threshold":
        return f"tl.where({a} <= {lit(at['threshold'])}, {lit(at['value'])}, {a})"
    if op == "xlogy":
        return f"tl.where({b} != {b}, {b}, tl.where({a} == 0.0, 0.0, {a} * tl.log({b})))"
    if op == "hypot":
        return f"tl.sqrt({a} * {a} + {b} * {b})"
    gelu_tanh = f"(0.5 * {a} * (1.0 + _ws_tanh(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a}))))"
    table = {
        "relu": f"tl.where({a} != {a}, {a}, tl.maximum({a}, 0.0))",
        "relu6": f"tl.where({a} != {a}, {a}, tl.minimum(tl.maximum({a}, 0.0), 6.0))",
        "sigmoid": f"tl.sigmoid({a})", "tanh": f"_ws_tanh({a})", "exp": f"tl.exp({a})", "log": f"tl.log({a})",
        "sqrt": f"tl.sqrt({a})", "rsqrt": f"tl.rsqrt({a})", "reciprocal": f"(1.0 / {a})", "abs": f"tl.abs({a})",
        "neg": f"(-{a})", "erf": f"tl.erf({a})", "sin": f"tl.sin({a})", "cos": f"tl.cos({a})",
        "tan": f"(tl.sin({a}) / tl.cos({a}))", "exp2": f"tl.exp2({a})", "log2": f"tl.log2({a})",
        "log10": f"(tl.log({a}) * 0.4342944819032518)",
        "silu": f"({a} * tl.sigmoid({a}))", "log1p": f"_ws_log1p({a})", "expm1": f"_ws_expm1({a})",
        "square": f"({a} * {a})", "floor": f"tl.floor({a})", "ceil": f"tl.ceil({a})", "trunc": f"_ws_trunc({a})",
        "round": f"_ws_round({a})", "frac": f"({a} - _ws_trunc({a}))",
        "gelu": gelu_tanh if at.get("approximate") == "tanh" else f"(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))",
        "leaky_relu": f"tl.where({a} > 0, {a}, {a} * {lit(at.get('slope', 0.01))})",
        "softplus": (f"tl.where({a} * {lit(at.get('beta', 1.0))} > {lit(at.get('threshold', 20.0))}, {a}, "
                     f"_ws_log1p(tl.exp({a} * {lit(at.get('beta', 1.0))})) / {lit(at.get('beta', 1.0))})"),
        "logsigmoid": f"(tl.minimum({a}, 0.0) - _ws_log1p(tl.exp(-tl.abs({a}))))",
        "elu": (f"({lit(at.get('scale', 1.0))} * tl.where({a} > 0, {a}, {lit(at.get('alpha', 1.0))} * "
                f"_ws_expm1({a} * {lit(at.get('input_scale', 1.0))})))"),
        "hardsigmoid": f"tl.where({a} != {a}, {a}, tl.minimum(tl.maximum({a} / 6.0 + 0.5, 0.0), 1.0))",
        "hardswish": f"({a} * tl.minimum(tl.maximum({a} + 3.0, 0.0), 6.0) / 6.0)",
        "mish": f"({a} * _ws_tanh(tl.where({a} > 20.0, {a}, _ws_log1p(tl.exp({a})))))",
        "sign": f"tl.where({a} != {a}, {a}, tl.where({a} > 0, 1.0, tl.where({a} < 0, -1.0, 0.0)))",
    }
    if op not in table:
        raise KeyError(f"codegen has no pointwise form for {op}")
    return table[op]
