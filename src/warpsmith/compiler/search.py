"""Search: rewrites a bit-exact compiler may not make, and a local search over fusion partitions.

Both are ranked by a roofline cost model for a named target (:func:`predict_ms`: per kernel, its
launch plus the larger of its bytes over the DRAM bandwidth and its FLOPs over the peak; nothing is
measured without a GPU, and every figure in the report says *predicted* and for which target).
Every choice here is allowed only because the emitted program is verified at the end (``solve``
runs ``warpsmith check`` on it); the search never relaxes that.

- **Reassociation** of matmul chains: ``(A @ B) @ C`` and ``A @ (B @ C)`` compute the same product
  in a different order (different rounding: not bit-exact) with different FLOPs; each chain is
  rewritten to the association the cost model prefers, and both are listed.
- **Partitions**: starting from the greedy partition (:func:`~.fuse.partition`) and from one kernel
  per op (:func:`~.fuse.unfused`), a best-first local search over two moves, *merge* two groups
  one kernel can run (the program staying acyclic) and *split* a group at a cut in program order
  (both halves valid), within a budget of evaluated partitions. Each explored partition is kept
  with its predicted time; the report gives the chosen one's gain over greedy fusion.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

from .fuse import Group, Partition, _acyclic, _merge, partition, problems, unfused, valid
from .ir import Graph, Node

_DTYPE_MATH = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}


# ---- the cost model ----------------------------------------------------------------------------------
def _bytes(n: Node) -> int:
    if n.shape is None or n.dtype is None:
        return 0
    return math.prod(n.shape) * n.dtype.itemsize


def _matmul_flops(n: Node) -> float:
    a, b = n.args[0], n.args[1]
    if not (isinstance(a, Node) and isinstance(b, Node) and a.shape and b.shape and n.shape):
        return 0.0
    k = a.shape[-1]
    return 2.0 * math.prod(n.shape) * k


def node_ms(n: Node, target: Any) -> float:
    """Predicted time of a node run alone (a library call, an ATen fallback, an unfused op)."""
    if n.kind in ("input", "param", "view"):
        return 0.0
    moved = _bytes(n) + sum(_bytes(a) for a in set(n.operands()))
    flops = _matmul_flops(n) if n.kind == "library" and n.op == "matmul" else 0.0
    peak = target.peak_tflops.get(_DTYPE_MATH.get(str(n.dtype), "fp32"), target.peak_tflops.get("fp32", 1.0))
    return target.launch_us * 1e-3 + max(moved / (target.hbm_tbps * 1e9), flops / (peak * 1e9))


def group_ms(graph: Graph, g: Group, target: Any, users: dict[str, list[Node]]) -> float:
    """A generated kernel: it reads each outside operand once and writes what is used outside it."""
    inside = {n.name for n in g.nodes}
    reads = {a.name: a for n in g.nodes for a in n.operands() if a.name not in inside}
    outs = [n for n in g.nodes if n in graph.outputs or any(u.name not in inside for u in users[n.name])]
    moved = sum(_bytes(a) for a in reads.values()) + sum(_bytes(n) for n in outs)
    return target.launch_us * 1e-3 + moved / (target.hbm_tbps * 1e9)


def predict_ms(graph: Graph, part: Partition, target: Any) -> float:
    """Predicted time of the whole program (see the module docstring)."""
    users = graph.users()
    grouped = part.group_of()
    t = sum(group_ms(graph, g, target, users) for g in part.groups)
    return t + sum(node_ms(n, target) for n in graph.nodes if n.name not in grouped)


# ---- rewrites ---------------------------------------------------------------------------------------
def _plain_mm(n: Any, activation: bool = False) -> bool:
    """A 2-D library matmul with no bias (and no activation unless ``activation``)."""
    return isinstance(n, Node) and n.kind == "library" and n.op == "matmul" and n.attrs.get("form") == "mm" \
        and (activation or n.attrs.get("activation") == "none") and n.args[2] is None


def reassociate(graph: Graph, target: Any) -> list[dict[str, Any]]:
    """Rewrite each ``(A @ B) @ C`` chain (2-D, no bias, the inner product used only there and with
    no activation; the outer one's activation stays on the outer product) to the cheaper
    association; returns one record per chain with both predictions."""
    records = []
    for n in list(graph.nodes):
        if not _plain_mm(n, activation=True) or not _plain_mm(n.args[0]):
            continue
        p = n.args[0]
        if p in graph.outputs or len(graph.users()[p.name]) != 1:
            continue
        a, b, c = p.args[0], p.args[1], n.args[1]
        inner = Node(f"{n.name}_bc", "library", "matmul", [b, c, None], (b.shape[0], c.shape[1]), n.dtype,
                     {"form": "mm", "activation": "none"}, line=n.line)
        outer = Node(n.name, "library", "matmul", [a, inner, None], n.shape, n.dtype, dict(n.attrs), line=n.line)
        left = node_ms(p, target) + node_ms(n, target)
        right = node_ms(inner, target) + node_ms(outer, target)
        rec = {"rewrite": "reassociate", "at": n.name, "left_ms": left, "right_ms": right,
               "shapes": [list(a.shape), list(b.shape), list(c.shape)], "taken": right < left}
        if rec["taken"]:
            i = graph.nodes.index(p)
            graph.nodes[i] = inner
            graph.nodes[graph.nodes.index(n)] = outer
            for m in graph.nodes:  # n's users now read the new node (same name, new object)
                m.args = _swap(m.args, n, outer)
                m.aten_args = _swap(m.aten_args or [], n, outer)
            graph.outputs = [outer if o is n else o for o in graph.outputs]
        records.append(rec)
    return records


def _swap(v: Any, old: Node, new: Node) -> Any:
    if v is old:
        return new
    if isinstance(v, (list, tuple)):
        return type(v)(_swap(x, old, new) for x in v)
    return v


# ---- the partition search ---------------------------------------------------------------------------
@dataclass
class Explored:
    label: str
    predicted_ms: float
    kernels: int


@dataclass
class SearchResult:
    best: Partition
    best_ms: float
    greedy_ms: float
    target: str
    explored: list[Explored] = field(default_factory=list)
    rewrites: list[dict[str, Any]] = field(default_factory=list)
    ranked: list[tuple[Explored, Partition]] = field(default_factory=list, repr=False)  # best first
    choice: int = 0  # the rank of the partition used (0: the best; more when better ones failed the check)

    def pick(self, rank: int) -> Partition:
        """The ``rank``-th best explored partition (it becomes ``best``); IndexError past the last."""
        e, part = self.ranked[rank]
        self.best, self.best_ms, self.choice = part, e.predicted_ms, rank
        return part

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "figures": "predicted (roofline cost model), not measured",
                "greedy_ms": self.greedy_ms, "chosen_ms": self.best_ms,
                "gain_over_greedy": self.greedy_ms / self.best_ms if self.best_ms > 0 else 1.0,
                "explored": [e.__dict__ for e in self.explored], "rewrites": self.rewrites,
                "choice": self.choice}

    def lines(self) -> list[str]:
        out = [f"search (predicted on {self.target}, not measured): {len(self.explored)} partitions explored; "
               f"greedy {self.greedy_ms * 1e3:.2f} us, chosen {self.best_ms * 1e3:.2f} us "
               f"({self.greedy_ms / self.best_ms if self.best_ms else 1:.2f}x)"]
        for r in self.rewrites:
            out.append(f"  rewrite {r['rewrite']} at {r['at']} {r['shapes']}: (AB)C {r['left_ms'] * 1e3:.2f} us, "
                       f"A(BC) {r['right_ms'] * 1e3:.2f} us -> {'taken' if r['taken'] else 'kept'}")
        for e in sorted(self.explored, key=lambda e: e.predicted_ms)[:8]:
            out.append(f"  {e.predicted_ms * 1e3:9.2f} us  {e.kernels:3d} kernels  {e.label}")
        return out


def _signature(part: Partition) -> tuple:
    return tuple(sorted(tuple(sorted(n.name for n in g.nodes)) for g in part.groups if g.nodes))


def _neighbours(graph: Graph, part: Partition) -> list[tuple[str, Partition]]:
    gs = [g for g in part.groups if g.nodes]
    out = []
    for i in range(len(gs)):
        for j in range(i + 1, len(gs)):
            both = _merge(gs[i], gs[j])
            if both is None:
                continue
            order = {m.name: k for k, m in enumerate(graph.nodes)}
            both.nodes.sort(key=lambda m: order[m.name])
            trial = gs[:i] + [both] + gs[i + 1:j] + gs[j + 1:]
            if _acyclic(graph, trial):
                out.append((f"merge g{i}+g{j}", Partition(trial)))
    for i, g in enumerate(gs):
        for cut in range(1, len(g.nodes)):
            halves = [_shrunk(g, g.nodes[:cut]), _shrunk(g, g.nodes[cut:])]
            if any(h is None for h in halves):
                continue
            trial = gs[:i] + halves + gs[i + 1:]
            if _acyclic(graph, trial):
                out.append((f"split g{i}@{cut}", Partition(trial)))
    return out


def _shrunk(g: Group, nodes: list[Node]) -> Group | None:
    """A group of ``nodes`` taken from ``g``: rows if it keeps a reduction, else pointwise over the
    shape its nodes share."""
    if any(n.kind == "reduction" for n in nodes):
        h = Group("rows", g.domain, list(nodes))
    else:
        shapes = {n.shape for n in nodes}
        if len(shapes) != 1:
            return None
        h = Group("pointwise", shapes.pop(), list(nodes))
    return h if valid(h) else None


def search(graph: Graph, target: Any, budget: int = 200) -> SearchResult:
    """Best-first local search over partitions of ``graph`` (already lowered), ``budget`` evaluations."""
    greedy = partition(graph)
    greedy_ms = predict_ms(graph, greedy, target)
    seen: dict[tuple, Explored] = {}
    parts: dict[tuple, Partition] = {}
    heap: list[tuple[float, int, str, Partition]] = []
    tick = 0
    for label, p in (("greedy", greedy), ("unfused", unfused(graph))):
        if problems(graph, p):
            continue
        key = _signature(p)
        if key in seen:
            continue
        t = predict_ms(graph, p, target)
        seen[key], parts[key] = Explored(label, t, len([g for g in p.groups if g.nodes])), p
        heapq.heappush(heap, (t, tick, label, p))
        tick += 1
    best_ms, best = greedy_ms, greedy
    expanded = 0
    while heap and len(seen) < budget and expanded < budget:
        t, _, label, p = heapq.heappop(heap)
        expanded += 1
        if t < best_ms - 1e-12:
            best_ms, best = t, p
        for move, q in _neighbours(graph, p):
            key = _signature(q)
            if key in seen or problems(graph, q):
                continue
            tq = predict_ms(graph, q, target)
            name = f"{label}, {move}" if len(label) < 80 else f"...{label[-60:]}, {move}"
            seen[key], parts[key] = Explored(name, tq, len([g for g in q.groups if g.nodes])), q
            heapq.heappush(heap, (tq, tick, name, q))
            tick += 1
            if len(seen) >= budget:
                break
    for t, _, label, p in heap:  # partitions evaluated but not expanded can still be the best
        if t < best_ms - 1e-12:
            best_ms, best = t, p
    best_key = _signature(best)
    order = sorted(seen, key=lambda k: (k != best_key, seen[k].predicted_ms))  # stable: ties keep search order
    ranked = [(seen[k], Partition([g for g in parts[k].groups if g.nodes])) for k in order]
    if not ranked or best_key not in seen:  # greedy itself unusable: as before, the caller's check says so
        ranked.insert(0, (Explored("greedy", best_ms, len([g for g in best.groups if g.nodes])),
                          Partition([g for g in best.groups if g.nodes])))
    return SearchResult(ranked[0][1], best_ms, greedy_ms, target.name, list(seen.values()), ranked=ranked)
