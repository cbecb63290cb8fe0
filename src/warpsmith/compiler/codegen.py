"""Codegen: one Triton kernel (plain source text) and its launcher per fused group.

A ``pointwise`` group becomes a flat kernel: BLOCK elements of the domain per program, the
multi-index recovered by div/mod, every operand from outside read through its own strides (0 on a
broadcast dim), so broadcasting and non-contiguous inputs cost no copy.

A ``rows`` group (domain S, reduced dims R) becomes a row kernel: each program owns ROWS indices of
the dims not in R (its *rows*: short rows share a program, in a tile of about :data:`TILE`
elements) and walks the N = prod(S[R]) elements of each; row values are (ROWS, 1) columns, full
values (ROWS, BLOCK_N) tiles. A row of at most
:data:`WHOLE_MAX` elements is held whole in registers; a longer one is walked in chunks of
:data:`CHUNK`, in as many *passes* as the reductions need (a reduction over values that use
another reduction's result runs one pass later; full values are recomputed in each pass that
needs them, so nothing row-sized is stored). Reductions accumulate per lane and combine at the
end of their pass (NaN-propagating ``amax``/``amin``, as torch); scans carry their running value
from chunk to chunk and may walk the row from its end.

Generators are computed inline from the indices; ``flip`` and ``cat`` load their operands at
transformed indices. Everything is computed in fp32 (int64 for integers, bool for predicates,
see :mod:`.codegen_expr`) and rounded once when stored; every output is written contiguous.

The kernel text imports nothing but ``triton``/``triton.language`` (the emitted file provides
both) and calls the helpers of :data:`.codegen_expr.HELPERS` and the library's ``to_output``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..cost.program import BLOCK, CHUNK, TILE, WHOLE_MAX, KernelConfig, default_config  # noqa: F401
from .codegen_expr import HELPERS, lit, pointwise, vtype
from .fuse import Group
from .ir import Node, is_generator

__all__ = ["HELPERS", "Kernel", "generate", "BLOCK", "WHOLE_MAX", "CHUNK"]

# the launch constants (BLOCK 1024 elements per pointwise program, rows held whole up to WHOLE_MAX,
# walked in CHUNKs beyond, default tiles of about TILE elements) are the cost model's, which also
# searches each kernel's launch config (warpsmith.cost.program): one definition


@dataclass
class Slot:
    """One operand read from outside the group: the node, the shape it is read as (broadcast to)
    and how (``elem`` pointwise, ``full`` or ``row`` in a rows kernel)."""

    node: Node
    shape: tuple[int, ...]
    mode: str


@dataclass
class Kernel:
    name: str
    group: Group
    slots: list[Slot] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    source: str = ""
    launcher: str = ""
    looped: bool = False
    config: KernelConfig | None = None  # the launch config emitted (None: the default)
    choice: Any = None  # the config search's record (cost.program.KernelChoice), when it chose

    @property
    def launcher_name(self) -> str:
        return f"{self.name}_launch"

    def describe(self) -> str:
        return ", ".join(f"{n.name}={n.op}" for n in self.group.nodes)


class _Writer:
    """Statements of one kernel. Full values live in a *scope* (one pass of a looped row kernel, or
    the whole kernel); row values and row loads live in the kernel."""

    def __init__(self, kernel: Kernel):
        self.k = kernel
        self.g = kernel.group
        self.inside = {n.name for n in self.g.nodes}
        self.rows = self.g.kind == "rows"
        self.prologue: list[str] = []
        self.body: list[str] = []
        self.indent = "    "
        self.slot_index: dict[tuple, int] = {}
        self.loaded: set[int] = set()  # slots loaded in the current scope
        self.values: dict[str, str] = {}  # node name -> variable, in the current scope (full) or kernel (row)
        self.consts: set[str] = set()  # nodes (and generators) whose value is a literal
        self.suffix = ""
        self.cols = False  # the column indices of a whole-row kernel are emitted
        if self.rows:
            keep, drop = self.g.row_shapes()
            self.keep, self.drop = keep, drop
            self.outer = [d for d in range(len(self.g.domain)) if d not in self.g.red]

    # indices ------------------------------------------------------------------------------------
    def index(self, use: tuple[int, ...], k: int) -> str:
        """The index of dim ``k`` of a value of shape ``use`` in this kernel."""
        if not self.rows or use == self.g.domain:
            return f"i{k}"
        if use == self.keep:
            return "0" if k in self.g.red else f"i{k}"
        if use == self.drop:
            return f"i{self.outer[k]}"
        raise KeyError(f"shape {use} is neither the domain nor a row shape of {self.g.domain}")

    def _mode(self, use: tuple[int, ...]) -> str:
        if not self.rows:
            return "elem"
        return "full" if use == self.g.domain else "row"

    # operands -----------------------------------------------------------------------------------
    def operand(self, a: Any, use: tuple[int, ...], override: dict[int, str] | None = None,
                extra_mask: str | None = None) -> tuple[str, str]:
        if not isinstance(a, Node):
            return a, "c"
        if a.name in self.inside and not is_generator(a):
            return self.values[a.name], vtype(a.dtype)
        if is_generator(a):
            return self.generator(a, use, override), vtype(a.dtype)
        mode = self._mode(use)
        key = (a.name, use, mode, tuple(sorted((override or {}).items())), extra_mask)
        if key not in self.slot_index:
            self.slot_index[key] = len(self.k.slots)
            self.k.slots.append(Slot(a, use, mode))
        i = self.slot_index[key]
        if i not in self.loaded:
            self._load(i, a, use, mode, override or {}, extra_mask)
        return f"in{i}{self.suffix if mode != 'row' else ''}", vtype(a.dtype)

    def _load(self, i: int, a: Node, use: tuple[int, ...], mode: str, override: dict[int, str],
              extra_mask: str | None) -> None:
        terms = []
        for k in range(len(use)):
            idx = override[k] if k in override else self.index(use, k)
            if idx != "0":
                terms.append(f"{idx} * s{i}_{k}")
        off = " + ".join(terms) or "0"
        mask = {"elem": "mask", "full": "cmask", "row": "rmask"}[mode]
        if extra_mask:
            mask = f"({mask}) & ({extra_mask})" if mask else extra_mask
        if not terms:  # one element for every lane (a broadcast operand), as a block of the use's shape
            off = {"elem": "offs * 0", "full": "(row * 0 + cols * 0)", "row": "row * 0"}[mode]
        load = f"tl.load(in{i}_ptr + {off}" + (f", mask={mask}, other=0)" if mask else ")")
        conv = {"b": " != 0", "f": ".to(tl.float32)", "i": ".to(tl.int64)"}[vtype(a.dtype)]
        line = f"in{i}{self.suffix if mode != 'row' else ''} = {load}{conv}"
        if mode == "row":
            self.prologue.append(f"    {line}")
        else:
            self.body.append(self.indent + line)
            self.loaded.add(i)
        if mode == "row":
            self.loaded.add(i)

    def generator(self, n: Node, use: tuple[int, ...], override: dict[int, str] | None = None) -> str:
        """``full`` or ``iota`` at the indices of a value of shape ``use`` (broadcast from ``n.shape``)."""
        t = vtype(n.dtype)
        if n.op == "full":
            return lit(n.attrs["value"], t)
        lead = len(use) - len(n.shape)
        terms = []
        for j, (size, c) in enumerate(zip(n.shape, n.attrs["coef"])):
            if size == 1 or c == 0:
                continue
            k = j + lead
            idx = (override or {}).get(k, self.index(use, k))
            if idx == "0":
                continue
            terms.append(f"{idx} * {lit(c, t)}" if t == "i" else f"{idx}.to(tl.float32) * {lit(c)}")
        start = lit(n.attrs["start"], t)
        return "(" + " + ".join([start] + terms) + ")"

    # nodes --------------------------------------------------------------------------------------
    def value(self, n: Node) -> str:
        """Emit pointwise node ``n`` (full or row) and return its variable."""
        var = f"v_{n.name}{self.suffix if n.shape == self.g.domain else ''}"
        if n.op == "flip":
            over = {d: f"(D{d} - 1 - {self.index(n.shape, d)})" for d in n.attrs["dims"]}
            expr, _ = self.operand(n.args[0], n.shape, over)
            expr = _convert(expr, vtype(n.args[0].dtype), vtype(n.dtype))
        elif n.op == "cat":
            expr = self._cat(n)
        elif is_generator(n):
            expr = self.generator(n, n.shape)
        else:
            ops = [self.operand(a, n.shape) for a in n.args]
            expr = pointwise(n, ops)
        if self.constant(n):
            self.consts.add(n.name)
            expr = _block(expr, vtype(n.dtype), self._block_shape(n.shape))
        self.body.append(f"{self.indent}{var} = {expr}")
        self.values[n.name] = var
        return var

    def _block_shape(self, shape: tuple[int, ...]) -> str:
        if not self.rows:
            return "[BLOCK]"
        return "[ROWS, BLOCK_N]" if shape == self.g.domain else "[ROWS, 1]"

    def _cat(self, n: Node) -> str:
        d, sizes = n.attrs["dim"], n.attrs["sizes"]
        idx = self.index(n.shape, d)
        t = vtype(n.dtype)
        pieces, start = [], 0
        for a, size in zip(n.args, sizes):
            use = n.shape[:d] + (size,) + n.shape[d + 1:]
            rng = f"({idx} >= {start}) & ({idx} < {start + size})"
            over = {d: f"({idx} - {start})"}
            if is_generator(a):
                text = self.generator(a, n.shape, over)
            else:
                text = self.operand_at(a, use, over, rng)
            pieces.append((start + size, _convert(text, vtype(a.dtype), t)))
            start += size
        expr = pieces[-1][1]
        for end, text in reversed(pieces[:-1]):
            expr = f"tl.where({idx} < {end}, {text}, {expr})"
        return expr

    def operand_at(self, a: Node, use: tuple[int, ...], override: dict[int, str], mask: str) -> str:
        """A load of ``a`` read as shape ``use`` (a piece of a cat) at overridden indices, under ``mask``."""
        mode = "full" if self.rows else "elem"
        key = (a.name, use, mode, tuple(sorted(override.items())), mask)
        if key not in self.slot_index:
            self.slot_index[key] = len(self.k.slots)
            self.k.slots.append(Slot(a, use, mode))
        i = self.slot_index[key]
        if i not in self.loaded:
            self._load(i, a, use, mode, {k: override.get(k, f"i{k}") for k in range(len(use))}, mask)
        return f"in{i}{self.suffix}"

    def constant(self, n: Node) -> bool:
        """Whether ``n``'s value depends on no index (a literal): it must be made a block to store."""
        if n.op == "full":
            return True
        if n.op == "iota":
            return all(s == 1 or c == 0 for s, c in zip(n.shape, n.attrs["coef"]))
        if n.kind != "pointwise" or n.op in ("flip", "cat"):
            return False
        return all(not isinstance(a, Node) or (a.name in self.consts) for a in n.args)


