"""Writer witnesses: race freedom and coverage proved for all shapes, and never from a wrong witness.

The zoo's ``witness_kernels`` copy a matrix in GEMM's grouped tile order and with a persistent
grid-stride loop: without a witness z3 does not invert either (``bounded``); with one both are
``proved``. A planted bug (a skipped tile, two programs writing one row) still fails, and a witness
that lies about a correct kernel proves nothing.
"""
import sys
from pathlib import Path

import pytest
import z3

from warpsmith.verify.symbolic import LaunchContract, Tensor, Witness, Writer, prove, sizes
from warpsmith.verify.symbolic.prove import Prover
from warpsmith.verify.symbolic.rewrite import Rewriter, decompose
from warpsmith.verify.symbolic.witness import decide, layout_injective

sys.path.insert(0, str(Path(__file__).parent / "zoo"))
import kernel_bugs  # noqa: E402
import witness_kernels as W  # noqa: E402


def obligations(contract, names=("race_free", "coverage")):
    return {o.name: o for r in prove(contract) for o in r.obligations if o.name in names}


@pytest.mark.parametrize("make", [
    # the grouped order's witness is proved on the library's own GEMM in the quick tier
    # (test_prove.py, matmul_tiled_kernel); here its "bounded without it" half costs 20 CPU-s
    pytest.param(W.grouped, marks=pytest.mark.slow), W.strided], ids=["grouped_order", "grid_stride"])
def test_a_witness_proves_what_is_bounded_without_it(make):
    without = obligations(make(witness=False))
    assert all(o.status.startswith("bounded(") for o in without.values()), without
    wit = obligations(make())
    for name in ("race_free", "coverage"):
        assert wit[name].status == "proved", wit[name].to_json()
        assert "by the writer witness" in wit[name].detail


def test_a_skipped_tile_fails_coverage_with_a_counterexample():
    obs = obligations(W.grouped("skip_last_tile"))
    assert obs["coverage"].status == "failed" and obs["coverage"].counterexample
    assert "witness is refuted" in obs["coverage"].detail
    assert obs["race_free"].status == "proved"  # skipping a tile makes no two writers


def test_two_programs_writing_one_row_fail_race_freedom():
    obs = obligations(W.strided("shared_row"))
    assert obs["race_free"].status == "failed", obs["race_free"].to_json()
    cex = obs["race_free"].counterexample
    assert cex and "address" in cex and "first.pid0" in cex and "second.pid0" in cex


def test_a_race_found_by_enumeration_names_its_writers_as_the_solver_does(monkeypatch):
    """On a loaded machine z3 may give up (its budget is in milliseconds): the race is then found on
    the named shapes, and the counterexample names the two writers with the same keys."""
    monkeypatch.setattr(Prover, "_solve", lambda self, *a, **k: ("unknown", "timeout (forced by the test)"))
    ob = obligations(W.strided("shared_row"))["race_free"]
    assert ob.status == "failed" and "counterexample at named shape" in ob.detail, ob.to_json()
    cex = ob.counterexample
    assert {"address", "first.pid0", "second.pid0", "first.store", "second.store"} <= set(cex), cex


@pytest.mark.parametrize("lie,broken", [
    # a writer lying about the program or the lanes: the writer check that refutes them refutes the lying
    # iteration of test_a_witness_with_the_wrong_iteration_proves_nothing, quick (12 CPU-s each here)
    pytest.param("program", ("race_free", "coverage"), marks=pytest.mark.slow),
    pytest.param("lane", ("race_free", "coverage"), marks=pytest.mark.slow),
    ("element", ("race_free",))])
def test_a_lying_witness_of_the_grouped_order_proves_nothing(lie, broken):
    obs = obligations(W.grouped(lie=lie))
    for name in broken:
        assert obs[name].status.startswith("bounded("), obs[name].to_json()  # checked on shapes, never proved
        assert "witness is refuted" in obs[name].detail


def test_a_witness_with_the_wrong_iteration_proves_nothing():
    obs = obligations(W.strided(lie="iteration"))
    for o in obs.values():
        assert o.status.startswith("bounded("), o.to_json()
        assert "witness is refuted" in o.detail


def test_a_witness_that_does_not_fit_the_kernel_is_not_used():
    c = W.strided()
    c.witnesses = {"y_ptr": Witness(writer=lambda m, n: Writer(pid=(m,), lanes=(n,)),  # no iterations, one lane
                                    element=lambda store, pid, iters, lanes: (pid[0], lanes[0]))}
    obs = obligations(c)
    assert all(o.status.startswith("bounded(") for o in obs.values()), obs
    assert "does not fit the kernel" in obs["coverage"].detail  # a writer with no iterations for two loops


def test_an_output_with_atomic_writes_keeps_the_check_without_witness():
    from warpsmith.ops.norm.contract import _bwd, _workspace, backward

    c = backward("row", [_bwd(4, 64, True, atomic=True)], k=1, atomic=True)
    c.witnesses = {"p_ptr": lambda cc: _workspace("row", cc)}
    obs = [o for r in prove(c) for o in r.obligations if o.subject == "p_ptr"]
    assert obs and all("atomic writes" in o.detail for o in obs if o.name == "coverage")


