"""Search: a local search over fusion partitions, ranked by the package's cost model.

The cost model is for a named target (:func:`warpsmith.cost.program.program_ms`: each library call
by its family's model at the config its launcher runs, each generated kernel by the memory model at
its best valid launch config, found by the kernel config search of :mod:`warpsmith.cost.program`;
nothing is measured without a GPU, and every figure in the report says *predicted* and for which
target). The rewrites a bit-exact
compiler may not make (:mod:`.rewrite`) and the values folded out of the call (:mod:`.hoist`) are
chosen with the same model, searched together with the partitions by :mod:`.sequence` (which runs
this partition search on each state), and recorded in its result. Every choice
here is allowed only because the emitted program is verified at the end (``solve`` runs
``warpsmith check`` on it); the search never relaxes that.

- **Partitions**: starting from the greedy partition (:func:`~.fuse.partition`) and from one kernel
  per op (:func:`~.fuse.unfused`), a best-first local search over three moves, *merge* two groups
  one kernel can run (the program staying acyclic), *split* a group at a cut in program order
  (both halves valid), and *recompute* a cheap pointwise group (at most :data:`RECOMPUTE_MAX` nodes,
  no result of the program) in every kernel that reads it instead of writing it and reading it back
  (its nodes become copies in each consumer group, :mod:`.fuse`; priced by the model: the launch and
  the bytes saved against the recomputed elements' arithmetic), within a budget of evaluated
  partitions. Each explored partition is kept with its predicted time; the report gives the chosen
  one's gain over greedy fusion.
"""
from __future__ import annotations

import copy
import heapq
from dataclasses import dataclass, field
from typing import Any, Callable

from ..cost import program as _program
from ..cost.program import program_ms
from ..ops import get_op
from .acyclic import Deps, through
from .fuse import INDEXED, Group, Partition, _acyclic, _merge, partition, problems, unfused, valid
from .ir import Graph, Node


# the cost model prices library GEMMs on problems the op registry validates (cost sits below ops)
_program.build_problem = lambda op, shape, dtype, attrs: get_op(op).problem(shape, dtype, attrs)

SPLIT_MIN = 65536  # a row this long over fewer rows than SMs: .split considers splitting it

