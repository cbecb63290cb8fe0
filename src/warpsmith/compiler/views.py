"""Views fused through: a layout view between two fusable ops stops being a fusion barrier.

A ``view`` node (permute, transpose, expand, (un)squeeze, reshape, ...) runs in ATen and costs no
copy, but a kernel cannot compute a value *at another index* than its own: ``relu(x).permute(0, 2, 1)
.sum(-1)`` was two kernels, the relu written and read back through the permuted strides. Here the
view is *sunk* below the pointwise chain that produces it: ``relu(x).permute(..)`` becomes
``relu(x.permute(..))`` (each operand viewed alike; an operand that broadcasts is first expanded to
the chain's shape, a free view), repeated through the chain's pointwise producers down to the
inputs, library results and reductions it reads. The views then apply to stored values only, which
every kernel reads through their strides, and the chain fuses with the consumer. The values are the
same (a pointwise op commutes with any re-indexing), so only the partition changes; a producer still
used elsewhere is kept, and the chain is computed again (recompute) where the view is read.

Not sunk: a reshape through an operand that broadcasts (its expanded view has no strides a reshape
can take without a copy), ``flip``/``cat`` and generators (which read at other indices already;
a view of a generator becomes a generator, :mod:`.expand`). Each sink is taken only when the cost
model (:func:`warpsmith.cost.program.program_ms`, greedy fusion) predicts the program cheaper; its record is one
of the search's rewrites (``view_through``), and ``solve``'s last candidate is the program as written.
"""
from __future__ import annotations

import copy
from typing import Any

import torch

from .decisions import decided
from .fuse import INDEXED, fusable, partition
from .ir import Graph, Node, is_generator
from ..cost.program import program_ms

SINKABLE = {"permute", "transpose", "t", "expand", "unsqueeze", "squeeze", "view", "reshape", "_unsafe_view",
            "flatten", "unflatten", "numpy_T", "mT", "swapaxes", "movedim", "expand_as", "view_as"}
RESHAPES = {"view", "reshape", "_unsafe_view", "flatten", "unflatten", "view_as"}
DEPTH = 16  # pointwise nodes one sink may pass through


def _sinkable_producer(p: Any) -> bool:
    return isinstance(p, Node) and p.kind == "pointwise" and not is_generator(p) and p.op not in INDEXED and \
        fusable(p)


def _view_of(v: Node, a: Node, name: str) -> Node:
    """The view ``v`` applied to ``a`` (which has the shape ``v`` reads) instead of ``v``'s operand."""
    n = Node(name, "view", v.op, [a] + list(v.args[1:]), v.shape, a.dtype, dict(v.attrs), target=v.target,
             kwargs=dict(v.kwargs), line=v.line, aten_args=[a] + list((v.aten_args or v.args)[1:]),
             aten_kwargs=dict(v.aten_kwargs or {}))
    return n


def _expanded(a: Node, shape: tuple[int, ...], name: str, line: str) -> Node:
    return Node(name, "view", "expand", [a, list(shape)], tuple(shape), a.dtype, target=torch.ops.aten.expand.default,
                line=line)


def _sub(v: Any, m: dict[int, Node]) -> Any:
    if isinstance(v, Node):
        return m.get(id(v), v)
    if isinstance(v, (list, tuple)):
        return type(v)(_sub(x, m) for x in v)
    return v


def sink(g: Graph, v: Node) -> list[Node] | None:
    """Sink view ``v`` below its pointwise producer (in place); the new view nodes (on the producer's
    operands), or None when it cannot be sunk (``g`` unchanged)."""
    from .lower import _replace

    p = v.args[0] if v.args else None
    if v.kind != "view" or v.op not in SINKABLE or not _sinkable_producer(p) or v.shape is None:
        return None
    if any(isinstance(a, Node) and a.shape != p.shape for a in p.operands()) and v.op in RESHAPES:
        return None
    new: list[Node] = []
    mapping: dict[int, Node] = {}
    k = 0
    for a in p.operands():
        if id(a) in mapping:
            continue
        k += 1
        src = a
        if a.shape != p.shape:
            src = _expanded(a, p.shape, f"{v.name}_e{k}", v.line)
            new.append(src)
        mapping[id(a)] = _view_of(v, src, f"{v.name}_v{k}")
        new.append(mapping[id(a)])
    q = copy.copy(p)
    q.name, q.shape, q.line = v.name, v.shape, p.line
    q.attrs = dict(p.attrs)
    q.args, q.kwargs = _sub(list(p.args), mapping), {kk: _sub(x, mapping) for kk, x in p.kwargs.items()}
    q.aten_args = _sub(list(p.aten_args or []), mapping)
    q.aten_kwargs = {kk: _sub(x, mapping) for kk, x in (p.aten_kwargs or {}).items()}
    i = g.nodes.index(v)
    g.nodes[i:i] = new
    _replace(g, v, q)
    return list(mapping.values())


def _sink_all(g: Graph, v: Node) -> int:
    """Sink ``v`` and the views it creates as deep as they go (at most :data:`DEPTH` producers);
    the producers passed."""
    from .expand import _generator_view

    work, passed = [v], 0
    while work and passed < DEPTH:
        w = work.pop()
        made = sink(g, w)
        if made is None:
            continue
        passed += 1
        for n in made:
            if is_generator(n.args[0]) or (n.args[0].kind == "view" and is_generator(n.args[0].args[0])):
                continue
            work.append(n)
    for _ in range(2):  # views of generators are generators again (an expand, then the view of it)
        for n in list(g.nodes):
            if n in g.nodes and n.kind == "view" and n.args and is_generator(n.args[0]):
                _generator_view(g, n)
    return passed


def _barrier(g: Graph, v: Node, users: dict[str, list[Node]]) -> bool:
    """Whether ``v`` separates a pointwise producer from a fusable consumer (a split to remove)."""
    return v.kind == "view" and v.op in SINKABLE and bool(v.args) and _sinkable_producer(v.args[0]) and \
        any(fusable(u) for u in users[v.name])


def fuse_views(g: Graph, target: Any) -> list[dict[str, Any]]:
    """Sink every view that splits a pointwise chain from a fusable consumer, each kept only when
    predicted cheaper (greedy fusion); one record per view considered."""
    records: list[dict[str, Any]] = []
    current = None  # the program's predicted time as it stands
    users = None  # the graph's users, taken again only after the graph changed (a sink kept or undone)
    for v in list(g.nodes):
        if v.kind != "view" or v not in g.nodes:  # _barrier: views only
            continue
        users = g.users() if users is None else users
        if not _barrier(g, v, users):
            continue
        users = None
        snap = g.snapshot()
        before = current = program_ms(g, partition(g), target) if current is None else current
        name, op, shape = v.name, v.op, list(v.shape)
        passed = _sink_all(g, v)
        g.remove_dead()
        after = program_ms(g, partition(g), target) if passed else before
        taken = passed > 0 and decided("view_through", name, after < before)
        if taken:
            current = after
        else:
            g.restore(snap)
        records.append({"rewrite": "view_through", "at": name, "view": op, "shapes": [shape],
                        "producers": passed, "before_ms": before, "after_ms": after, "taken": taken})
    return records
