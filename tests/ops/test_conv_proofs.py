"""The conv kernels' launch contracts (ops/conv/contract.py) proved for every shape in the domain, and
planted index bugs found by the prover with a counterexample. Solver budgets are z3 resource counts
(verify/symbolic/budget.py): the answers do not depend on the machine's load."""
import inspect
import os

import fresh_interpreter
import pytest
import torch

from warpsmith.core._triton import tl, triton
from warpsmith.core.errors import InvalidInputError
from warpsmith.ops.conv import contract as C
from warpsmith.ops.conv import kernel as K
from warpsmith.ops.conv import limits as L
from warpsmith.ops.conv import variant as V
from warpsmith.verify.symbolic.prove import Prover


def _line_of(fn, text):
    """The line of ``fn``'s source file holding ``text`` (inside ``fn``)."""
    lines, start = inspect.getsourcelines(getattr(fn, "fn", fn))  # a @triton.jit function wraps its Python one
    return start + next(i for i, line in enumerate(lines) if text in line)


def _memory_obligations(contract, consts):
    """in_bounds of every access and int32_no_overflow, without the (slower) witness obligations."""
    p = Prover(contract, consts)
    tr = p.trace()
    return tr, [p.in_bounds(tr, a, i) for i, a in enumerate(tr.accesses)] + [p.int32_no_overflow(tr)]


@pytest.mark.parametrize("loop, transposed, epilogue, layout", [
    ("nested", False, True, "ncdhw"), ("flat", True, False, "ndhwc"),
    # the two above take each loop, direction, epilogue and layout once (10 and 6 CPU-s more for these)
    pytest.param("nested", True, True, "ndhwc", marks=pytest.mark.slow),
    pytest.param("flat", False, True, "ncdhw", marks=pytest.mark.slow),
])
def test_forward_accesses_and_int32_are_proved_for_every_shape(loop, transposed, epilogue, layout):
    consts = C._meta(loop, transposed, epilogue=epilogue)
    tr, obs = _memory_obligations(C.forward([consts], layout), consts)
    bases = [a.base for a in tr.accesses]
    gathers = ["x_ptr", "w_ptr"] * (2 if transposed else 1)  # a transposed conv's exact redo reads them again
    assert bases == gathers + (["bias_ptr", "res_ptr", "y_ptr"] if epilogue else ["y_ptr"])
    assert [(o.name, o.subject, o.status) for o in obs if o.status != "proved"] == []


# z3's answer to a problem near the edge of its (deterministic) budget also depends on the terms the
# process built before (their ids order the simplifier's arguments): the same obligation proved by
# `warpsmith prove` in a process of its own ended `bounded` inside the full test suite. The proofs
# claimed below are therefore run as the CLI runs them, in a fresh interpreter.
_PRELUDE = """
import json
from warpsmith.ops.conv import contract as C
from warpsmith.verify.symbolic import prove
from warpsmith.verify.symbolic.prove import Prover
"""


def _fresh(code: str):
    """What ``code`` (after the prelude) prints as its last line, parsed as JSON, run as in a new interpreter."""
    return fresh_interpreter.last_json(_PRELUDE + code)


@pytest.mark.parametrize("make, consts", [
    ("C.split", 'C._meta("nested", False, split=True)'),
    # the flat loop's split: the nested split above and the flat forward are quick (16 CPU-s)
    pytest.param("C.split", 'C._meta("flat", True, split=True)', marks=pytest.mark.slow),
    ("C.reduce", "C._epilogue_meta(True)"),
    # every obligation of this contract is proved in test_witnesses_prove_race_freedom_and_coverage
    pytest.param("C.wgrad", "C._wgrad_meta()", marks=pytest.mark.slow),
])
def test_split_k_reduce_and_weight_gradient_accesses_and_int32_are_proved(make, consts):
    accesses, unproved = _fresh(f"""
consts = {consts}
p = Prover({make}([consts]), consts)
tr = p.trace()
obs = [p.in_bounds(tr, a, i) for i, a in enumerate(tr.accesses)] + [p.int32_no_overflow(tr)]
print(json.dumps([len(tr.accesses), [(o.name, o.subject, o.status, o.detail) for o in obs if o.status != "proved"]]))
""")
    assert accesses >= 3
    assert unproved == []


