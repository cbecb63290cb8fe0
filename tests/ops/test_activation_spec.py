"""Gated activation specs: references, input forms, contracts derived from the numerics."""
import math

import pytest
import torch
import torch.nn.functional as F

from warpsmith.errors import InvalidInputError
from warpsmith.core.opspec import DISTRIBUTIONS, as_tuple
from warpsmith.ops import get_op
from warpsmith.ops.activation.spec import GEGLU, GEGLU_BACKWARD, SWIGLU, SWIGLU_BACKWARD

GEN = lambda seed=0: torch.Generator().manual_seed(seed)  # noqa: E731


def test_ops_are_registered_with_their_attributes():
    assert get_op("swiglu") is SWIGLU and get_op("geglu_backward") is GEGLU_BACKWARD
    p = GEGLU.problem("M=3,H=5", "bf16")
    assert p.attrs == {"approximate": "none", "packed": False} and p.dtype == torch.bfloat16
    assert SWIGLU.problem("M=3,H=5", "fp16", {"packed": True}).attrs == {"packed": True}
    with pytest.raises(InvalidInputError, match="attribute approximate"):
        GEGLU.problem("M=3,H=5", "fp16", {"approximate": "erf"})
    with pytest.raises(InvalidInputError):
        SWIGLU.problem("M=3,H=5", "fp16", {"approximate": "tanh"})  # swiglu has no such attribute


def test_reference_is_act_of_gate_times_up_and_the_packed_form_agrees():
    x = torch.randn(4, 10, dtype=torch.float64, generator=GEN())
    g, u = x[:, :5], x[:, 5:]
    assert torch.equal(SWIGLU.reference({"x": x}, {"packed": True}), F.silu(g) * u)
    assert torch.equal(SWIGLU.reference({"gate": g, "up": u}, {"packed": False}), F.silu(g) * u)
    tanh = GEGLU.reference({"gate": g, "up": u}, {"approximate": "tanh", "packed": False})
    assert torch.equal(tanh, F.gelu(g, approximate="tanh") * u)
    assert not torch.equal(tanh, GEGLU.reference({"gate": g, "up": u}, {"approximate": "none", "packed": False}))
    # half precision: computed in fp32, rounded once
    h = x.half()
    ref = SWIGLU.reference({"x": h}, {"packed": True})
    assert ref.dtype == torch.float16 and torch.equal(ref, (F.silu(h[:, :5].float()) * h[:, 5:].float()).half())


@pytest.mark.parametrize("spec, attrs, dact", [
    (SWIGLU_BACKWARD, {}, lambda g: torch.sigmoid(g) * (1 + g * (1 - torch.sigmoid(g)))),
    (GEGLU_BACKWARD, {"approximate": "none"},
     lambda g: 0.5 * (1 + torch.erf(g / math.sqrt(2))) + g * torch.exp(-g * g / 2) / math.sqrt(2 * math.pi)),
])
def test_backward_reference_matches_the_closed_form(spec, attrs, dact):
    p = spec.problem("M=3,H=7", "float32", {**attrs, "packed": True})
    inputs = spec.make_inputs(p, GEN(1))
    x64 = {k: v.double() for k, v in inputs.items()}
    (dx,) = as_tuple(spec.reference(x64, p.attrs))
    g, u, dy = x64["x"][:, :7], x64["x"][:, 7:], x64["dy"]
    act = F.silu(g) if spec is SWIGLU_BACKWARD else F.gelu(g)
    torch.testing.assert_close(dx, torch.cat([dy * u * dact(g), dy * act], -1), rtol=1e-12, atol=1e-12)
    sep = spec.problem("M=3,H=7", "float32", attrs)
    dg, du = spec.reference({"dy": dy, "gate": g, "up": u}, sep.attrs)
    assert torch.equal(torch.cat([dg, du], -1), dx)
    assert [s for s, _ in spec.outputs(sep)] == [(3, 7), (3, 7)] and spec.outputs(p)[0][0] == (3, 14)


