"""Fold at init: what a program computes from its parameters alone leaves the call.

A node all of whose operands are parameters (or values computed from parameters alone, or
generators) gives the same value at every call while the parameters stay as they are. :func:`hoist`
moves such nodes into ``Graph.init``, a graph of its own whose outputs are the folded values the
call reads; in the call's graph each of them becomes a ``param`` node of op ``folded``. The emitted
``ModelNew`` (:mod:`.emit`) computes ``init`` with its own kernels on the first call and again only
when a parameter it reads changes (its version counter, storage, device or dtype: an optimizer
step, ``load_state_dict``, ``.to()``); ``state_dict`` is unchanged.

Not folded: buffers the program updates in place (and what depends on them), the program's own
results, views by themselves (they cost nothing), and a value larger than the parameters it is
computed from (a broadcast: computing it in the consumer is cheaper than storing it).
"""
from __future__ import annotations

import math
from typing import Any

from .fuse import partition
from .ir import Graph, Node, is_generator
from ..cost.program import program_ms

FOLDABLE = ("pointwise", "reduction", "scan", "view", "library")


def _bytes(n: Node) -> int:
    return math.prod(n.shape) * n.dtype.itemsize if n.shape is not None and n.dtype is not None else 0


def _base(g: Graph) -> set[str]:
    """Unmutated parameters and generators: what a folded value may be computed from."""
    mutated = {t.name for t, _ in g.mutations}
    return {n.name for n in g.nodes if n.kind == "param" and n.name not in mutated or is_generator(n)}


def _closed(g: Graph, candidates: list[Node]) -> list[Node]:
    """The candidates all of whose operands are base values or candidates kept (program order)."""
    const = _base(g)
    results = {n.name for n in g.results()}
    names = {n.name for n in candidates}
    out = []
    for n in g.nodes:
        ops = n.operands()
        if n.name in names and n.kind in FOLDABLE and not is_generator(n) and ops and n.name not in results and \
                all(a.name in const for a in ops):
            const.add(n.name)
            out.append(n)
    return out


def _sources(n: Node, inside: set[str]) -> set[str]:
    """The parameters ``n`` is computed from (through the nodes named in ``inside``)."""
    seen, stack, out = set(), [n], set()
    while stack:
        m = stack.pop()
        for a in m.operands():
            if a.name in seen:
                continue
            seen.add(a.name)
            if a.kind == "param":
                out.add(a.name)
            elif a.name in inside:
                stack.append(a)
    return out


def _plan(g: Graph) -> tuple[list[Node], list[Node]]:
    """(folded nodes, the ones the call reads), after the rules of the module docstring."""
    users = g.users()
    nodes = {n.name: n for n in g.nodes}
    folded = _closed(g, list(g.nodes))
    while True:
        inside = {n.name for n in folded}
        read = [n for n in folded if any(u.name not in inside for u in users[n.name])]
        bad = {n.name for n in read if n.kind == "view" or
               _bytes(n) > sum(_bytes(nodes[p]) for p in _sources(n, inside))}
        if not bad:
            break
        folded = _closed(g, [n for n in folded if n.name not in bad])  # and what read them
    if not any(n.kind != "view" for n in folded):
        return [], []
    return folded, read


def foldable(g: Graph) -> set[str]:
    """The names of the nodes :func:`hoist` would fold out of the call."""
    return {n.name for n in _plan(g)[0]}


def hoist(g: Graph, target: Any) -> dict[str, Any] | None:
    """Move what ``g`` computes from its parameters alone into ``g.init`` (the module docstring);
    returns a record (folded nodes, values read, the per-call time saved as predicted for
    ``target`` under greedy fusion) or None when there is nothing to fold."""
    folded, read = _plan(g)
    if not folded:
        return None
    before = program_ms(g, partition(g), target)
    inside = {n.name for n in folded}
    need: set[str] = set()
    for n in folded:
        need |= {a.name for a in n.operands()}
    init_nodes = [n for n in g.nodes if n.name in inside or n.name in need and n.name not in inside]
    params = [n for n in init_nodes if n.kind == "param"]
    g.init = Graph(init_nodes, list(read), [], {p.name: g.state[p.name] for p in params})
    stand_in = {n.name: Node(n.name, "param", "folded", [], n.shape, n.dtype, line=n.line) for n in read}
    from .lower import _redirect

    body = []
    for n in g.nodes:
        if n.name in stand_in:
            body.append(stand_in[n.name])
        elif n.name not in inside:
            body.append(n)
    g.nodes = body
    for n in read:
        _redirect(g, n, stand_in[n.name])
    g.remove_dead()
    after = program_ms(g, partition(g), target)
    line = (f"fold at init: {len([n for n in folded if n.kind != 'view'])} node(s) computed from the parameters alone "
            f"({', '.join(n.name for n in folded if n.kind != 'view')}) run once, not at each call: "
            f"{before * 1e3:.2f} us -> {after * 1e3:.2f} us per call predicted")
    return {"folded": [n.name for n in folded], "read": [n.name for n in read], "before_ms": before,
            "after_ms": after, "line": line}
