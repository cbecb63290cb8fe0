"""Soundness of the tracer: no construct may make an obligation vacuously true.

Each construct of ``zoo/prover_constructs.py`` carries a planted out-of-bounds access; the prover
must report it ``failed`` (where the construct is modelled) or ``unknown`` (where it is refused),
never ``proved``.
"""
import sys
from pathlib import Path

import pytest

from warpsmith.verify.symbolic import prove

sys.path.insert(0, str(Path(__file__).parent / "zoo"))
import prover_constructs as pc  # noqa: E402

# construct -> what the planted bug must give: "failed" (modelled) or the reason it is refused
EXPECTED = {
    "reverse_scan": "failed",
    "symbolic_bounds": "failed",
    "symbolic_step": "failed",
    "nested_reverse": "failed",
    "constexpr_branch": "failed",
    "early_return": "control flow on a runtime value",
    "runtime_branch": "control flow on a runtime value",
    "while": "while loops are not modelled",
    "break": "`break` inside a for loop",
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
        assert all(o.status in ("unknown", "failed") and want in o.detail for o in access), \
            [(o.name, o.status, o.detail) for o in obs]


@pytest.mark.parametrize("construct", ["reverse_scan", "symbolic_bounds", "symbolic_step", "nested_reverse",
                                       "constexpr_branch"])
def test_the_correct_kernel_of_each_modelled_construct_is_proved_in_bounds(construct):
    obs = _obligations(pc.contracts(0)[construct])
    ib = [o for o in obs if o.name == "in_bounds"]
    assert ib and all(o.status == "proved" for o in ib), [(o.name, o.status, o.detail) for o in obs]


def test_a_reversed_scan_is_proved_whole():
    """range(hi, -1, -BLOCK) runs every block: every obligation proved, coverage included."""
    obs = _obligations(pc.contracts(0)["reverse_scan"])
    assert {o.name for o in obs} >= {"in_bounds", "race_free", "coverage"}
    assert all(o.status == "proved" for o in obs), [(o.name, o.status, o.detail) for o in obs]


def test_a_symbolic_step_of_either_sign_must_be_shown_nonzero():
    obs = _obligations(pc.contracts(0)["symbolic_step"])
    step = [o for o in obs if o.name == "loop_step"]
    assert step and step[0].status == "failed" and step[0].counterexample["S"] == 8  # STEP = S - 8
