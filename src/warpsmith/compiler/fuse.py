"""Partition: which pointwise, reduction and scan nodes run together in one generated kernel.

:func:`partition` is greedy: nodes are visited in program order, and a node joins the group of one
of its producers when the group can take it (below) and the groups stay acyclic; otherwise it
starts a group. A :class:`Partition` is plain data (groups of nodes), and any function
``Graph -> Partition`` whose result :func:`problems` accepts can replace :func:`partition`
(``compile_problem(..., partitioner=...)``; :func:`unfused` is the one-kernel-per-op example);
:mod:`.search` searches over partitions from these two.

A group has a *domain*, the shape its kernel iterates over:

- ``pointwise``: every node has the domain's shape; operands from outside may broadcast.
- ``rows``: the domain S and a set R of *reduced dims* (``red``). Each program owns one row (an
  index of the dims not in R) and walks the R dims (whole, or in chunks when the row is long).
  Nodes are *full* (shape S) or *row-shaped*: S with the R dims 1 (the keepdim form, which full
  nodes may use) or removed (which only row-shaped nodes of that form use). Reductions over R turn
  full values into row-shaped ones; scans along R (one dim) keep them full. A pointwise group
  becomes a rows group when a reduction or scan of its domain joins.

**Copies (recompute instead of materialize).** A group may also hold *copies* of nodes (``Group.copies``,
their names): a cheap pointwise producer recomputed in each consumer kernel instead of written by one
kernel and read back by the others. A copy is a clone of the node (same name, op and operands) whose
shape is the consumer's domain or one of its row shapes, the producer's shape broadcast to it, so the
consumer evaluates it at its own indices; the group never writes it. A node may be in several groups
this way; at most one group *owns* it (writes it when something outside reads it). A node held only
as copies must be no result of the program, and every user of it must be in a group holding it
(:func:`problems`). The partition search (:mod:`.search`) makes copies, priced by its cost model.

Generators (``full``, ``iota``) are in no group: every kernel that uses one computes it inline. A
generator is given a group of its own only when something other than a kernel uses it.
``flip`` and ``cat`` read their operands at transformed indices, so those operands come from
outside the group.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .acyclic import Deps, acyclic, through
from .codegen_expr import supported
from .ir import CARRIED, Graph, Node, is_generator

BASIC_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod")
INDEXED = ("flip", "cat")  # pointwise ops reading their operands at other indices


@dataclass
class Group:
    kind: str  # "pointwise" | "rows"
    domain: tuple[int, ...]
    nodes: list[Node] = field(default_factory=list)
    red: tuple[int, ...] = ()  # rows: the reduced (or scanned) dims of the domain
    copies: frozenset[str] = frozenset()  # nodes recomputed here (clones at this domain), never written here

    def row_shapes(self) -> tuple[tuple[int, ...], ...]:
        """(keepdim form, dropped form) of a row-shaped value; () for a pointwise group."""
        if self.kind != "rows":
            return ()
        keep = tuple(1 if d in self.red else s for d, s in enumerate(self.domain))
        drop = tuple(s for d, s in enumerate(self.domain) if d not in self.red)
        return keep, drop


@dataclass
class Partition:
    groups: list[Group]

    def group_of(self) -> dict[str, int]:
        """Node name -> the group that owns (computes and may write) it; copies are not owned."""
        return {n.name: i for i, g in enumerate(self.groups) for n in g.nodes if n.name not in g.copies}

    def copied(self) -> set[str]:
        """The nodes some group holds only as a copy (recomputed where used, never written)."""
        owned = self.group_of()
        return {c for g in self.groups for c in g.copies if c not in owned}


def _dims(n: Node) -> tuple[int, ...]:
    return tuple(n.attrs["dims"]) if n.kind == "reduction" else (n.attrs["dim"],)


def fusable(n: Node) -> bool:
    """Whether codegen can run ``n`` inside a generated kernel."""
    if n.shape is None or n.dtype not in CARRIED or is_generator(n) or 0 in n.shape:
        return False
    if n.kind == "reduction":
        return n.op in BASIC_REDUCTIONS and 0 not in n.args[0].shape
    if n.kind == "scan":
        return n.op in ("cumsum", "cumprod") and len(n.shape) >= 1
    return n.kind == "pointwise" and supported(n)


def _reverse_flags(g: Group) -> set[bool]:
    return {n.attrs["reverse"] for n in g.nodes if n.kind == "scan"}


def valid(g: Group, only: list[Node] | None = None) -> bool:
    """Whether one kernel of ``g``'s kind can run all of its nodes (the rules of the module docstring).
    ``only``: the nodes to check, when ``g`` less them is known valid with the same kind, domain and
    reduced dims (a node's rule reads only those, its own operands and the group's members among them,
    so the other nodes' verdicts stand; ``only`` must hold every member reading an added node)."""
    inside = {n.name: n for n in g.nodes}  # a copy is read as the group's clone of it
    full = g.domain
    shapes = g.row_shapes()
    if g.kind == "rows" and (not g.red or len(_reverse_flags(g)) > 1):
        return False
    for n in (g.nodes if only is None else only):
        if is_generator(n) and g.kind == "pointwise" and n.shape == full and 0 not in full:
            continue  # materialized on its own (see with_generators)
        if not fusable(n):
            return False
        ins = [inside[a.name] for a in n.operands() if a.name in inside]
        if n.kind in ("reduction", "scan"):
            x = inside.get(n.args[0].name, n.args[0])
            if g.kind != "rows" or x.shape != full or _dims(n) != g.red:
                return False
            if n.kind == "scan" and (len(g.red) != 1 or n.shape != full):
                return False
            continue
        if n.op in INDEXED and (ins or n.shape != full or n.name in g.copies):
            return False
        if g.kind == "pointwise":
            if n.shape != full or any(a.shape != full for a in ins):
                return False
        elif n.shape == full:
            ok = (full, shapes[0]) + (((),) if shapes[1] == () else ())
            if any(a.shape not in ok for a in ins):
                return False
        elif n.shape in shapes:
            if any(a.shape != n.shape for a in ins):
                return False
        else:
            return False
    return True


def _with(g: Group, n: Node) -> Group:
    """``g`` with ``n`` added: a reduction or scan makes it a rows group over its input's shape."""
    if n.kind in ("reduction", "scan") and g.kind == "pointwise":
        return Group("rows", g.domain, g.nodes + [n], _dims(n))
    return Group(g.kind, g.domain, g.nodes + [n], g.red)


def _can_take(g: Group, n: Node, deps: Deps) -> Group | None:
    """The group ``g`` (valid) would become with ``n`` in it, or None. When ``n`` leaves the group's
    kind, domain and reduced dims as they are, only ``n`` and the members reading it are checked
    again (:func:`valid`'s ``only``): growing a group node by node costs no walk over all of it per node."""
    if n.kind in ("reduction", "scan") and (n.args[0] not in g.nodes or n.args[0].shape != g.domain):
        return None
    bigger = _with(g, n)
    if (bigger.kind, bigger.domain, bigger.red, bigger.copies) == (g.kind, g.domain, g.red, g.copies):
        return bigger if valid(bigger, [n] + [m for m in g.nodes if n.name in deps.of(m)]) else None
    return bigger if valid(bigger) else None


def _alone(n: Node) -> Group:
    if n.kind in ("reduction", "scan"):
        return Group("rows", n.args[0].shape, [n], _dims(n))
    return Group("pointwise", n.shape, [n])


def _acyclic(graph: Graph, groups: list[Group], deps: Deps | None = None) -> bool:
    """Whether the groups, each contracted to one step, leave the program acyclic (:func:`.acyclic.acyclic`;
    ``deps``: the graph's, when the caller checks many groupings of one unchanged graph)."""
    return acyclic(deps if deps is not None else Deps(graph), groups)


def partition(graph: Graph) -> Partition:
    """Greedy fusion of the graph's pointwise, reduction and scan nodes (see the module docstring)."""
    groups: list[Group] = []
    where: dict[str, int] = {}
    deps = Deps(graph)  # the graph is not changed here: its dependencies are taken once
    for n in graph.nodes:
        if not fusable(n):
            continue
        placed = False
        for a in n.operands():
            if a.name not in where:
                continue
            i = where[a.name]
            bigger = _can_take(groups[i], n, deps)
            if bigger is None:
                continue
            trial = groups[:i] + [bigger] + groups[i + 1:]
            if not through(deps, trial, [i]):  # the groups so far are acyclic: only group i changed
                groups[i] = bigger
                where[n.name] = i
                placed = True
                break
        if placed:
            _merge_producers(groups, where, n, deps)
        else:
            alone = _alone(n)
            if not valid(alone):
                continue  # stays unfused: an ATen fallback
            groups.append(alone)
            where[n.name] = len(groups) - 1
    _merge_siblings(groups, where, deps)
    return with_generators(graph, Partition([g for g in groups if g.nodes]))


def with_generators(graph: Graph, part: Partition) -> Partition:
    """``part`` plus a group of its own for each generator that something other than a kernel of
    ``part`` uses (a library call, an ATen op, a view, the program's output)."""
    grouped = part.group_of()
    users = graph.users()
    extra = []
    for n in graph.nodes:
        if is_generator(n) and n.name not in grouped and 0 not in n.shape and \
                (n in graph.outputs or any(u.name not in grouped for u in users[n.name])):
            extra.append(Group("pointwise", n.shape, [n]))
    return Partition(part.groups + extra) if extra else part


def _merge(a: Group, b: Group) -> Group | None:
    """One group running both, or None: same domain (a pointwise group joins a rows group of its
    shape as full nodes), or a pointwise group over a row shape of a rows group (as row nodes)."""
    if a.domain == b.domain:
        if a.kind == b.kind == "rows" and a.red != b.red:
            return None
        rows = a if a.kind == "rows" else b
        kind, dom, red = rows.kind, a.domain, rows.red
    elif a.kind == "rows" and b.kind == "pointwise" and b.domain in a.row_shapes():
        kind, dom, red = "rows", a.domain, a.red
    elif b.kind == "rows" and a.kind == "pointwise" and a.domain in b.row_shapes():
        kind, dom, red = "rows", b.domain, b.red
    else:
        return None
    g = Group(kind, dom, a.nodes + b.nodes, red)
    return g if valid(g) else None


def _try_merge(groups: list[Group], where: dict[str, int], i: int, j: int, deps: Deps) -> bool:
    """Merge group j into group i when one kernel can run both and the program stays acyclic."""
    if i == j or not groups[i].nodes or not groups[j].nodes:
        return False
    both = _merge(groups[i], groups[j])
    if both is None:
        return False
    both.nodes.sort(key=lambda m: deps.order[m.name])  # program order inside the merged group
    trial = list(groups)
    trial[i], trial[j] = both, Group(groups[j].kind, groups[j].domain, [], groups[j].red)
    if through(deps, trial, [i]):  # the groups before are acyclic: only group i changed (j is emptied)
        return False
    groups[i], groups[j] = both, trial[j]
    for m in both.nodes:
        where[m.name] = i
    return True


def _merge_siblings(groups: list[Group], where: dict[str, int], deps: Deps) -> None:
    """Horizontal fusion: groups of one domain reading a common operand run as one kernel."""
    known: dict[int, tuple[Group, set[str]]] = {}  # id(group) -> (the group, what it reads); groups change by merges

    def reads(g: Group) -> set[str]:
        hit = known.get(id(g))
        if hit is not None and hit[0] is g:
            return hit[1]
        names = {n.name for n in g.nodes}
        out = {a for n in g.nodes for a in deps.of(n)
               if a not in names and not (a in deps.node and is_generator(deps.node[a]))}
        known[id(g)] = (g, out)
        return out

    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            if groups[i].nodes and groups[j].nodes and reads(groups[i]) & reads(groups[j]):
                _try_merge(groups, where, i, j, deps)


def _merge_producers(groups: list[Group], where: dict[str, int], n: Node, deps: Deps) -> None:
    """After ``n`` joined a group, pull the other groups that feed it into that group too."""
    for a in n.operands():
        j = where.get(a.name)
        if j is not None:
            _try_merge(groups, where, where[n.name], j, deps)


def unfused(graph: Graph) -> Partition:
    """Every fusable node in a group of its own: the other end of the partition space (one kernel
    per op), and a second partitioner that exercises the interface a search will use."""
    groups = [_alone(n) for n in graph.nodes if fusable(n)]
    return with_generators(graph, Partition([g for g in groups if valid(g)]))


def problems(graph: Graph, part: Partition, deps: Deps | None = None) -> list[str]:
    """What makes ``part`` unusable for ``graph`` (empty when codegen can run it): a node owned by two
    groups or not fusable, a group one kernel cannot run, a copy of an unknown node or a node held only
    as copies that something outside them reads, or a cycle between groups."""
    out, seen = [], set()
    known = {n.name for n in graph.nodes}
    for i, g in enumerate(part.groups):
        for n in g.nodes:
            if n.name in g.copies:
                if n.name not in known:
                    out.append(f"group {i} copies {n.name}, which is not in the program")
                continue
            if n.name in seen:
                out.append(f"{n.name} is in more than one group")
            seen.add(n.name)
            if not fusable(n) and not is_generator(n):
                out.append(f"{n.name} ({n.kind} {n.op}) cannot be fused")
        if not valid(g):
            out.append(f"group {i} ({g.kind} over {list(g.domain)}) cannot run as one kernel")
    results = {n.name for n in graph.results()}
    copied = part.copied()
    users = graph.users() if copied else {}
    for c in copied:
        holders = [g for g in part.groups if c in g.copies]
        if c in results or any(not any(u.name in {m.name for m in g.nodes} for g in holders) for u in users[c]):
            out.append(f"{c} is held only as copies but read outside them")
    if not _acyclic(graph, part.groups, deps):
        out.append("the groups form a cycle")
    return out


def mark_unfused(graph: Graph, part: Partition) -> None:
    """What no group of ``part`` took runs as ATen: say so in the IR too (kind ``aten``)."""
    grouped = set(part.group_of()) | part.copied()
    for n in graph.nodes:
        if n.kind in ("pointwise", "reduction", "scan") and n.name not in grouped and not is_generator(n):
            n.kind = "aten"