def _block(expr: str, t: str, shape: str) -> str:
    """A literal as a block (or a 0-d tensor) of type ``t``."""
    if t == "b":
        return f"(tl.zeros({shape}, tl.int1) | ({expr}))"
    return f"(tl.zeros({shape}, {'tl.float32' if t == 'f' else 'tl.int64'}) + ({expr}))"


def _convert(expr: str, src: str, dst: str) -> str:
    if src == dst:
        return expr
    if dst == "f":
        return f"({expr}).to(tl.float32)"
    if dst == "i":
        return f"({expr}).to(tl.int64)"
    return f"(({expr}) != 0)"


def _outputs(group: Group, users: dict[str, list[Node]], outputs: list[Node]) -> list[Node]:
    inside = {n.name for n in group.nodes}
    names = {o.name for o in outputs}
    return [n for n in group.nodes if n.name not in group.copies and  # a copy is recomputed, never written
            (n.name in names or any(u.name not in inside for u in users.get(n.name, [])))]


def _store_value(n: Node, var: str, j: int) -> str:
    t = vtype(n.dtype)
    if t == "b":
        return var
    if t == "i":
        return f"({var}).to(out{j}_ptr.dtype.element_ty)"
    return f"to_output({var}, out{j}_ptr, EMULATE)"


