"""The acyclicity check of fusion and the partition search (compiler/acyclic.py): the same verdicts as
a plain contraction of the program checked by the standard library's topological sort, and the
program's dependencies read once per pass, not once per trial grouping."""
import random
from graphlib import CycleError, TopologicalSorter

import torch

from warpsmith.compiler import ir
from warpsmith.compiler.acyclic import Deps, acyclic, through
from warpsmith.compiler.fuse import Group, partition
from warpsmith.compiler.ir import Graph, Node


def _dag(n: int, rng: random.Random) -> Graph:
    x = Node("x", "input", "input", [], (8,), torch.float32)
    nodes = [x]
    for i in range(n):
        ops = rng.sample(nodes, min(len(nodes), rng.choice([1, 1, 2])))
        op = "add" if len(ops) == 2 else "relu"
        nodes.append(Node(f"v{i}", "pointwise", op, ops if len(ops) == 2 else [ops[0]], (8,), torch.float32))
    return Graph(nodes, [nodes[-1]], [x], {})


def _reference(graph: Graph, groups: list[Group]) -> bool:
    """Contract each group's owned nodes to one vertex (a copy: its group reads the copy's operands)."""
    step = {n.name: f"#g{i}" for i, g in enumerate(groups) for n in g.nodes if n.name not in g.copies}
    preds: dict[str, set[str]] = {}
    for n in graph.nodes:
        if n.name not in step:
            preds.setdefault(n.name, set()).update(step.get(a.name, a.name) for a in n.operands())
    for i, g in enumerate(groups):
        inside = {m.name for m in g.nodes}
        preds.setdefault(f"#g{i}", set()).update(step.get(a.name, a.name) for m in g.nodes
                                                 for a in m.operands() if a.name not in inside)
    try:
        tuple(TopologicalSorter(preds).static_order())
        return True
    except CycleError:
        return False


def test_acyclic_agrees_with_a_topological_sort_on_random_groupings():
    rng = random.Random(7)
    verdicts = set()
    for trial in range(300):
        g = _dag(rng.randint(3, 14), rng)
        pw = [n for n in g.nodes if n.kind == "pointwise"]
        rng.shuffle(pw)
        groups, k = [], 0
        while k < len(pw):
            size = rng.randint(1, 3)
            members = pw[k:k + size]
            k += size
            if rng.random() < 0.2:
                continue  # these nodes stay ungrouped
            copies = frozenset(m.name for m in members[:1]) if rng.random() < 0.15 and len(members) > 1 else frozenset()
            groups.append(Group("pointwise", (8,), members, (), copies))
        want = _reference(g, groups)
        assert acyclic(Deps(g), groups) == want, (trial, [[m.name for m in gr.nodes] for gr in groups])
        verdicts.add(want)
    assert verdicts == {True, False}  # both verdicts were exercised


def test_greedy_fusion_reads_the_programs_operands_once_not_per_trial(monkeypatch):
    """A chain of 300 pointwise nodes: greedy fusion tries each node in its producer's group (300 trial
    groupings). The dependencies are taken once (a few reads of each node's operands), where a check
    that rebuilt them per trial read every node's operands once per trial (about 300 x 300)."""
    x = Node("x", "input", "input", [], (8,), torch.float32)
    nodes, prev = [x], x
    for i in range(300):
        prev = Node(f"v{i}", "pointwise", "relu" if i % 2 else "neg", [prev], (8,), torch.float32)
        nodes.append(prev)
    g = Graph(nodes, [prev], [x], {})
    calls = 0
    real = ir.Node.operands

    def counted(self):
        nonlocal calls
        calls += 1
        return real(self)

    monkeypatch.setattr(ir.Node, "operands", counted)
    part = partition(g)
    assert [len(gr.nodes) for gr in part.groups] == [300]  # one kernel, as before
    assert calls < 5 * len(nodes), calls


def test_through_finds_exactly_the_cycles_a_merge_makes():
    """From an acyclic grouping, merge two groups (or grow one by an ungrouped node): ``through`` the
    changed group says "cycle" exactly when the topological sort of the whole contraction fails."""
    rng = random.Random(11)
    verdicts = []
    for trial in range(400):
        g = _dag(rng.randint(4, 14), rng)
        pw = [n for n in g.nodes if n.kind == "pointwise"]
        rng.shuffle(pw)
        groups = [Group("pointwise", (8,), pw[k:k + 2]) for k in range(0, len(pw) - 1, 2)]
        loose = pw[len(groups) * 2:]
        if len(groups) < 2 or not _reference(g, groups):
            continue
        i, j = sorted(rng.sample(range(len(groups)), 2))
        if loose and rng.random() < 0.3:
            trial_groups = list(groups)
            trial_groups[i] = Group("pointwise", (8,), groups[i].nodes + loose[:1])
        else:
            merged = Group("pointwise", (8,), groups[i].nodes + groups[j].nodes)
            trial_groups = groups[:i] + [merged] + groups[i + 1:j] + groups[j + 1:]
        want = _reference(g, trial_groups)
        assert through(Deps(g), trial_groups, [i]) == (not want), trial
        verdicts.append(want)
    assert len(set(verdicts)) == 2 and len(verdicts) > 100


def test_view_sinking_takes_the_programs_users_per_view_not_per_node(monkeypatch):
    """fuse_views looks for views between pointwise chains; a program of 200 pointwise nodes and one
    view takes the graph's users a few times, not once per node (a whole-graph walk per node)."""
    from warpsmith.compiler.views import fuse_views
    from warpsmith.targets import get_target

    x = Node("x", "input", "input", [], (8, 4), torch.float32)
    nodes, prev = [x], x
    for i in range(200):
        prev = Node(f"v{i}", "pointwise", "neg", [prev], (8, 4), torch.float32)
        nodes.append(prev)
    view = Node("t", "view", "t", [prev], (4, 8), torch.float32)
    out = Node("r", "pointwise", "relu", [view], (4, 8), torch.float32)
    g = Graph(nodes + [view, out], [out], [x], {})
    calls = 0
    real = Graph.users

    def counted(self):
        nonlocal calls
        calls += 1
        return real(self)

    monkeypatch.setattr(Graph, "users", counted)
    records = fuse_views(g, get_target("h100"))
    assert [r["at"] for r in records] == ["t"]  # the one view was considered
    assert calls < 20, calls