def test_witnesses_prove_race_freedom_and_coverage():
    """Every obligation of the reduction and of the weight gradient (race_free and coverage by their writer
    witnesses, in_bounds, int32), and the forward's output witness in the channels-last layout."""
    reports = _fresh("""
out = []
for contract in (C.reduce([C._epilogue_meta(False)], "ndhwc"), C.wgrad([C._wgrad_meta()])):
    (rep,) = prove(contract)
    out.append([rep.proved, sorted({o.name for o in rep.obligations}),
                [(o.name, o.subject, o.status, o.detail) for o in rep.obligations if o.status != "proved"]])
consts = C._meta("nested", True, epilogue=False)
p = Prover(C.forward([consts], "ndhwc"), consts)
tr = p.trace()
stores = [(i, a) for i, a in enumerate(tr.accesses) if a.base == "y_ptr"]
obs = (p.race_free(tr, stores, "y_ptr"), p.coverage(tr, [a for _, a in stores], "y_ptr"))
print(json.dumps([out, [(o.name, o.status, o.detail) for o in obs]]))
""")
    contracts, output = reports
    for proved, names, unproved in contracts:
        assert proved, unproved
        assert set(names) >= {"in_bounds", "race_free", "coverage", "int32_no_overflow"}
    for name, status, detail in output:
        assert status == "proved" and "witness" in detail, (name, status, detail)


# ---- planted index bugs: each is an out-of-bounds read the prover must show -------------------------
@triton.jit
def padding_mask_off_by_one(o, t, size, stride, pad, dil, TRANSPOSED: tl.constexpr):
    i = o * stride - pad + t * dil
    return i, (i >= -1) & (i < size)  # the row before the input passes the padding mask


@triton.jit
def dilation_ignored_in_address(o, t, size, stride, pad, dil, TRANSPOSED: tl.constexpr):
    i = o * stride - pad + t * dil
    return o * stride - pad + t, (i >= 0) & (i < size)  # the mask checks the dilated tap, the address steps by 1


@triton.jit
def group_offset_wrong(g, CG):
    return g * (CG + 1)  # group g starts g channels late: the last group reads past the input's channels


@pytest.mark.parametrize("helper, bug, check", [
    # a second planted bug of the same helper, input_coord (dilation_ignored_in_address stays quick)
    pytest.param("input_coord", padding_mask_off_by_one, lambda cex: any(cex[f"pad_{a}_plus_1"] >= 2 for a in "dhw"),
                 marks=pytest.mark.slow),
    ("input_coord", dilation_ignored_in_address,
     lambda cex: any(cex[f"pad_{a}_plus_1"] >= 2 and cex[f"dil_{a}"] >= 2 for a in "dhw")),
    ("group_channel", group_offset_wrong, lambda cex: cex["G"] >= 2),
])
def test_planted_index_bugs_fail_with_a_counterexample(helper, bug, check):
    here = os.path.dirname(os.path.abspath(__file__))
    ob = _fresh(f"""
import sys
sys.path.insert(0, {here!r})
import test_conv_proofs as T
from warpsmith.ops.conv import kernel as K
consts = C._meta("nested", False, epilogue=False)
contract = C.forward([consts], "ncdhw")
_, obs = T._memory_obligations(contract, consts)  # the kernel as it is: proved
assert obs[0].subject.startswith("load #0 of x_ptr") and obs[0].status == "proved", obs[0]
K.{helper} = T.{bug.__name__}
p = Prover(contract, consts)
tr = p.trace()
ob = p.in_bounds(tr, tr.accesses[0], 0)
print(json.dumps([ob.status, ob.detail, ob.counterexample], default=str))
""")
    status, detail, cex = ob
    assert status == "failed", (status, detail)
    assert cex["offset"] < 0 or cex["offset"] > cex["span"], cex  # the address really lies outside x
    assert check(cex), cex
    assert cex["source"].endswith(f"kernel.py:{_line_of(K.gather_operands, 'a = tl.load(x_row')}")  # the gather