RECOMPUTE_MAX = 8  # nodes of a group the search may recompute in its consumers

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
    hoisted: dict[str, Any] | None = None  # what hoist.hoist folded out of the call (None: nothing)
    ranked: list[tuple[Explored, Partition]] = field(default_factory=list, repr=False)  # best first
    choice: int = 0  # the rank of the partition used (0: the best; more when better ones failed the check)
    # filled when the program is emitted (solve.compile_problem): each generated kernel's launch config
    # (searched) and each library call's, and the same program priced with every kernel at its default
    kernels: list[dict[str, Any]] = field(default_factory=list)
    library: list[dict[str, Any]] = field(default_factory=list)  # compiler.library_tune.choose's records
    untuned_ms: float | None = None  # the chosen program, every generated kernel at its default config
    greedy_untuned_ms: float | None = None  # greedy fusion, no rewrite, default configs (the compiler before the search)
    sequence: Any = None  # compiler.sequence.SequenceSearch: the search over rewrite decisions and partitions (None: none ran)
    stopped: bool = False  # the time share ran out before the budget: the best partition found so far

    def pick(self, rank: int) -> Partition:
        """The ``rank``-th best explored partition (it becomes ``best``); IndexError past the last."""
        e, part = self.ranked[rank]
        self.best, self.best_ms, self.choice = part, e.predicted_ms, rank
        return part

    def to_json(self) -> dict[str, Any]:
        def ratio(a: float | None) -> float | None:
            return a / self.best_ms if a is not None and self.best_ms > 0 else None

        return {"target": self.target,
                "figures": "predicted (warpsmith.cost.program: family models, memory model), not measured",
                "greedy_ms": self.greedy_ms, "chosen_ms": self.best_ms,
                "gain_over_greedy": self.greedy_ms / self.best_ms if self.best_ms > 0 else 1.0,
                "untuned_ms": self.untuned_ms, "gain_over_untuned": ratio(self.untuned_ms),
                "greedy_untuned_ms": self.greedy_untuned_ms, "gain_over_greedy_untuned": ratio(self.greedy_untuned_ms),
                "kernels": self.kernels, "library": self.library,
                "explored": [e.__dict__ for e in self.explored], "rewrites": self.rewrites, "hoisted": self.hoisted,
                "choice": self.choice, "chosen_label": self.ranked[self.choice][0].label if self.ranked else "greedy",
                "sequence": self.sequence.to_json() if self.sequence is not None else None,
                "stopped_early": self.early}

    @property
    def early(self) -> bool:
        """Whether the search's time share ran out before its budgets (it used its best so far)."""
        return self.stopped or bool(self.sequence is not None and self.sequence.stopped)

    def lines(self) -> list[str]:
        out = [f"search (predicted on {self.target}, not measured): {len(self.explored)} partitions explored; "
               f"greedy {self.greedy_ms * 1e3:.2f} us, chosen {self.best_ms * 1e3:.2f} us "
               f"({self.greedy_ms / self.best_ms if self.best_ms else 1:.2f}x)"
               + ("; stopped early (its share of the time limit ran out): the best found so far" if self.early else "")]
        if self.untuned_ms is not None and self.greedy_untuned_ms is not None:
            out.append(f"  the chosen program with untuned kernels (default configs) {self.untuned_ms * 1e3:.2f} us "
                       f"({self.untuned_ms / self.best_ms if self.best_ms else 1:.2f}x); greedy fusion with default "
                       f"configs {self.greedy_untuned_ms * 1e3:.2f} us (predicted on {self.target})")
        for k in self.kernels:
            cfg = ", ".join(f"{a}={b}" for a, b in k["config"].items())
            dft = ", ".join(f"{a}={b}" for a, b in k["default_config"].items())
            out.append(f"  kernel {k['name']}: {cfg}: {k['predicted_ms'] * 1e3:.3g} us predicted on {self.target} "
                       f"({k['configs_searched']} configs, {k['configs_rejected']} invalid); default {dft}: "
                       f"{k['default_ms'] * 1e3:.3g} us")
        for c in self.library:
            cfg = ", ".join(f"{a}={b}" for a, b in c["config"].items()) if c["config"] else "its launcher's"
            line = (f"  library {c['op']} ({c['node']}): {cfg}; source {c['source']} ({c['detail']}): "
                    f"{c['predicted_ms'] * 1e3:.3g} us predicted on {self.target}")
            if c.get("tuned"):
                dft = ", ".join(f"{a}={b}" for a, b in c["default_config"].items())
                line += (f" vs launcher default {dft}: {c['default_ms'] * 1e3:.3g} us "
                         f"({c['default_ms'] / c['predicted_ms'] if c['predicted_ms'] else 1:.2f}x)")
            else:
                line += " (the launcher default)"
            rec = c.get("db_record")
            if rec is not None:
                line += (f"; written to the tuning DB as record {rec['record_id']} (verified by {rec['verified_by']})"
                         if rec["written"] else f"; not written to the tuning DB: {rec['reason']}")
            out.append(line)
        if self.sequence is not None:
            q = self.sequence.to_json()
            forced = ", ".join(f"{k}: {v}" for k, v in q["winner_forced"].items()) or "none (the greedy rewrites)"
            extra = (f", {q['iterations']} tree iterations, {q['memo_hits']} states reached again"
                     if q["strategy"] == "mcts" else "")
            out.append(f"  rewrite sequences: strategy {q['strategy']} ({q['strategy_description']}); "
                       f"{q['evaluated']} of at most {q['budget']} states evaluated, {q['dead_ends']} dead end(s)"
                       f"{extra} (seed {q['seed']}; "
                       f"move order: {q['move_order']}); winner: state {q['winner']}, forced {forced}: "
                       f"{q['predicted_ms'] * 1e3:.2f} us vs greedy rewrites then partitions "
                       f"{q['greedy_rewrites_ms'] * 1e3:.2f} us ({q['gain_over_greedy_rewrites']:.2f}x) and greedy "
                       f"fusion {self.greedy_ms * 1e3:.2f} us ({self.greedy_ms / q['predicted_ms']:.2f}x), predicted")
        from .rewrite import describe

        out += [f"  {describe(r)}" for r in self.rewrites]
        if self.hoisted:
            out.append(f"  {self.hoisted['line']}")
        for e in sorted(self.explored, key=lambda e: e.predicted_ms)[:8]:
            out.append(f"  {e.predicted_ms * 1e3:9.2f} us  {e.kernels:3d} kernels  {e.label}")
        return out


def _signature(part: Partition) -> tuple:
    return tuple(sorted(tuple(sorted(n.name + ("*" if n.name in g.copies else "") for n in g.nodes))
                        for g in part.groups if g.nodes))