def test_race_through_the_witness_is_found_on_a_duplicate_writer():
    """Program axis 1 is ignored by the kernel: the witness (axis 1 = 0) is refuted and its own
    writer of the element is a second program storing to the same address."""
    M = sizes("M")[0]
    contract, _ = kernel_bugs.BUGS["duplicate_writer"]
    c = LaunchContract(kernel=contract.kernel, args=contract.args, constexprs=contract.constexprs, grid=contract.grid,
                       domain=contract.domain, bounded_shapes=[],
                       witnesses={"y_ptr": Witness(writer=lambda m: Writer(pid=(m / 16, 0), lanes=(m % 16,)),
                                                   element=lambda store, pid, iters, lanes: (pid[0] * 16 + lanes[0],))})
    obs = obligations(c)
    assert obs["race_free"].status == "failed", obs["race_free"].to_json()
    assert "found through the witness" in obs["race_free"].detail
    assert obs["race_free"].counterexample["first.pid1"] != obs["race_free"].counterexample["second.pid1"]
    del M


def test_the_layout_lemma():
    M, N, S = sizes("M N S")
    c = W.grouped()
    p = Prover(c, c.constexprs[0])
    assert layout_injective(p, Tensor((M, N), (N, 1)))
    assert layout_injective(p, Tensor((2, M, N), (M * N, N, 1)))
    assert layout_injective(p, Tensor((M, N), (1, M)))  # column-major
    assert not layout_injective(p, Tensor((M, N), (1, 1)))  # rows overlap
    assert not layout_injective(p, Tensor((M, N), (N - 1, 1)))
    # channels-last 5-D (n, c, d, h, w): its order (c, w, h, d, n) is past the first 24 fixed orders; found
    # by the strides' order at a sample shape (the pooling forward's race freedom goes through it)
    from warpsmith.ops.pool.contract import CONTRACTS

    pool = CONTRACTS[0]  # the max forward, channels-last output: sizes N, C, OD, OH, OW >= 1 in its domain
    pp = Prover(pool, pool.constexprs[0])
    y = pool.args["y_ptr"]
    assert layout_injective(pp, y)
    n, c, d, h, w = y.strides
    assert not layout_injective(pp, Tensor(y.shape, (n, c, d, h, w - 1)))  # w's stride no longer clears c's span


def test_rewriting_proves_division_facts_and_never_a_false_one():
    c = W.grouped()
    p = Prover(c, c.constexprs[0])
    M, N = sizes("M N")
    g, r = z3.Ints("g r")
    d = 4 * ((N + 31) / 32)
    ctx = [g >= 0, r >= 0, r < d]
    assert decide(p, ctx, (g * d + r) / d == g)[0] == "unsat"
    assert decide(p, ctx, (g * d + r) % d == r)[0] == "unsat"
    # without r < d the quotient is not g: never proved
    assert decide(p, [g >= 0, r >= 0], (g * d + r) / d == g)[0] != "unsat"
    assert decide(p, [g >= 0], (g * d + r) % d == r)[0] != "unsat"
    # a conditional is resolved only when the context decides it
    assert decide(p, [g >= 0], z3.If(g >= 0, g, -g) == g)[0] == "unsat"
    assert decide(p, [], z3.If(g >= 0, g, -g) == g)[0] != "unsat"


def test_rewritten_terms_equal_the_originals_under_the_sides():
    """At concrete points of the context, the side conditions can be met (they were proved, or define a
    fresh integer) and then each rewritten term has the original's value."""
    import random

    M, N = sizes("M N")
    t, l0 = z3.Ints("t l0")
    nn = (N + 31) / 32
    ctx = [M >= 1, N >= 1, N <= 4096, t >= 0, t < 4 * nn * 7, l0 >= 0, l0 < 16]
    rw = Rewriter(ctx)
    terms = [(16 * (t / (4 * nn)) + l0) / 16, (t % (4 * nn)) % 4, (t + 4 * nn) / (4 * nn), t % (4 * nn) + t / (4 * nn)]
    outs = [rw(e) for e in terms]
    assert any(not o.eq(e) for o, e in zip(outs, terms))  # something was rewritten
    rng = random.Random(0)
    for _ in range(20):
        n = rng.randint(1, 4096)
        point = [M == rng.randint(1, 100), N == n, t == rng.randrange(0, 4 * ((n + 31) // 32) * 7),
                 l0 == rng.randrange(16)]
        s = z3.Solver()
        s.add(*ctx, *point, *rw.sides)
        assert s.check() == z3.sat
        m = s.model()
        for e, o in zip(terms, outs):
            assert m.eval(e, model_completion=True).as_long() == m.eval(o, model_completion=True).as_long(), (e, o)


def test_decompose_splits_polynomials():
    a, b, c = z3.Ints("a b c")
    splits = decompose(4 * a * b + 3 * c + 9, 4 * a)
    assert splits and all(z3.simplify(q * 4 * a + r - (4 * a * b + 3 * c + 9)) == 0 for q, r in splits)
    assert decompose(c + 1, a) == []