# ---- pointwise kernels ----------------------------------------------------------------------------
def _pointwise_kernel(k: Kernel, users: dict[str, list[Node]], outputs: list[Node]) -> list[str]:
    w = _Writer(k)
    for n in k.group.nodes:
        w.value(n)
    k.outputs = _outputs(k.group, users, outputs)
    for j, n in enumerate(k.outputs):
        w.body.append(f"    tl.store(out{j}_ptr + offs, {_store_value(n, w.values[n.name], j)}, mask=mask)")
    rank = len(k.group.domain)
    head = ["    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "    mask = offs < NUMEL",
            "    r = offs"]
    for d in range(rank - 1, 0, -1):
        head += [f"    i{d} = r % D{d}", f"    r = r // D{d}"]
    if rank >= 1:
        head.append("    i0 = r")
    params = _params(k, ["NUMEL"] + [f"D{d}" for d in range(rank)], ["BLOCK"])
    return _header(k, params) + head + w.prologue + w.body


# ---- row kernels ----------------------------------------------------------------------------------
def _plan(group: Group) -> tuple[dict[str, int], dict[str, int], int]:
    """(pass of each reduction, the latest pass whose results each full value needs, passes)."""
    dom = group.domain
    inside = {n.name: n for n in group.nodes}
    ready: dict[str, int] = {}  # row values: after which pass they are known
    need: dict[str, int] = {}  # full values: the latest pass whose results they use
    red_pass: dict[str, int] = {}
    for n in group.nodes:
        ins = [inside[a.name] for a in n.operands() if a.name in inside and not is_generator(a)]
        if n.kind == "reduction":
            x = inside.get(n.args[0].name, n.args[0])
            p = need.get(x.name, 0) + 1
            red_pass[n.name] = p
            ready[n.name] = p
        elif n.shape == dom:
            need[n.name] = max([ready[a.name] if a.shape != dom else need[a.name] for a in ins] + [0])
        else:
            ready[n.name] = max([ready[a.name] for a in ins] + [0])
    return red_pass, need, max(list(red_pass.values()) + [1])