@pytest.mark.parametrize("spec, attrs", [
    (SWIGLU, {}), (GEGLU, {"approximate": "none"}), (GEGLU, {"approximate": "tanh"}),
    (SWIGLU_BACKWARD, {}), (GEGLU_BACKWARD, {"approximate": "none"}), (GEGLU_BACKWARD, {"approximate": "tanh"}),
])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_reference_in_the_working_dtype_meets_its_own_contract(spec, attrs, dtype):
    """The contract is not too tight: torch's own fp32 computation (the same formulas) passes it on
    every distribution, outliers, subnormal tails and NaN/Inf inputs included. Where the oracle is
    non-finite, torch's working-dtype value is not under test (it depends on the CPU's vector ISA:
    fp32 gelu(+inf) is NaN on AVX-512); the oracle's own special value stands in for it there, and
    the kernels' special values are judged against the oracle by their own tests."""
    p = spec.problem("M=16,H=33", dtype, attrs)
    for dist in DISTRIBUTIONS:
        inputs = spec.make_inputs(p, GEN(7), dist)
        ref64, scale = (as_tuple(x) for x in spec.oracle(inputs, p.attrs))
        refs = as_tuple(spec.reference(inputs, p.attrs))
        for c, r, r64, s in zip(as_tuple(spec.contract(p)), refs, ref64, scale):
            special = ~torch.isfinite(r64.to(r.dtype))
            assert dist == "specials" or not bool(special.any())
            ok, msg = c.check(torch.where(special, r64.to(r.dtype), r), r64, s)
            assert ok, (dist, msg)


def test_the_fp32_contract_rejects_the_tanh_form_where_erf_is_required():
    p = GEGLU.problem("M=8,H=64", "float32")
    inputs = GEGLU.make_inputs(p, GEN(3))
    ref64, scale = GEGLU.oracle(inputs, p.attrs)
    wrong = GEGLU.reference(inputs, {"approximate": "tanh", "packed": False})
    ok, msg = GEGLU.contract(p).check(wrong, ref64, scale)
    assert not ok and "exceeds contract" in msg
    # and a gradient with the up factor missing
    pb = SWIGLU_BACKWARD.problem("M=8,H=64", "float32")
    xb = SWIGLU_BACKWARD.make_inputs(pb, GEN(4))
    ref64, scale = SWIGLU_BACKWARD.oracle(xb, pb.attrs)
    dg_wrong = SWIGLU_BACKWARD.reference({**xb, "up": torch.ones_like(xb["up"])}, pb.attrs)[0]
    assert not SWIGLU_BACKWARD.contract(pb)[0].check(dg_wrong, ref64[0], scale[0])[0]


def test_error_scales_hold_the_conditioning():
    g = torch.tensor([-20.0, -3.0, 0.0, 3.0], dtype=torch.float64)
    u = torch.ones_like(g)
    s_silu = SWIGLU.error_scale({"gate": g, "up": u}, {"packed": False})
    s_erf = GEGLU.error_scale({"gate": g, "up": u}, {"approximate": "none", "packed": False})
    s_tanh = GEGLU.error_scale({"gate": g, "up": u}, {"approximate": "tanh", "packed": False})
    # silu: relative to the value, amplified by |g| where the exp's argument is large (g < 0), plus
    # the fp32 underflow term (2^-126 (1 + |g|): a subnormal sigmoid's absolute error)
    assert s_silu[0] == pytest.approx(abs(F.silu(g[0]).item()) * 21, rel=1e-6) and s_silu[2] == 2**-126
    # gelu: 1 + erf cancels for negative g: an absolute |g| term (the reference's own conditioning)
    assert s_erf[0] >= 20 and s_tanh[0] >= 20 and s_erf[2] == 0
    c = GEGLU.contract(GEGLU.problem("M=1,H=1", "float32"))
    assert c.reduction_len == 3 and c.u_acc == 2**-24 and c.u_out == 2**-24


def test_inputs_for_every_distribution_and_the_models():
    for spec in (SWIGLU, SWIGLU_BACKWARD):
        for packed in (False, True):
            p = spec.problem("M=3,H=4", "float16", {"packed": packed})
            for dist in DISTRIBUTIONS:
                x = spec.make_inputs(p, GEN(), dist)
                assert all(t.dtype == torch.float16 for t in x.values())
                assert set(x) == ({"dy"} if spec.backward else set()) | ({"x"} if packed else {"gate", "up"})
            large = spec.make_inputs(p, GEN(), "large")
            assert all(torch.isfinite(t).all() for t in large.values())
    p = SWIGLU.problem("M=10,H=20", "bfloat16")
    assert SWIGLU.min_bytes(p) == 3 * 200 * 2 and SWIGLU_BACKWARD.min_bytes(p) == 5 * 200 * 2
    assert GEGLU.flops(GEGLU.problem("M=10,H=20", "bfloat16", {"approximate": "tanh"})) > SWIGLU.flops(p) > 0
