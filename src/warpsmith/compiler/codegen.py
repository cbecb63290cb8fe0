"""Codegen: one Triton kernel (plain source text) and its launcher per fused group.

A ``pointwise`` group becomes a flat kernel: BLOCK elements of the domain per program, the
multi-index recovered by div/mod, every operand from outside read through its own strides (0 on a
broadcast dim), so broadcasting and non-contiguous inputs cost no copy. A ``rows`` group becomes
a row kernel: one program per row of the domain (..., N), the whole row in registers
(BLOCK_N = next power of 2 >= N), reductions over the last dim with ``tl.sum``/``tl.max``/``tl.min``,
row-shaped values as scalars of the program. Everything is computed in fp32 (bool for
comparisons) and rounded once when stored; every output is written contiguous.

The kernel text imports nothing but ``triton``/``triton.language`` (the emitted file provides
both) and calls three helpers of its own (:data:`HELPERS`) and the library's ``to_output``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .fuse import Group
from .ir import Node

BLOCK = 1024  # elements per program of a pointwise kernel

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
    """tanh(x) = -expm1(-2|x|) / (2 + expm1(-2|x|)), sign restored: accurate near 0 as well."""
    t = _ws_expm1(-2.0 * tl.abs(x))
    y = -t / (2.0 + t)
    return tl.where(x != x, x, tl.where(x < 0, -y, y))
'''

TL_DTYPE = {torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16", torch.float32: "tl.float32"}


@dataclass
class Slot:
    """One operand read from outside the group: the node, and the shape it is broadcast to."""

    node: Node
    shape: tuple[int, ...]
    mode: str  # "elem" (pointwise), "full" or "row" (rows kernels)


@dataclass
class Kernel:
    name: str
    group: Group
    slots: list[Slot] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    source: str = ""
    launcher: str = ""

    @property
    def launcher_name(self) -> str:
        return f"{self.name}_launch"

    def describe(self) -> str:
        return ", ".join(f"{n.name}={n.op}" for n in self.group.nodes)


def _lit(c: object) -> str:
    if isinstance(c, bool):
        return "1" if c else "0"
    f = float(c)  # type: ignore[arg-type]
    if f != f:
        return 'float("nan")'
    if f in (float("inf"), float("-inf")):
        return f'float("{"-" if f < 0 else ""}inf")'
    return repr(f)


class _Writer:
    def __init__(self, kernel: Kernel, users: dict[str, list[Node]], outputs: list[Node]):
        self.k = kernel
        self.g = kernel.group
        self.inside = {n.name for n in self.g.nodes}
        self.users = users
        self.graph_outputs = {o.name for o in outputs}
        self.body: list[str] = []
        self.types: dict[str, str] = {}  # value name -> "f" or "b"
        self.slot_index: dict[tuple[str, tuple[int, ...], str], int] = {}

    # operands --------------------------------------------------------------------------------
    def operand(self, a: object, use_shape: tuple[int, ...], row_use: bool) -> tuple[str, str]:
        if not isinstance(a, Node):
            return _lit(a), ("b" if isinstance(a, bool) else "f")
        if a.name in self.inside:
            return f"v_{a.name}", self.types[a.name]
        mode = "elem" if self.g.kind == "pointwise" else ("row" if row_use else "full")
        key = (a.name, use_shape, mode)
        if key not in self.slot_index:
            i = len(self.k.slots)
            self.slot_index[key] = i
            self.k.slots.append(Slot(a, use_shape, mode))
            self._load(i, a, mode)
        i = self.slot_index[key]
        return f"in{i}", ("b" if a.dtype == torch.bool else "f")

    def _load(self, i: int, a: Node, mode: str) -> None:
        rank = len(self.g.domain)
        if mode == "elem":
            off = " + ".join([f"i{d} * s{i}_{d}" for d in range(rank)]) or "offs * 0"  # rank 0: one element
            ptr, mask = f"in{i}_ptr + {off}", "mask"
        elif mode == "full":
            terms = [f"i{d} * s{i}_{d}" for d in range(rank - 1)] + [f"cols * s{i}_{rank - 1}"]
            ptr, mask = f"in{i}_ptr + " + " + ".join(terms), "cmask"
        else:
            off = " + ".join([f"i{d} * s{i}_{d}" for d in range(rank - 1)]) or "0"
            ptr, mask = f"in{i}_ptr + {off}", None
        load = f"tl.load({ptr}" + (f", mask={mask}, other=0)" if mask else ")")
        conv = " != 0" if a.dtype == torch.bool else ".to(tl.float32)"
        self.body.append(f"    in{i} = {load}{conv}")

    # nodes -----------------------------------------------------------------------------------
    def node(self, n: Node) -> None:
        row_use = self.g.kind == "rows" and n.shape != self.g.domain
        if n.kind == "reduction":
            x, _ = self.operand(n.args[0], self.g.domain, False)
            self.body += [f"    {line}" for line in _reduction(n, x)]
            self.types[n.name] = "f"
            return
        ops = [self.operand(a, n.shape, row_use) for a in n.args]
        expr, t = _pointwise(n, ops)
        self.body.append(f"    v_{n.name} = {expr}")
        self.types[n.name] = t

    def store(self, n: Node, j: int) -> None:
        v = f"v_{n.name}"
        if self.g.kind == "pointwise":
            where, mask = "offs", "mask"
        elif n.shape == self.g.domain:
            where, mask = "row * N + cols", "cmask"
        else:
            where, mask = "row", None
        val = v if n.dtype == torch.bool else f"to_output({v}, out{j}_ptr, EMULATE)"
        self.body.append(f"    tl.store(out{j}_ptr + {where}, {val}" + (f", mask={mask})" if mask else ")"))


def _f(o: tuple[str, str]) -> str:
    s, t = o
    return f"{s}.to(tl.float32)" if t == "b" and not s.lstrip("-").replace(".", "").isdigit() else s


def _b(o: tuple[str, str]) -> str:
    s, t = o
    return s if t == "b" else f"({s} != 0)"


def _pointwise(n: Node, ops: list[tuple[str, str]]) -> tuple[str, str]:
    op, at = n.op, n.attrs
    if op in ("gt", "lt", "ge", "le", "eq", "ne"):
        sym = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}[op]
        return f"({_f(ops[0])} {sym} {_f(ops[1])})", "b"
    if op in ("and", "or"):
        return f"({_b(ops[0])} {'&' if op == 'and' else '|'} {_b(ops[1])})", "b"
    if op == "not":
        return f"({_b(ops[0])} == 0)", "b"
    if op == "where":
        return f"tl.where({_b(ops[0])}, {_f(ops[1])}, {_f(ops[2])})", "f"
    a = _f(ops[0])
    b = _f(ops[1]) if len(ops) > 1 else ""
    if op in ("add", "sub", "rsub"):
        alpha = at.get("alpha", 1)
        sb = b if alpha == 1 else f"({_lit(alpha)} * {b})"
        sa = a if alpha == 1 else f"({_lit(alpha)} * {a})"
        return {"add": f"({a} + {sb})", "sub": f"({a} - {sb})", "rsub": f"({b} - {sa})"}[op], "f"
    if op in ("mul", "div"):
        return f"({a} {'*' if op == 'mul' else '/'} {b})", "f"
    if op in ("maximum", "minimum"):
        fn = "tl.maximum" if op == "maximum" else "tl.minimum"
        return f"tl.where({a} != {a}, {a}, tl.where({b} != {b}, {b}, {fn}({a}, {b})))", "f"
    if op == "pow":
        e = at["exponent"]
        if e == 0:
            return f"({a} * 0.0 + 1.0)", "f"  # pow(x, 0) = 1, NaN included
        if e == 0.5:
            return f"tl.sqrt({a})", "f"
        if e == -0.5:
            return f"tl.rsqrt({a})", "f"
        prod = "(" + " * ".join([a] * abs(int(e))) + ")"
        return (prod if e > 0 else f"(1.0 / {prod})"), "f"
    if op == "clamp":
        y = a
        if at.get("min") is not None:
            y = f"tl.maximum({y}, {_lit(at['min'])})"
        if at.get("max") is not None:
            y = f"tl.minimum({y}, {_lit(at['max'])})"
        return f"tl.where({a} != {a}, {a}, {y})", "f"
    if op == "cast":
        return f"{a}.to({TL_DTYPE[n.dtype]}).to(tl.float32)", "f"
    gelu_tanh = f"(0.5 * {a} * (1.0 + _ws_tanh(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a}))))"
    table = {
        "relu": f"tl.where({a} != {a}, {a}, tl.maximum({a}, 0.0))",
        "sigmoid": f"tl.sigmoid({a})", "tanh": f"_ws_tanh({a})", "exp": f"tl.exp({a})", "log": f"tl.log({a})",
        "sqrt": f"tl.sqrt({a})", "rsqrt": f"tl.rsqrt({a})", "reciprocal": f"(1.0 / {a})", "abs": f"tl.abs({a})",
        "neg": f"(-{a})", "erf": f"tl.erf({a})", "sin": f"tl.sin({a})", "cos": f"tl.cos({a})",
        "silu": f"({a} * tl.sigmoid({a}))", "log1p": f"_ws_log1p({a})", "expm1": f"_ws_expm1({a})",
        "square": f"({a} * {a})",
        "gelu": gelu_tanh if at.get("approximate") == "tanh" else f"(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))",
        "leaky_relu": f"tl.where({a} > 0, {a}, {a} * {_lit(at.get('slope', 0.01))})",
        "softplus": (f"tl.where({a} * {_lit(at.get('beta', 1.0))} > {_lit(at.get('threshold', 20.0))}, {a}, "
                     f"_ws_log1p(tl.exp({a} * {_lit(at.get('beta', 1.0))})) / {_lit(at.get('beta', 1.0))})"),
        "elu": f"tl.where({a} > 0, {a}, {_lit(at.get('alpha', 1.0))} * _ws_expm1({a}))",
        "hardsigmoid": f"tl.where({a} != {a}, {a}, tl.minimum(tl.maximum({a} / 6.0 + 0.5, 0.0), 1.0))",
        "hardswish": f"({a} * tl.minimum(tl.maximum({a} + 3.0, 0.0), 6.0) / 6.0)",
        "mish": f"({a} * _ws_tanh(tl.where({a} > 20.0, {a}, _ws_log1p(tl.exp({a})))))",
        "sign": f"tl.where({a} != {a}, {a}, tl.where({a} > 0, 1.0, tl.where({a} < 0, -1.0, 0.0)))",
    }
    if op not in table:
        raise KeyError(f"codegen has no pointwise form for {op}")
    return table[op], "f"


def _reduction(n: Node, x: str) -> list[str]:
    v, op = f"v_{n.name}", n.op
    nan = f"tl.sum(tl.where(cmask & ({x} != {x}), 1, 0), axis=0) > 0"
    if op in ("sum", "mean"):
        out = [f"{v} = tl.sum(tl.where(cmask, {x}, 0.0), axis=0)"]
        return out + ([f"{v} = {v} / N"] if op == "mean" else [])
    if op in ("amax", "amin"):
        fn, pad = ("tl.max", 'float("-inf")') if op == "amax" else ("tl.min", 'float("inf")')
        return [f"{v} = {fn}(tl.where(cmask, {x}, {pad}), axis=0)",
                f'{v} = tl.where({nan}, float("nan"), {v})']  # tl.max may drop a NaN; torch keeps it
    if op == "var":
        c = n.attrs.get("correction", 1)
        return [f"{v}_mean = tl.sum(tl.where(cmask, {x}, 0.0), axis=0) / N",
                f"{v}_d = tl.where(cmask, {x} - {v}_mean, 0.0)",
                f"{v} = tl.sum({v}_d * {v}_d, axis=0) / (N - {_lit(c)})"]
    if op == "logsumexp":
        return [f'{v}_m = tl.max(tl.where(cmask, {x}, float("-inf")), axis=0)',
                f'{v}_m = tl.where(tl.abs({v}_m) == float("inf"), 0.0, {v}_m)',
                f"{v} = tl.log(tl.sum(tl.where(cmask, tl.exp({x} - {v}_m), 0.0), axis=0)) + {v}_m",
                f'{v} = tl.where({nan}, float("nan"), {v})']
    raise KeyError(f"codegen has no reduction form for {op}")


def generate(group: Group, index: int, users: dict[str, list[Node]], outputs: list[Node]) -> Kernel:
    """The kernel and launcher of one group (``users`` and ``outputs`` tell what leaves it)."""
    k = Kernel(f"_ws_fused_{index}", group)
    w = _Writer(k, users, outputs)
    for n in group.nodes:
        w.node(n)
    inside = {n.name for n in group.nodes}
    k.outputs = [n for n in group.nodes
                 if n.name in w.graph_outputs or any(u.name not in inside for u in users.get(n.name, []))]
    for j, n in enumerate(k.outputs):
        w.store(n, j)
    rank = len(group.domain)
    rows = group.kind == "rows"
    index_rank = rank - 1 if rows else rank
    sizes = [f"D{d}" for d in range(1, index_rank)]
    strides = []
    for i, s in enumerate(k.slots):
        n_str = rank if s.mode in ("elem", "full") else rank - 1
        strides += [f"s{i}_{d}" for d in range(n_str)]
    params = ([f"in{i}_ptr" for i in range(len(k.slots))] + [f"out{j}_ptr" for j in range(len(k.outputs))] +
              (["M", "N"] if rows else ["NUMEL"]) + sizes + strides +
              (["BLOCK_N: tl.constexpr"] if rows else ["BLOCK: tl.constexpr"]) + ["EMULATE: tl.constexpr"])
    head = ["@triton.jit", f"def {k.name}({', '.join(params)}):",
            f'    """{group.kind} over {"x".join(map(str, group.domain)) or "()"}: {k.describe()}"""']
    if rows:
        head += ["    row = tl.program_id(0).to(tl.int64)", "    cols = tl.arange(0, BLOCK_N)", "    cmask = cols < N",
                 "    r = row"]
    else:
        head += ["    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "    mask = offs < NUMEL",
                 "    r = offs"]
    for d in range(index_rank - 1, 0, -1):
        head += [f"    i{d} = r % D{d}", f"    r = r // D{d}"]
    if index_rank >= 1:
        head.append("    i0 = r")
    k.source = "\n".join(head + w.body) + "\n"
    k.launcher = _launcher(k, rows, index_rank)
    return k


def _launcher(k: Kernel, rows: bool, index_rank: int) -> str:
    dom = tuple(k.group.domain)
    args = [f"a{i}" for i in range(len(k.slots))]
    lines = [f"def {k.launcher_name}({', '.join(args)}):"]
    dev = "a0.device"
    for j, n in enumerate(k.outputs):
        lines.append(f"    out{j} = torch.empty({tuple(n.shape)!r}, dtype={n.dtype}, device={dev})")
    strides = []
    for i, s in enumerate(k.slots):
        if s.mode in ("elem", "full"):
            strides.append(f"*a{i}.expand({dom!r}).stride()")
        elif s.shape == dom[:-1] + (1,):
            strides.append(f"*a{i}.expand({s.shape!r}).stride()[:-1]")
        else:
            strides.append(f"*a{i}.expand({s.shape!r}).stride()")
    sizes = [str(dom[d]) for d in range(1, index_rank)]
    outs = [f"out{j}" for j in range(len(k.outputs))]
    if rows:
        m = 1
        for s in dom[:-1]:
            m *= s
        head = [str(m), str(dom[-1])]
        grid, meta = f"({m},)", f"BLOCK_N={_pow2(dom[-1])}"
    else:
        numel = 1
        for s in dom:
            numel *= s
        head = [str(numel)]
        grid, meta = f"(triton.cdiv({numel}, {BLOCK}),)", f"BLOCK={BLOCK}"
    call = ", ".join(args + outs + head + sizes + strides)
    lines.append(f"    {k.name}[{grid}]({call}, {meta}, EMULATE=_EMULATE)")
    lines.append(f"    return {', '.join(outs)}" + ("," if len(outs) == 1 else ""))
    return "\n".join(lines) + "\n"


def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p