def _rows_kernel(k: Kernel, users: dict[str, list[Node]], outputs: list[Node]) -> list[str]:
    g = k.group
    dom, red = g.domain, g.red
    n_red = math.prod(dom[d] for d in red)
    k.looped = n_red > WHOLE_MAX
    k.outputs = _outputs(g, users, outputs)
    w = _Writer(k)
    red_pass, need, passes = _plan(g)
    full_outs = [n for n in k.outputs if n.shape == dom]
    passes = max([passes] + [need[n.name] + 1 for n in full_outs])
    reverse = any(n.kind == "scan" and n.attrs["reverse"] for n in g.nodes)
    by_name = {n.name: n for n in g.nodes}
    order = {n.name: i for i, n in enumerate(g.nodes)}

    def closure(roots: list[Node]) -> list[Node]:
        seen: set[str] = set()
        stack = list(roots)
        while stack:
            n = stack.pop()
            if n.name in seen or n.shape != dom:
                continue
            seen.add(n.name)
            stack += [by_name[a.name] for a in n.operands() if a.name in by_name and not is_generator(a)]
        return sorted((by_name[s] for s in seen), key=lambda n: order[n.name])

    head = ["    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]", "    rmask = row < M",
            "    r = row"]
    outer = w.outer
    for d in reversed(outer[1:]):
        head += [f"    i{d} = r % D{d}", f"    r = r // D{d}"]
    if outer:
        head.append(f"    i{outer[0]} = r")

    def row_values(p: int) -> None:
        for n in g.nodes:
            if n.shape != dom and n.kind != "reduction" and n.name not in w.values and \
                    _ready(n, by_name, red_pass) <= p:
                w.indent = "    "
                w.value(n)

    row_values(0)
    for p in range(1, passes + 1):
        reds = [n for n in g.nodes if red_pass.get(n.name) == p]
        stores = full_outs if p == passes else []
        todo = closure([by_name[n.args[0].name] for n in reds if n.args[0].name in by_name] + stores)
        outside_inputs = [n.args[0] for n in reds if n.args[0].name not in by_name]
        if not reds and not todo:
            continue
        if k.looped:
            w.suffix, w.loaded = f"_p{p}", set()
            w.values = {name: v for name, v in w.values.items() if by_name.get(name) is None or
                        by_name[name].shape != dom}
        w.indent = "    "
        for n in reds:
            w.body += [f"    {s}" for s in _acc_init(n)]
        scans = [n for n in todo if n.kind == "scan"]
        for n in scans:
            w.body.append(f"    carry_{n.name}{w.suffix} = {_scan_identity(n)}")
        if k.looped:
            w.body.append("    for c0 in range(0, N, BLOCK_N):")
            w.indent = "        "
        if k.looped or not w.cols:
            w.body += [w.indent + s for s in _columns(red, reverse, "c0 + " if k.looped else "")]
            w.cols = True
        for n in todo:
            if n.name in w.values:
                continue
            if n.kind == "scan":
                _scan(w, n)
            else:
                w.value(n)
        for n in reds:
            x, _ = w.operand(n.args[0], dom) if n.args[0] in outside_inputs else (w.values[n.args[0].name], "")
            w.body += [w.indent + s for s in _acc_update(n, x)]
        for n in stores:
            j = k.outputs.index(n)
            off = " + ".join(f"i{d} * cs{d}" for d in range(len(dom))) or "0"
            w.body.append(f"{w.indent}tl.store(out{j}_ptr + {off}, {_store_value(n, w.values[n.name], j)}, mask=cmask)")
        w.indent = "    "
        for n in reds:
            w.body += [f"    {s}" for s in _acc_final(n, n_red)]
            w.values[n.name] = f"v_{n.name}"
        row_values(p)
    for j, n in enumerate(k.outputs):
        if n.shape != dom:
            w.body.append(f"    tl.store(out{j}_ptr + row, {_store_value(n, w.values[n.name], j)}, mask=rmask)")
    params = _params(k, ["M", "N"] + [f"D{d}" for d in range(len(dom))] + [f"cs{d}" for d in range(len(dom))],
                     ["ROWS", "BLOCK_N"])
    return _header(k, params) + head + w.prologue + w.body


