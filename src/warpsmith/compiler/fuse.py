"""Partition: which pointwise and reduction nodes run together in one generated kernel.

:func:`partition` is greedy: nodes are visited in program order, and a pointwise or reduction
node joins the group of one of its producers when the group can take it (below) and the groups
stay acyclic; otherwise it starts a group. A :class:`Partition` is plain data (groups of nodes),
and any function ``Graph -> Partition`` whose result :func:`problems` accepts can replace
:func:`partition` (``compile_problem(..., partitioner=...)``; :func:`unfused` is the one-kernel-
per-op example); :mod:`.search` searches over partitions from these two.

A group has a *domain*, the shape its kernel iterates over:

- ``pointwise``: every node has the domain's shape; operands from outside may broadcast.
- ``rows``: the domain is (..., N) and the kernel holds whole rows (N <= :data:`MAX_ROW`); nodes
  are *full* (shape (..., N)) or *row-shaped* ((..., 1) or (...)), reductions over the last dim
  turn full values into row-shaped ones, and full nodes may use row-shaped (..., 1) values (the
  keepdim broadcast). A pointwise group becomes a rows group when a reduction of its domain joins.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .ir import Graph, Node

MAX_ROW = 16384  # the longest row a rows kernel holds in registers
FUSABLE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.bool)


@dataclass
class Group:
    kind: str  # "pointwise" | "rows"
    domain: tuple[int, ...]
    nodes: list[Node] = field(default_factory=list)

    def row_shapes(self) -> tuple[tuple[int, ...], ...]:
        return (self.domain[:-1] + (1,), self.domain[:-1]) if self.kind == "rows" else ()


@dataclass
class Partition:
    groups: list[Group]

    def group_of(self) -> dict[str, int]:
        return {n.name: i for i, g in enumerate(self.groups) for n in g.nodes}


def fusable(n: Node) -> bool:
    return n.kind in ("pointwise", "reduction") and n.dtype in FUSABLE_DTYPES and n.shape is not None


def _can_take(g: Group, n: Node) -> Group | None:
    """The group ``g`` would become with ``n`` in it, or None."""
    inside = [a for a in n.operands() if a in g.nodes]
    if n.kind == "reduction":
        x = n.args[0]
        d = x.shape
        if x not in g.nodes or len(d) < 1 or not 2 <= d[-1] <= MAX_ROW:
            return None
        if g.kind == "pointwise" and g.domain == d:
            return Group("rows", d, g.nodes + [n])
        if g.kind == "rows" and g.domain == d:
            return Group("rows", d, g.nodes + [n])
        return None
    if g.kind == "pointwise":
        if n.shape == g.domain and all(a.shape == g.domain for a in inside):
            return Group("pointwise", g.domain, g.nodes + [n])
        return None
    full, rows = g.domain, g.row_shapes()
    if n.shape == full:
        ok = all(a.shape == full or a.shape == rows[0] or (len(full) == 1 and a.shape == ()) for a in inside)
    elif n.shape in rows:
        ok = all(a.shape == n.shape for a in inside)
    else:
        ok = False
    return Group("rows", full, g.nodes + [n]) if ok else None


def _acyclic(graph: Graph, groups: list[Group]) -> bool:
    """Whether the groups, each contracted to one step, leave the program acyclic."""
    step = {}
    for i, g in enumerate(groups):
        for n in g.nodes:
            step[n.name] = f"g{i}"
    edges: dict[str, set[str]] = {}
    for n in graph.nodes:
        s = step.get(n.name, n.name)
        for a in n.operands():
            t = step.get(a.name, a.name)
            if t != s:
                edges.setdefault(t, set()).add(s)
    state: dict[str, int] = {}

    def visit(v: str) -> bool:
        state[v] = 1
        for w in edges.get(v, ()):
            if state.get(w) == 1 or (w not in state and not visit(w)):
                return False
        state[v] = 2
        return True

    return all(visit(v) for v in list(edges) if v not in state)


def partition(graph: Graph) -> Partition:
    """Greedy fusion of the graph's pointwise and reduction nodes (see the module docstring)."""
    groups: list[Group] = []
    where: dict[str, int] = {}
    for n in graph.nodes:
        if not fusable(n):
            continue
        placed = False
        for a in n.operands():
            if a.name not in where:
                continue
            i = where[a.name]
            bigger = _can_take(groups[i], n)
            if bigger is None:
                continue
            trial = groups[:i] + [bigger] + groups[i + 1:]
            if _acyclic(graph, trial):
                groups[i] = bigger
                where[n.name] = i
                placed = True
                break
        if placed:
            _merge_producers(graph, groups, where, n)
        if not placed:
            if n.kind == "reduction":
                d = n.args[0].shape
                if len(d) < 1 or not 2 <= d[-1] <= MAX_ROW:
                    continue  # stays unfused: an ATen fallback
                groups.append(Group("rows", d, [n]))
            else:
                groups.append(Group("pointwise", n.shape, [n]))
            where[n.name] = len(groups) - 1
    _merge_siblings(graph, groups, where)
    return Partition([g for g in groups if g.nodes])


