"""Fusion rewrites of the search, each taken on a small problem and the program verified: a cheap
producer recomputed in every consumer kernel instead of written and read back (a partition move),
views fused through (sunk below their pointwise producers), and long reductions over few rows split
into parallel float32 partials and a combining pass, whose launch contracts are proved like every
generated kernel's; a planted unsound split (the last partial dropped) and a planted unsound view sink
(the inverse permutation) are rejected by the check and the program as written is solved instead."""
from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest
import torch

from warpsmith.compiler import search as S
from warpsmith.compiler import solve
from warpsmith.compiler import split as SP
from warpsmith.compiler.fuse import Partition, partition, problems
from warpsmith.compiler.ir import Node
from warpsmith.compiler.proofs import prove_text
from warpsmith.compiler.solve import compile_problem

PROBLEMS = Path(__file__).parent / "problems"
solve_mod = importlib.import_module("warpsmith.compiler.solve")  # the module (the package exports the function)


def _proved(res) -> None:
    """Every generated kernel's launch contract proved: the launch, in bounds, no int32 overflow."""
    assert res.proofs is not None and not res.proofs.failed, res.proofs.lines()
    assert len(res.proofs.kernels) == len(res.program.kernels)
    for k in res.proofs.kernels:
        got = {o.name: o.status for o in k.obligations}
        assert all(got.get(n) == "proved" for n in ("launch", "in_bounds", "int32_no_overflow")), (k.kernel, got)


def test_a_cheap_producer_is_recomputed_in_each_consumer_and_verified(tmp_path):
    res = solve(PROBLEMS / "fusion_recompute.py", tmp_path / "m.py", candidates=1)
    assert res.status == "accepted", res.verdict
    _proved(res)
    p, s = res.program, res.program.search
    assert len(p.kernels) == 2  # the row sum and the (3, 40) product; the gate is never written
    held = [k for k in p.kernels if k.group.copies]
    assert len(held) == 2 and all(set(k.group.copies) == {"sigmoid", "mul"} for k in held)
    assert not any(n.name in k.group.copies for k in p.kernels for n in k.outputs)
    assert "recompute" in s.ranked[s.choice][0].label and s.best_ms < s.greedy_ms
    assert "sigmoid" not in {n.name for k in p.kernels for slot in k.slots for n in [slot.node]}
    # the greedy partition as written: the gate is its own kernel
    _, _, greedy = compile_problem(PROBLEMS / "fusion_recompute.py", partitioner=partition)
    assert len(greedy.kernels) == 3


def test_a_node_held_only_as_copies_must_not_be_read_outside_them():
    g, _, prog = compile_problem(PROBLEMS / "fusion_recompute.py")
    part = prog.search.best
    assert part.copied() == {"sigmoid", "mul"} and problems(g, part) == []
    rows = next(grp for grp in part.groups if grp.kind == "rows")
    assert any("held only as copies" in m for m in problems(g, Partition([rows])))  # the other reader: no group


def test_views_are_fused_through_and_verified(tmp_path):
    res = solve(PROBLEMS / "fusion_views.py", tmp_path / "m.py", candidates=1)
    assert res.status == "accepted", res.verdict
    _proved(res)
    recs = {r["view"]: r for r in res.program.search.rewrites if r["rewrite"] == "view_through"}
    assert recs["permute"]["taken"] and recs["permute"]["producers"] == 3  # relu, add, mul
    assert recs["transpose"]["taken"] and recs["transpose"]["after_ms"] < recs["transpose"]["before_ms"]
    assert len(res.program.kernels) == 2  # one per output
    rows = next(k for k in res.program.kernels if k.group.kind == "rows")
    assert {"relu", "add", "mul", "sum"} <= {n.op for n in rows.group.nodes}
    _, _, written = compile_problem(PROBLEMS / "fusion_views.py", rewrites_on=False)
    assert len(written.kernels) == 4  # the views as barriers: each chain, then its consumer


def test_a_long_reduction_over_few_rows_is_split_and_its_kernels_proved():
    """At the default thresholds (rows of 131072 and a full reduction of 131072 elements): the split
    is taken for both, the input chains fused into the partials, and every kernel's contract proved."""
    _, _, prog = compile_problem(PROBLEMS / "fusion_split.py")
    recs = [r for r in prog.search.rewrites if r["rewrite"] == "split_reduction"]
    assert [(r["reduction"], r["parts"], r["taken"]) for r in recs] == [("sum", 64, True), ("mean", 64, True)]
    assert all(r["after_ms"] < r["before_ms"] for r in recs)
    doms = sorted((tuple(k.group.domain), k.group.red) for k in prog.kernels)
    # the partials (x * x fused into the first pass, |y| too), then the combining passes
    assert doms == [((2, 64), (1,)), ((2, 64, 2048), (2,)), ((64,), (0,)), ((64, 4, 512), (1, 2))]
    first = next(k for k in prog.kernels if k.group.domain == (2, 64, 2048))
    assert {n.op for n in first.group.nodes} == {"mul", "sum"}
    proofs = prove_text(prog.text, "fusion_split_new.py", 1500)
    assert len(proofs.kernels) == 4 and not proofs.failed, proofs.lines()
    for k in proofs.kernels:
        got = {o.name: o.status for o in k.obligations}
        assert all(got.get(n) == "proved" for n in ("launch", "in_bounds", "int32_no_overflow")), (k.kernel, got)


