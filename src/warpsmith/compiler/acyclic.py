"""Whether groups of nodes, each contracted to one step, leave a program acyclic (:mod:`.fuse`, :mod:`.search`).

Greedy fusion and the partition search ask this of thousands of trial groupings of one graph. The
graph's dependencies (each node's operand names and its program position) are therefore taken once
into a :class:`Deps` and reused while the graph is unchanged; each check is then one iterative
depth-first search over the contracted steps, with no walk over the nodes' argument lists.
"""
from __future__ import annotations

from typing import Any, Iterable

from .ir import Graph, Node


def _names(n: Node) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a.name for a in n.operands()))


class Deps:
    """Each node's operand names (no repeats) and program position, as ``graph`` stands now. Build
    one per pass over a graph the pass does not change; a node that is not one of the graph's own
    objects (a copy's clone) is read from its own operands."""

    def __init__(self, graph: Graph) -> None:
        self.node = {n.name: n for n in graph.nodes}
        self.ops = {n.name: _names(n) for n in graph.nodes}
        self.order = {n.name: k for k, n in enumerate(graph.nodes)}
        users: dict[str, list[str]] = {n.name: [] for n in graph.nodes}
        for name, ops in self.ops.items():
            for a in ops:
                users.setdefault(a, []).append(name)
        self.users = users
        # program order is a topological order (every operand before its user): :func:`through` prunes by it
        self.topo = all(self.order.get(a, len(self.order)) < self.order[name]
                        for name, ops in self.ops.items() for a in ops)

    def of(self, n: Node) -> tuple[str, ...]:
        return self.ops[n.name] if self.node.get(n.name) is n else _names(n)


def acyclic(deps: Deps, groups: Iterable[Any]) -> bool:
    """Whether ``groups`` (each with ``nodes`` and ``copies``), each contracted to one step, leave the
    program acyclic (a copy makes its group depend on the copy's operands, not on the group owning
    the node)."""
    groups = list(groups)
    step: dict[str, int] = {}
    for i, g in enumerate(groups):
        for n in g.nodes:
            if n.name not in g.copies:
                step[n.name] = i  # a group is its index; nodes are names (str), so the two never clash
    edges: dict[Any, set[Any]] = {}
    for name, ops in deps.ops.items():
        if name in step:
            continue
        for a in ops:
            t = step.get(a, a)
            if t != name:
                edges.setdefault(t, set()).add(name)
    for i, g in enumerate(groups):
        inside = {m.name for m in g.nodes}
        for m in g.nodes:
            for a in deps.of(m):
                if a not in inside:
                    edges.setdefault(step.get(a, a), set()).add(i)
    state: dict[Any, int] = {}  # 1: on the current path, 2: done
    for root in edges:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(edges[root]))]
        while stack:
            v, rest = stack[-1]
            for w in rest:
                s = state.get(w)
                if s == 1:
                    return False
                if s is None:
                    state[w] = 1
                    stack.append((w, iter(edges.get(w, ()))))
                    break
            else:
                state[v] = 2
                stack.pop()
    return True


def through(deps: Deps, groups: list[Any], start: Iterable[int]) -> bool:
    """Whether a cycle of the contracted program passes through one of the groups ``start`` (indices).
    When ``groups`` differ from an acyclic grouping only in those groups (grown, merged or split; an
    emptied group dropped or left empty), this is exactly "``groups`` are not acyclic": every new
    dependency touches a changed group. Only what those groups reach is walked, and with program
    order topological (:attr:`Deps.topo`), no node past the last grouped one (it reaches no group)."""
    step = {n.name: k for k, g in enumerate(groups) for n in g.nodes if n.name not in g.copies}
    if any(g.copies for g in groups):
        holders: dict[str, list[int]] = {}
        for k, g in enumerate(groups):
            for n in g.nodes:
                holders.setdefault(n.name, []).append(k)
    else:  # no copies: a node's one holder is its owner
        holders = {name: [k] for name, k in step.items()}
    order = deps.order
    last = max((order.get(name, -1) for name in holders), default=-1)
    insides: dict[int, set[str]] = {}

    def inside(k: int) -> set[str]:
        if k not in insides:
            insides[k] = {m.name for m in groups[k].nodes}
        return insides[k]

    def successors(v: Any) -> set[Any]:
        if isinstance(v, int):
            g = groups[v]
            sources = [n.name for n in g.nodes if n.name not in g.copies]
        else:
            sources = [v]
        out: set[Any] = set()
        for a in sources:
            for u in deps.users.get(a, ()):
                if u not in step and u != v and not (deps.topo and deps.order[u] > last):
                    out.add(u)
                for k in holders.get(u, ()):
                    if k != v and a not in inside(k):
                        out.add(k)
        return out

    for s in start:
        seen: set[Any] = set()
        stack = list(successors(s))
        while stack:
            v = stack.pop()
            if v == s:
                return True
            if v not in seen:
                seen.add(v)
                stack.extend(successors(v))
    return False