def _ready(n: Node, by_name: dict[str, Node], red_pass: dict[str, int]) -> int:
    if n.kind == "reduction":
        return red_pass[n.name]
    ins = [by_name[a.name] for a in n.operands() if a.name in by_name and not is_generator(a)]
    return max([_ready(a, by_name, red_pass) for a in ins] + [0])


def _columns(red: tuple[int, ...], reverse: bool, start: str) -> list[str]:
    out = [f"cols = {start}tl.arange(0, BLOCK_N)[None, :]", "cmask = (cols < N) & rmask",
           "t = (N - 1 - cols).to(tl.int64)" if reverse else "t = cols.to(tl.int64)"]
    for d in reversed(red[1:]):
        out += [f"i{d} = t % D{d}", f"t = t // D{d}"]
    out.append(f"i{red[0]} = t")
    return out


def _acc_type(n: Node) -> str:
    """A float sum or mean accumulates in float64 and is rounded to float32 once, at the end: a float32
    sum of L terms errs by about ``u sqrt(L)`` times the terms (1e-9 on a mean over 32768 normal
    values), 30 times what a float64-accumulating reference (torch's CPU batch norm) errs, and the
    check's error contract, which sees only the output's own rows, holds a result to the reference.
    The extra cost is an fp64 add per loaded element, far below the memory bound on any GPU."""
    if n.op in ("sum", "mean") and (vtype(n.dtype) == "f" or n.op == "mean"):
        return "tl.float64"
    return "tl.float32" if vtype(n.dtype) == "f" else "tl.int64"


