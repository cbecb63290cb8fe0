"""Where the solver alone settles nothing, the bounded shapes still run (issue 26, part 8).

An operator z3 does not model exactly (``offs & (N - 1)`` with a runtime ``N``, ``>>`` by a runtime
amount) is an uninterpreted function with sound facts: a proof through it stands, a solver model through
it is no counterexample, and the obligation is settled on the bounded shapes, where numpy evaluates the
operator exactly. A kernel the tracer cannot follow (control flow on a program id) is run concretely on
the same shapes. A contract that names no bounded shape gets drawn ones. Kernels: zoo/prover_bitmask.py.
"""
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import z3

from warpsmith.verify.symbolic import prove
from warpsmith.verify.symbolic.evaluate import evaluate
from warpsmith.verify.symbolic.lang import OPAQUE, opaque, opaque_facts

sys.path.insert(0, str(Path(__file__).parent / "zoo"))
import prover_bitmask as pb  # noqa: E402


def _obligations(contract):
    return [o for r in prove(contract) for o in r.obligations]


def _pow2(n):
    return n & (n - 1) == 0


def _last_row_load(obs):
    return next(o for o in obs if o.name == "in_bounds" and "load #1 of x_ptr" in o.subject)


@pytest.mark.parametrize("shapes", [pb.MIXED, ()], ids=["declared shapes", "drawn shapes"])
def test_a_runtime_bit_mask_that_is_wrong_for_n_3_is_failed_with_the_shape(shapes):
    obs = _obligations(pb.row_last(shapes))
    bad = _last_row_load(obs)
    assert bad.status == "failed", (bad.status, bad.detail)
    cex = bad.counterexample
    assert not _pow2(cex["N"]) and cex["offset"] > cex["span"] == cex["M"] * cex["N"] - 1, cex
    assert cex["source"].endswith("prover_bitmask.py:28") and "integer `&`" in bad.detail
    # the witness is real: offs - (offs & (N - 1)) + N - 1 at the program and lane it names
    offs = cex["pid0"] * 16 + cex["lane0"]
    assert offs < cex["M"] * cex["N"] and offs - (offs & (cex["N"] - 1)) + cex["N"] - 1 == cex["offset"]
    assert not any(o.status == "failed" for o in obs if o is not bad), [(o.name, o.status) for o in obs]


def test_the_same_kernel_on_powers_of_two_is_bounded_never_failed_nor_proved():
    obs = _obligations(pb.row_last(pb.POW2))
    assert not any(o.status == "failed" for o in obs), [(o.name, o.status, o.detail) for o in obs]
    b = _last_row_load(obs)
    assert b.status == "bounded(5 shapes)" and "integer `&`" in b.detail


def test_a_runtime_mask_that_stays_in_its_table_is_proved_from_the_operators_facts():
    obs = _obligations(pb.ring())
    ib = [o for o in obs if o.name == "in_bounds"]
    assert ib and all(o.status == "proved" for o in ib), [(o.name, o.status, o.detail) for o in obs]
    assert not any(o.status in ("failed", "unknown") for o in obs), [(o.name, o.status, o.detail) for o in obs]


def test_a_shift_by_a_runtime_amount_is_proved_or_found():
    ok = _obligations(pb.shift(0))
    assert all(o.status == "proved" for o in ok if o.name == "in_bounds"), [(o.name, o.status) for o in ok]
    bad = [o for o in _obligations(pb.shift(1)) if o.name == "in_bounds" and o.status == "failed"]
    assert bad and "integer `>>`" in bad[0].detail and bad[0].counterexample["offset"] > bad[0].counterexample["span"]


def test_control_flow_on_a_program_id_is_run_concretely_on_the_shapes():
    ok = _obligations(pb.last_program(0))
    assert ok and all(o.status.startswith("bounded(") for o in ok), [(o.name, o.status, o.detail) for o in ok]
    assert all("control flow on a runtime value" in o.detail for o in ok)
    bad = _obligations(pb.last_program(1))
    found = [o for o in bad if o.name == "in_bounds" and o.status == "failed"]
    assert len(found) == 1 and found[0].counterexample["offset"] == found[0].counterexample["N"], found
    assert found[0].counterexample["source"].endswith("prover_bitmask.py:54")


def test_opaque_operators_are_evaluated_exactly_and_their_facts_are_true():
    rng = random.Random(7)
    pyop = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
            "lshift": lambda a, b: a << b, "rshift": lambda a, b: a >> b}
    x, y = z3.Ints("x y")
    for kind in OPAQUE:
        app = opaque(kind, x, y)
        facts = opaque_facts(app)
        for _ in range(300):
            a = rng.randint(-2**20, 2**20)
            b = rng.randint(0, 40) if "shift" in kind else rng.randint(-2**20, 2**20)
            want = pyop[kind](a, b)
            assert int(evaluate(app, {"x": a, "y": b}, ())) == want, (kind, a, b)
            sub = [(x, z3.IntVal(a)), (y, z3.IntVal(b)), (app, z3.IntVal(want))]
            for f in facts:
                assert z3.is_true(z3.simplify(z3.substitute(z3.substitute(f, *sub[2:]), *sub[:2]))), (kind, a, b, f)
    lanes = evaluate(opaque("and", z3.Int("lane0"), z3.IntVal(2)), {}, (8,))
    assert np.array_equal(lanes, np.arange(8) & 2)


def test_drawn_shapes_respect_the_domain_and_exist_when_none_is_declared():
    from warpsmith.verify.symbolic.prove import Prover

    p = Prover(pb.row_last(), {"B": 16})
    shapes = p.shapes()
    assert 2 <= len(shapes) <= 16 and all(p._admits(s) for s in shapes)
    assert {"M": 1, "N": 3} in shapes  # every size in {1, 2, 3} comes first