def valid(g: Group) -> bool:
    """Whether one kernel of ``g``'s kind can run all of its nodes (the rules of the module docstring)."""
    inside = {n.name for n in g.nodes}
    full, rows = g.domain, g.row_shapes()
    for n in g.nodes:
        ins = [a for a in n.operands() if a.name in inside]
        if n.kind == "reduction":
            if g.kind != "rows" or n.args[0].shape != full:
                return False
        elif g.kind == "pointwise":
            if n.shape != full or any(a.shape != full for a in ins):
                return False
        elif n.shape == full:
            if any(a.shape not in (full, rows[0]) and not (len(full) == 1 and a.shape == ()) for a in ins):
                return False
        elif n.shape in rows:
            if any(a.shape != n.shape for a in ins):
                return False
        else:
            return False
    return True


def _merge(a: Group, b: Group) -> Group | None:
    """One group running both, or None: same domain (a pointwise group joins a rows group of its
    shape as full nodes), or a pointwise group over a row shape of a rows group (as row nodes)."""
    if a.domain == b.domain:
        kind, dom = ("rows" if "rows" in (a.kind, b.kind) else "pointwise"), a.domain
    elif a.kind == "rows" and b.kind == "pointwise" and b.domain in a.row_shapes():
        kind, dom = "rows", a.domain
    elif b.kind == "rows" and a.kind == "pointwise" and a.domain in b.row_shapes():
        kind, dom = "rows", b.domain
    else:
        return None
    g = Group(kind, dom, a.nodes + b.nodes)
    return g if valid(g) else None


def _try_merge(graph: Graph, groups: list[Group], where: dict[str, int], i: int, j: int) -> bool:
    """Merge group j into group i when one kernel can run both and the program stays acyclic."""
    if i == j or not groups[i].nodes or not groups[j].nodes:
        return False
    both = _merge(groups[i], groups[j])
    if both is None:
        return False
    order = {m.name: k for k, m in enumerate(graph.nodes)}
    both.nodes.sort(key=lambda m: order[m.name])  # program order inside the merged group
    trial = list(groups)
    trial[i], trial[j] = both, Group(groups[j].kind, groups[j].domain, [])
    if not _acyclic(graph, [g for g in trial if g.nodes]):
        return False
    groups[i], groups[j] = both, trial[j]
    for m in both.nodes:
        where[m.name] = i
    return True


def _merge_siblings(graph: Graph, groups: list[Group], where: dict[str, int]) -> None:
    """Horizontal fusion: groups of one domain reading a common operand run as one kernel."""
    def reads(g: Group) -> set[str]:
        names = {n.name for n in g.nodes}
        return {a.name for n in g.nodes for a in n.operands() if a.name not in names}

    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            if groups[i].nodes and groups[j].nodes and reads(groups[i]) & reads(groups[j]):
                _try_merge(graph, groups, where, i, j)


def _merge_producers(graph: Graph, groups: list[Group], where: dict[str, int], n: Node) -> None:
    """After ``n`` joined a group, pull the other groups that feed it into that group too."""
    for a in n.operands():
        j = where.get(a.name)
        if j is not None:
            _try_merge(graph, groups, where, where[n.name], j)


def unfused(graph: Graph) -> Partition:
    """Every fusable node in a group of its own: the other end of the partition space (one kernel
    per op), and a second partitioner that exercises the interface a search will use."""
    groups = []
    for n in graph.nodes:
        if not fusable(n):
            continue
        if n.kind == "reduction":
            d = n.args[0].shape
            if len(d) >= 1 and 2 <= d[-1] <= MAX_ROW:
                groups.append(Group("rows", d, [n]))
        else:
            groups.append(Group("pointwise", n.shape, [n]))
    return Partition(groups)


def problems(graph: Graph, part: Partition) -> list[str]:
    """What makes ``part`` unusable for ``graph`` (empty when codegen can run it): a node in two
    groups or not fusable, a group one kernel cannot run, or a cycle between groups."""
    out, seen = [], set()
    for i, g in enumerate(part.groups):
        for n in g.nodes:
            if n.name in seen:
                out.append(f"{n.name} is in more than one group")
            seen.add(n.name)
            if not fusable(n):
                out.append(f"{n.name} ({n.kind} {n.op}) cannot be fused")
        if not valid(g):
            out.append(f"group {i} ({g.kind} over {list(g.domain)}) cannot run as one kernel")
    if not _acyclic(graph, part.groups):
        out.append("the groups form a cycle")
    return out
