"""Pooling variants under the interpreter: the verifier accepts each op's variant and rejects
planted bugs for a named reason; launch contracts prove in-bounds access and int32 safety."""
import pytest
import torch

from warpsmith.core.opspec import Problem
from warpsmith.ops import get_op, get_variant
from warpsmith.ops.pool.variant import Gather
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
WIN2 = {"kernel_h": 3, "kernel_w": 2, "stride_h": 2, "stride_w": 1, "padding_h": 1, "ceil_mode": True}


def _cfg(p):
    return {"BLOCK": 32, "num_warps": 1}


@pytest.mark.parametrize("op, dtype, attrs", [
    ("max_pool", "float16", {**WIN2, "return_indices": True, "channels_last": True, "dilation_w": 2}),
    ("avg_pool_backward", "bfloat16", {**WIN2, "divisor_override": 5, "channels_last": True}),
    ("adaptive_avg_pool", "float32", {"out_h": 3, "out_w": 2}),
])
def test_verify_candidate_passes(op, dtype, attrs):
    """(The other ops are verified the same way by ``warpsmith tune``; kept to three here for time.)"""
    p = get_op(op).problem({"N": 1, "C": 2, "D": 1, "H": 5, "W": 4}, dtype, attrs)
    cert = verify_candidate(get_op(op), p, get_variant(op, "gather"), _cfg(p), H100, prove=False)
    assert cert.passed, cert.to_json()["checks"]


class _Wrong(Gather):
    """Launches the kernel for a problem with one attribute changed (the bug)."""
    change: dict = {}

    def launch(self, inputs, problem, config, out=None, target=None):
        wrong = Problem(problem.op, problem.shape, problem.dtype, {**problem.attrs, **self.change}, problem.scalars)
        if out is None:
            out = tuple(torch.empty(s, dtype=d) for s, d in get_op(problem.op).outputs(problem))
            out = out if len(out) > 1 or not self.backward else out[0]
        return super().launch(inputs, wrong, config, out=out)


class IgnoresCountIncludePad(_Wrong):
    change = {"count_include_pad": False}


class FloorForCeil(Gather):
    """ceil_mode's extra last window ignored: the grid covers the floor-mode outputs only."""

    def positions(self, p):
        from warpsmith.ops.pool.spec import output_spatial

        floor = Problem(p.op, p.shape, p.dtype, {**p.attrs, "ceil_mode": False}, p.scalars)
        return 1 if self.backward else int(torch.tensor(output_spatial(floor)).prod())


class IgnoresDivisorOverride(_Wrong):
    """Avg backward dividing by the window size where divisor_override is set."""
    change = {"divisor_override": 0}


@pytest.mark.parametrize("bug, op, attrs, expect", [
    (IgnoresCountIncludePad, "avg_pool", {**WIN2, "count_include_pad": True}, "exceeds contract"),
    (FloorForCeil, "avg_pool", WIN2, "left unwritten"),
    (IgnoresDivisorOverride, "avg_pool_backward", {**WIN2, "divisor_override": 5}, "exceeds contract"),
])
def test_planted_bugs_are_rejected(bug, op, attrs, expect):
    p = get_op(op).problem({"N": 1, "C": 1, "D": 1, "H": 6, "W": 20}, "float32", attrs)  # > 1 block of outputs
    cert = verify_candidate(get_op(op), p, bug(op), _cfg(p), H100, prove=False)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and expect in failure.status, \
        (failure.name, failure.status)


def test_unbatched_validity_and_defaults():
    v = get_variant("max_pool", "gather")
    p = get_op("max_pool").problem({"N": 1, "C": 1, "D": 1, "H": 2, "W": 2}, "float16", {"kernel_h": 3, "kernel_w": 3})
    assert "empty" in v.rejection(p, v.default_config(p, H100), H100)
    p = get_op("max_pool").problem({"N": 1, "C": 1, "D": 3, "H": 5, "W": 5}, "float16")
    assert "dims=2" in v.rejection(p, v.default_config(p, H100), H100)
    p = get_op("max_pool").problem({"N": 256, "C": 64, "D": 1, "H": 112, "W": 112}, "bfloat16",
                                   {"kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2, "padding_h": 1,
                                    "padding_w": 1, "channels_last": True})
    cfg = v.default_config(p, H100)
    assert v.rejection(p, cfg, H100) is None and v.space(p, H100).project(cfg) == cfg
    assert v.work(p, cfg, H100).bytes_moved > 0


@pytest.mark.parametrize("which", [1, 3])
def test_launch_contracts_prove_every_obligation(which):
    """The avg forward (padding, ceil_mode windows, count_include_pad divisors) and the max backward (the
    gather form, channels-last): every obligation proved for every shape of the domain: in_bounds,
    int32, race freedom, and coverage by the plane witness (budgets in z3 resource counts: the answer does
    not depend on the load). (Two kernels are run here for time; `warpsmith prove` runs all six.)"""
    from warpsmith.ops.pool.contract import CONTRACTS
    from warpsmith.verify.symbolic import prove

    (r,) = prove(CONTRACTS[which])
    assert {o.name for o in r.obligations} >= {"in_bounds", "race_free", "coverage", "int32_no_overflow"}
    assert r.proved, [(o.name, o.subject, o.status, o.detail) for o in r.obligations if o.status != "proved"]