def _acc_float(n: Node) -> bool:
    return _acc_type(n) != "tl.int64"


def _acc_init(n: Node) -> list[str]:
    acc, ty = f"acc_{n.name}", _acc_type(n)
    fl = _acc_float(n)
    if n.op in ("sum", "mean"):
        return [f"{acc} = tl.zeros([ROWS, BLOCK_N], {ty})"]
    if n.op == "prod":
        return [f"{acc} = tl.full([ROWS, BLOCK_N], {'1.0' if fl else '1'}, {ty})"]
    pad = ('float("-inf")' if fl else str(-2**62)) if n.op == "amax" else ('float("inf")' if fl else str(2**62))
    out = [f"{acc} = tl.full([ROWS, BLOCK_N], {pad}, {ty})"]
    if fl:
        out.append(f"nan_{n.name} = tl.zeros([ROWS, BLOCK_N], tl.int32)")
    return out


def _acc_update(n: Node, x: str) -> list[str]:
    acc, fl = f"acc_{n.name}", _acc_float(n)
    src = x if fl or vtype(n.args[0].dtype) == "i" else f"{x}.to(tl.int64)"
    if fl and (vtype(n.args[0].dtype) != "f" or _acc_type(n) == "tl.float64"):
        src = f"{x}.to({_acc_type(n)})"
    if n.op in ("sum", "mean"):
        return [f"{acc} += tl.where(cmask, {src}, {'0.0' if fl else '0'})"]
    if n.op == "prod":
        return [f"{acc} = {acc} * tl.where(cmask, {src}, {'1.0' if fl else '1'})"]
    fn = "tl.maximum" if n.op == "amax" else "tl.minimum"
    pad = ('float("-inf")' if fl else str(-2**62)) if n.op == "amax" else ('float("inf")' if fl else str(2**62))
    out = [f"{acc} = {fn}({acc}, tl.where(cmask, {src}, {pad}))"]
    if fl:
        out.append(f"nan_{n.name} = nan_{n.name} | (cmask & ({src} != {src})).to(tl.int32)")
    return out


def _acc_final(n: Node, count: int) -> list[str]:
    acc, v = f"acc_{n.name}", f"v_{n.name}"
    if n.op == "sum":
        return [f"{v} = tl.sum({acc}, axis=1)[:, None]{'.to(tl.float32)' if _acc_float(n) else ''}"]
    if n.op == "mean":
        from .symbolic_shapes import is_probe  # a symbolic count: the runtime N, not a literal

        return [f"{v} = (tl.sum({acc}, axis=1)[:, None] / {'N' if is_probe(count) else lit(count)}).to(tl.float32)"]
    if n.op == "prod":
        return [f"{v} = tl.reduce({acc}, 1, _ws_mul)[:, None]"]
    fn = "tl.max" if n.op == "amax" else "tl.min"
    if _acc_float(n):
        return [f'{v} = tl.where(tl.max(nan_{n.name}, axis=1)[:, None] > 0, float("nan"), {fn}({acc}, axis=1)[:, None])']
    return [f"{v} = {fn}({acc}, axis=1)[:, None]"]


def _scan_identity(n: Node) -> str:
    t = vtype(n.dtype)
    one = n.op == "cumprod"
    return f"tl.full([ROWS, 1], {'1' if one else '0'}{'.0' if t == 'f' else ''}, {'tl.float32' if t == 'f' else 'tl.int64'})"


def _scan(w: _Writer, n: Node) -> None:
    t = vtype(n.dtype)
    x, xt = w.operand(n.args[0], w.g.domain)
    x = _convert(x, xt if xt != "c" else t, t) if xt != "c" else lit(x, t)
    ident = ("1.0" if t == "f" else "1") if n.op == "cumprod" else ("0.0" if t == "f" else "0")
    var, carry = f"v_{n.name}{w.suffix}", f"carry_{n.name}{w.suffix}"
    xs = f"xs_{n.name}{w.suffix}"
    w.body.append(f"{w.indent}{xs} = tl.where(cmask, {x}, {ident})")
    if n.op == "cumsum":
        w.body.append(f"{w.indent}{var} = tl.cumsum({xs}, axis=1) + {carry}")
        w.body.append(f"{w.indent}{carry} = {carry} + tl.sum({xs}, axis=1)[:, None]")
    else:
        w.body.append(f"{w.indent}{var} = tl.cumprod({xs}, axis=1) * {carry}")
        w.body.append(f"{w.indent}{carry} = {carry} * tl.reduce({xs}, 1, _ws_mul)[:, None]")
    w.values[n.name] = var