@pytest.fixture
def small_split(monkeypatch):
    """Interpreter-sized split reductions: rows of 2048 count as long, slices of 256, and a GPU whose
    launch costs 0.3 us (as in a CUDA graph): the cost model is otherwise the same."""
    monkeypatch.setattr(S, "SPLIT_MIN", 2048)
    monkeypatch.setattr(SP, "SPLIT_MIN", 2048)
    monkeypatch.setattr(SP, "SLICE_MIN", 256)
    real = solve_mod.get_target
    monkeypatch.setattr(solve_mod, "get_target", lambda name: dataclasses.replace(real(name), launch_us=0.3))
    # The one cost model (cost/program.py) rightly keeps rows this short whole (the extra launch and
    # the partials' round trip cost more than the parallelism buys; the split at the default size is
    # decided by the real model, test above). Here the emitted split program itself is what is tested,
    # so the split's own decision sees a model that prefers more reduction kernels. The tests below
    # solve with sequences=1 (the greedy rewrites): the sequence search prices each state with the
    # real model and rightly keeps these rows whole (compiler/sequence.py).
    priced = SP.program_ms
    monkeypatch.setattr(SP, "program_ms", lambda g, part, t, **kw: priced(g, part, t, **kw)
                        / 4 ** sum(1 for n in g.nodes if n.kind == "reduction"))


def test_a_split_reduction_is_verified(small_split, tmp_path):
    res = solve(PROBLEMS / "fusion_split_small.py", tmp_path / "m.py", candidates=1, sequences=1)
    assert res.status == "accepted", res.verdict
    _proved(res)
    recs = [r for r in res.program.search.rewrites if r["rewrite"] == "split_reduction"]
    assert [(r["reduction"], r["parts"], r["taken"]) for r in recs] == [("sum", 16, True), ("mean", 16, True)]
    doms = sorted((tuple(k.group.domain), k.group.red) for k in res.program.kernels)
    assert doms == [((2, 16), (1,)), ((2, 16, 256), (2,)), ((16,), (0,)), ((16, 2, 128), (1, 2))]


def test_a_short_reduction_is_not_split():
    _, _, prog = compile_problem(PROBLEMS / "long_rows.py")  # a row of 20000: one program walks it
    assert not [r for r in prog.search.rewrites if r["rewrite"] == "split_reduction"]


def test_a_split_that_drops_the_last_partial_is_rejected_and_the_program_as_written_is_solved(small_split, monkeypatch,
                                                                                             tmp_path):
    """Plant an unsound combine (the last partial of each row dropped): the check rejects the split
    program, and the last candidate, the program as written, passes."""
    real = SP._combine

    def dropped(partial, n, d):
        p = partial.shape[d]
        shape = partial.shape[:d] + (p - 1,) + partial.shape[d + 1:]
        cut = Node(f"{n.name}_cut", "view", "slice", [partial, d, 0, p - 1], shape, partial.dtype,
                   target=torch.ops.aten.slice.Tensor)
        return [cut] + real(cut, n, d)

    monkeypatch.setattr(SP, "_combine", dropped)
    out = tmp_path / "m.py"
    res = solve(PROBLEMS / "fusion_split_small.py", out, candidates=2, sequences=1)
    assert res.status == "accepted", res.verdict
    [bad] = res.attempts
    assert bad["rewrites"] and bad["reason"] == "wrong_result", bad
    assert not res.program.search.rewrites  # the accepted program is the one as written
    assert len(res.program.kernels) == 2 and out.exists()  # one row kernel per reduction, as written
    assert "with rewrites" in res.explain()


CUBE_VIEW = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0).permute(1, 2, 0).sum(-1)


def get_inputs():
    return [torch.randn(4, 4, 4)]


def get_init_inputs():
    return []
'''


def test_a_view_sunk_with_the_inverse_permutation_is_rejected_and_the_program_as_written_is_solved(monkeypatch,
                                                                                                   tmp_path):
    """Plant an unsound view sink (each operand permuted by the inverse of the view's permutation, which
    on a cube keeps every shape): the check rejects the program with the view fused through, and the
    last candidate, the program as written, passes."""
    from warpsmith.compiler import views as V

    real = V._view_of

    def inverted(v, a, name):
        n = real(v, a, name)
        if n.op == "permute":
            dims = list(n.args[1])
            inverse = [dims.index(i) for i in range(len(dims))]
            n.args[1] = inverse
            n.aten_args[1] = inverse
        return n

    problem = tmp_path / "cube_view.py"
    problem.write_text(CUBE_VIEW)
    ok = solve(problem, tmp_path / "ok.py", candidates=1, sequences=1)  # the sound sink: taken and accepted
    assert ok.status == "accepted", ok.verdict
    assert [r["taken"] for r in ok.program.search.rewrites if r["rewrite"] == "view_through"] == [True]
    monkeypatch.setattr(V, "_view_of", inverted)
    out = tmp_path / "m.py"
    res = solve(problem, out, candidates=2, sequences=1)
    assert res.status == "accepted", res.verdict
    [bad] = res.attempts
    assert bad["rewrites"] and bad["reason"] == "wrong_result", bad
    assert not res.program.search.rewrites  # the accepted program is the one as written
    assert out.exists() and "with rewrites" in res.explain()
