"""Soundness of the tracer: no construct may make an obligation vacuously true.

Each construct of ``zoo/prover_constructs.py`` carries a planted out-of-bounds access; the prover
must report it ``failed`` (where the construct is modelled) or, where the symbolic tracer refuses it,
settle it on the bounded shapes by a concrete run (``failed`` with the shape, or ``bounded``) or leave
it ``unknown``, the construct named: never ``proved``.
"""
import sys
from pathlib import Path

import pytest

from warpsmith.verify.symbolic import prove

sys.path.insert(0, str(Path(__file__).parent / "zoo"))
import prover_constructs as pc  # noqa: E402

# construct -> what the planted bug must give: "failed" (modelled, or found by the concrete run on the
# bounded shapes), or the reason the symbolic tracer refuses it (named in a bounded or unknown detail)
EXPECTED = {
    "reverse_scan": "failed",
    "symbolic_bounds": "failed",
    "symbolic_step": "failed",
    "nested_reverse": "failed",
    "constexpr_branch": "failed",
    "early_return": "failed",
    "runtime_branch": "control flow on a runtime value",  # its bug needs N > 64: no bounded shape reaches it
    "while": "failed",  # the symbolic tracer refuses `while`; the concrete run finds the bug at N = 1
    "break": "failed",
    "false_mask": "vacuous",
    "empty_grid": "vacuous",
    "empty_domain": "admit no sizes",
}


def _obligations(contract):
    return [o for r in prove(contract) for o in r.obligations]


@pytest.mark.parametrize("construct", sorted(EXPECTED))
def test_a_bug_planted_inside_each_construct_is_found_never_proved(construct):
    obs = _obligations(pc.contracts(1)[construct])
    access = [o for o in obs if o.name in ("in_bounds", "trace", "domain")]
    assert access and not any(o.status == "proved" for o in access), [(o.name, o.status) for o in obs]
    want = EXPECTED[construct]
    if want == "failed":
        bad = [o for o in access if o.status == "failed"]
        assert bad and all(o.counterexample for o in bad), [(o.name, o.status, o.detail) for o in obs]
    else:
        assert all((o.status in ("unknown", "failed") or o.status.startswith("bounded(")) and want in o.detail
                   for o in access), [(o.name, o.status, o.detail) for o in obs]


@pytest.mark.parametrize("construct", ["reverse_scan", "symbolic_bounds", "symbolic_step", "nested_reverse",
                                       "constexpr_branch", "early_return"])
def test_the_correct_kernel_of_each_modelled_construct_is_proved_in_bounds(construct):
    obs = _obligations(pc.contracts(0)[construct])
    ib = [o for o in obs if o.name == "in_bounds"]
    assert ib and all(o.status == "proved" for o in ib), [(o.name, o.status, o.detail) for o in obs]


def test_a_reversed_scan_is_proved_whole():
    """range(hi, -1, -BLOCK) runs every block: every obligation proved, coverage included."""
    obs = _obligations(pc.contracts(0)["reverse_scan"])
    assert {o.name for o in obs} >= {"in_bounds", "race_free", "coverage"}
    assert all(o.status == "proved" for o in obs), [(o.name, o.status, o.detail) for o in obs]


def test_an_early_exit_conditions_what_follows_and_is_found_when_it_is_too_weak():
    obs = _obligations(pc.contracts(0)["early_return"])
    assert all(o.status == "proved" for o in obs if o.name in ("in_bounds", "race_free")), obs
    bad = _obligations(pc.contracts(1)["early_return"])
    cex = next(o for o in bad if o.name == "in_bounds" and o.status == "failed").counterexample
    assert cex["pid0"] * 16 < cex["N"] and cex["offset"] == cex["N"]  # a program past the exit reads x[N]


def test_a_symbolic_step_of_either_sign_must_be_shown_nonzero():
    obs = _obligations(pc.contracts(0)["symbolic_step"])
    step = [o for o in obs if o.name == "loop_step"]
    assert step and step[0].status == "failed" and step[0].counterexample["S"] == 8  # STEP = S - 8


import prover_modelled as pm  # noqa: E402


@pytest.mark.parametrize("construct", sorted(pm.contracts(0)))
def test_each_modelled_construct_proves_a_correct_kernel_and_finds_a_planted_out_of_bounds(construct):
    ok = _obligations(pm.contracts(0)[construct])
    ib = [o for o in ok if o.name == "in_bounds"]
    assert ib and all(o.status == "proved" for o in ib), [(o.name, o.status, o.detail) for o in ok]
    assert not any(o.status == "failed" for o in ok), [(o.name, o.status, o.detail) for o in ok]
    bad = _obligations(pm.contracts(1)[construct])
    found = [o for o in bad if o.name == "in_bounds" and o.status == "failed"]
    assert found and all(o.counterexample for o in found), [(o.name, o.status, o.detail) for o in bad]


@pytest.mark.parametrize("construct", sorted(set(pm.refused(0)) - {"integer `^`"}))
def test_constructs_not_modelled_are_unknown_with_the_construct_named(construct):
    for bug in (0, 1):
        obs = _obligations(pm.refused(bug)[construct])
        assert len(obs) == 1 and obs[0].status == "unknown" and construct in obs[0].detail, obs
        assert "nor run on the bounded shape" in obs[0].detail  # the concrete run was tried


def test_an_integer_xor_is_proved_from_its_facts_or_bounded_with_the_operator_named():
    """``^`` is an opaque operator (lang.opaque): the masked accesses are proved in bounds from its sound
    facts; what needs its exact value (race freedom) is settled on the bounded shapes, ``^`` named."""
    for bug in (0, 1):
        obs = _obligations(pm.refused(bug)["integer `^`"])
        assert all(o.status == "proved" for o in obs if o.name == "in_bounds"), [(o.name, o.status) for o in obs]
        race = next(o for o in obs if o.name == "race_free")
        assert race.status == "bounded(2 shapes)" and "integer `^`" in race.detail, race


def test_unlisted_tl_functions_are_unknown_and_named():
    from warpsmith.core._triton import tl, triton
    from warpsmith.verify.symbolic import LaunchContract, Tensor

    @triton.jit
    def histogram_kernel(x_ptr, y_ptr, B: tl.constexpr):
        i = tl.histogram(tl.arange(0, B), B)
        tl.store(y_ptr + i, tl.load(x_ptr + i))

    c = LaunchContract(kernel=histogram_kernel, args={"x_ptr": Tensor((16,), (1,)),
                                                      "y_ptr": Tensor((16,), (1,), output=True)},
                       constexprs=[{"B": 16}], grid=(1,))
    obs = _obligations(c)
    assert len(obs) == 1 and obs[0].status == "unknown" and "tl.histogram is not modelled" in obs[0].detail