# ---- assembly -------------------------------------------------------------------------------------
def _params(k: Kernel, sizes: list[str], meta: list[str]) -> list[str]:
    strides = [f"s{i}_{d}" for i, s in enumerate(k.slots) for d in range(len(s.shape))]
    return ([f"in{i}_ptr" for i in range(len(k.slots))] + [f"out{j}_ptr" for j in range(len(k.outputs))] + sizes +
            strides + [f"{m}: tl.constexpr" for m in meta] + ["EMULATE: tl.constexpr"])


def _header(k: Kernel, params: list[str]) -> list[str]:
    g = k.group
    what = f"{g.kind} over {'x'.join(map(str, g.domain)) or '()'}" + (f", reducing dims {list(g.red)}" if g.red else "")
    return ["@triton.jit", f"def {k.name}({', '.join(params)}):", f'    """{what}: {k.describe()}"""']


def generate(group: Group, index: int, users: dict[str, list[Node]], outputs: list[Node],
             config: KernelConfig | None = None, choice: Any = None) -> Kernel:
    """The kernel and launcher of one group (``users`` and ``outputs`` tell what leaves it), launched
    with ``config`` (default: :func:`~warpsmith.cost.program.default_config`); ``choice`` is the config
    search's record (its predicted times go into a comment of the launcher)."""
    k = Kernel(f"_ws_fused_{index}", group, config=config or default_config(group), choice=choice)
    lines = _rows_kernel(k, users, outputs) if group.kind == "rows" else _pointwise_kernel(k, users, outputs)
    k.source = "\n".join(lines) + "\n"
    k.launcher = _launcher(k)
    return k


def _launcher(k: Kernel) -> str:
    dom = tuple(k.group.domain)
    args = [f"a{i}" for i in range(len(k.slots))]
    lines = [f"def {k.launcher_name}({', '.join(['dev'] + args)}):"]
    for j, n in enumerate(k.outputs):
        lines.append(f"    out{j} = torch.empty({tuple(n.shape)!r}, dtype={n.dtype}, device=dev)")
    strides = [f"*a{i}.expand({s.shape!r}).stride()" for i, s in enumerate(k.slots)]
    outs = [f"out{j}" for j in range(len(k.outputs))]
    dims = [str(s) for s in dom]
    c = k.config
    if k.group.kind == "rows":
        red = k.group.red
        m = math.prod(s for d, s in enumerate(dom) if d not in red)
        n = math.prod(dom[d] for d in red)
        cs = [str(math.prod(dom[d + 1:])) for d in range(len(dom))]
        head, grid = [str(m), str(n)] + dims + cs, f"(triton.cdiv({m}, {c.rows}),)"
    else:
        numel = math.prod(dom)
        head, grid = [str(numel)] + dims, f"(triton.cdiv({numel}, {c.block}),)"
    meta = c.meta(k.looped)
    ch = k.choice
    if ch is not None:  # what the config search chose, and why (predicted, never measured)
        lines.append(f"    # launch config searched ({ch.searched} configs, {ch.rejected} invalid on {ch.target}): "
                     f"predicted {ch.predicted_ms * 1e3:.3g} us; the default {ch.default.meta(k.looped)}: "
                     f"{ch.default_ms * 1e3:.3g} us")
    call = ", ".join(args + outs + head + strides)
    lines.append(f"    {k.name}[{grid}]({call}, {meta}, EMULATE=_EMULATE)")
    lines.append(f"    return {', '.join(outs)}" + ("," if len(outs) == 1 else ""))
    return "\n".join(lines) + "\n"