def _neighbours(graph: Graph, part: Partition, deps: Deps) -> list[tuple[str, Partition]]:
    gs = [g for g in part.groups if g.nodes]
    out = []
    for i in range(len(gs)):
        for j in range(i + 1, len(gs)):
            both = _merge(gs[i], gs[j])
            if both is None:
                continue
            both.nodes.sort(key=lambda m: deps.order[m.name])
            trial = gs[:i] + [both] + gs[i + 1:j] + gs[j + 1:]
            if not through(deps, trial, [i]):  # ``part`` is acyclic (problems() passed it): only group i changed
                out.append((f"merge g{i}+g{j}", Partition(trial)))
    for i, g in enumerate(gs):
        rec = _recomputed(graph, gs, i, deps)
        if rec is not None:
            out.append((f"recompute g{i}", rec))
    for i, g in enumerate(gs):
        if g.copies:
            continue
        for cut in range(1, len(g.nodes)):
            halves = [_shrunk(g, g.nodes[:cut]), _shrunk(g, g.nodes[cut:])]
            if any(h is None for h in halves):
                continue
            trial = gs[:i] + halves + gs[i + 1:]
            if not through(deps, trial, [i, i + 1]):  # a refinement of ``part``: a new cycle passes through a half
                out.append((f"split g{i}@{cut}", Partition(trial)))
    return out


def _recomputed(graph: Graph, gs: list[Group], i: int, deps: Deps) -> Partition | None:
    """The partition with group ``i`` (a small pointwise group) dropped and its nodes recomputed as
    copies in every group that reads them, or None when that cannot be done (a result of the
    program, a reader outside every group, a consumer that cannot hold the copies, a cycle)."""
    p = gs[i]
    if p.kind != "pointwise" or p.copies or len(p.nodes) > RECOMPUTE_MAX or \
            any(n.kind != "pointwise" or n.op in INDEXED for n in p.nodes):
        return None
    names = {n.name for n in p.nodes}
    results = {n.name for n in graph.results()}
    if names & results:
        return None
    owner = {n.name: j for j, g in enumerate(gs) for n in g.nodes if n.name not in g.copies}
    users = graph.users()
    readers: set[int] = set()
    for n in p.nodes:
        for u in users[n.name]:
            if u.name in names:
                continue
            if u.name not in owner:
                return None  # a library call, a view, an ATen op reads it: it must be written
            readers.add(owner[u.name])
    if not readers or len(readers) == 1 and _merge(p, gs[min(readers)]) is not None:
        return None  # one reader that can take the group as it is: that is the merge move (same kernel text)
    order = deps.order
    trial = list(gs)
    for j in sorted(readers):
        h = gs[j]
        if names & {m.name for m in h.nodes}:
            return None
        keep, drop = h.row_shapes() or (h.domain, h.domain)
        for shape in dict.fromkeys([keep, drop, h.domain]):
            if not _broadcasts(p.domain, shape):
                continue
            clones = []
            for n in p.nodes:
                c = copy.copy(n)
                c.shape = tuple(shape)
                clones.append(c)
            held = Group(h.kind, h.domain, sorted(h.nodes + clones, key=lambda m: order[m.name]), h.red,
                         frozenset(names) | h.copies)
            if valid(held):
                trial[j] = held
                break
        else:
            return None
    trial = trial[:i] + trial[i + 1:]
    return Partition(trial) if _acyclic(graph, trial, deps) else None


def _broadcasts(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    """Whether a value of shape ``small`` broadcasts to ``big`` (numpy's rule, as ATen's)."""
    if len(small) > len(big):
        return False
    return all(a in (1, b) for a, b in zip(small[::-1], big[::-1]))


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


def search(graph: Graph, target: Any, budget: int = 200, stop: Callable[[], bool] | None = None) -> SearchResult:
    """Best-first local search over partitions of ``graph`` (already lowered), ``budget`` evaluations;
    anytime: once ``stop()`` is true, no partition is expanded further and the best so far wins
    (``SearchResult.stopped``)."""
    greedy = partition(graph)
    greedy_ms = program_ms(graph, greedy, target)
    deps = Deps(graph)  # the graph is not changed during the search: its dependencies are taken once
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
        t = program_ms(graph, p, target)
        seen[key], parts[key] = Explored(label, t, len([g for g in p.groups if g.nodes])), p
        heapq.heappush(heap, (t, tick, label, p))
        tick += 1
    best_ms, best = greedy_ms, greedy
    expanded, stopped = 0, False
    while heap and len(seen) < budget and expanded < budget:
        if stop is not None and stop():
            stopped = True
            break
        t, _, label, p = heapq.heappop(heap)
        expanded += 1
        if t < best_ms - 1e-12:
            best_ms, best = t, p
        for move, q in _neighbours(graph, p, deps):
            key = _signature(q)
            if key in seen or problems(graph, q, deps):
                continue
            tq = program_ms(graph, q, target)
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
    return SearchResult(ranked[0][1], best_ms, greedy_ms, target.name, list(seen.values()), ranked=ranked,
                        stopped=stopped)