def test_split_k_iteration_precondition_is_needed():
    """Without the launcher's ``ITERS_PER_SPLIT <= total`` (it is cdiv(total, SPLIT_K)), the split's end
    ``i_lo + ITERS_PER_SPLIT`` wraps in int32: the prover shows it; with it, int32 is proved (above)."""
    needed, status, detail, cex = _fresh("""
import dataclasses
consts = C._meta("nested", False, split=True)
contract = C.split([consts])
needed = [f for f in contract.domain if "ITERS_PER_SPLIT <=" in str(f)]
weaker = dataclasses.replace(contract, domain=[f for f in contract.domain if not f.eq(needed[0])])
p = Prover(weaker, consts)
ob = p.int32_no_overflow(p.trace())
print(json.dumps([len(needed), ob.status, ob.detail, ob.counterexample], default=str))
""")
    assert needed == 1
    assert status == "failed" and cex["value"] >= 2**31, (status, detail)
    assert cex["source"].endswith(f"kernel.py:{_line_of(K.conv_fwd_kernel, 'i_hi = tl.minimum')}")


# ---- the launchers keep to the contracts' domain --------------------------------------------------
def test_the_domain_is_the_launchers_own_limits():
    """The contract's domain is built from limits.fwd_limits, which the launcher checks on its integers."""
    strs = {str(f) for f in C.CONTRACTS[0].domain}
    for what, value, bound in L.fwd_limits(C.BATCH, C.G, C.CG, C.KG, C.I3, C.O3, C.K3, C.STRIDE, C.PAD, C.DIL,
                                           C.SX, C.SW, C.SY, C.SR, C.SBIAS):
        assert str(value < bound) in strs, what
    big = L.fwd_limits(2**16, 1, 1, 1, (1, 1, 1), (1, 2**8, 2**8), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1),
                       (1,) * 5, (1,) * 6, (1,) * 5, (1,) * 5, 1)
    with pytest.raises(InvalidInputError, match="output pixels"):
        V._check(big)


def test_launcher_refuses_a_geometry_outside_the_domain():
    x, w = torch.randn(1, 1, 1, 1, 4), torch.randn(1, 1, 1, 1, 1)
    y = torch.empty(1, 1, 1, 1, 4 + 2 * 5000)
    with pytest.raises(InvalidInputError, match="pad_w"):
        V.launch_conv(x, w, y, None, None, groups=1, transposed=False, stride=(1, 1, 1), pad=(0, 0, 5000),
                      dil=(1, 1, 1), activation="none", scale=1.0,
                      config=dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, LOOP="nested", SPLIT_K=1, num_warps=4,
                                  num_stages=1, PRECISION="ieee"))


def test_broadcast_inputs_and_an_overlapping_output_are_launched_inside_the_contract():
    """A stride-0 (expanded) input is copied out and an output whose strides do not nest is written through a
    temporary: the kernel only ever sees what its contract covers, and the result is still the conv."""
    assert V.readable(torch.zeros(3, 1).expand(3, 4))[1] == (4, 1)  # copied out: contiguous
    t = torch.zeros(4).as_strided((1, 4), (0, 1))  # size-1 dimension of stride 0: read in place, stride 1
    assert V.readable(t)[0] is t and V.readable(t)[1] == (1, 1)
    y5 = torch.empty(2, 3, 1, 4, 5).permute(0, 3, 2, 1, 4)  # (N, C, D, H, W) with H outside C: neither order
    assert V.nesting_strides(y5) is None
    assert V.nesting_strides(torch.empty(2, 3, 1, 1, 5)) is not None
    assert V.nesting_strides(torch.empty(2, 1, 1, 5, 3).permute(0, 4, 1, 2, 3)) is not None  # channels-last
    torch.manual_seed(0)
    x = torch.randn(1, 2, 1, 5).expand(2, 2, 3, 5)  # broadcast along batch and height
    w = torch.randn(3, 2, 2, 2)
    out = torch.empty(2, 4, 3, 2).permute(0, 2, 3, 1)  # (N, C, OH, OW) with OH innermost: neither order
    assert V.nesting_strides(V.as_3d(out)) is None
    cfg = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, LOOP="nested", SPLIT_K=1, num_warps=4, num_stages=1,
               PRECISION="ieee")
    got = V.launch_conv(x, w, out, None, None, groups=1, transposed=False, stride=(1, 1, 1), pad=(0, 0, 0),
                        dil=(1, 1, 1), activation="none", scale=1.0, config=cfg)
    assert got is out
    torch.testing.assert_close(out, torch.nn.functional.conv2d(x, w), rtol=1e-4, atol=1e-4)
