"""Normalization OpSpecs: problems, references against torch.nn.functional and autograd, inputs for
every distribution, and error contracts that accept fp32 statistics and reject half-precision ones."""
import itertools

import pytest
import torch
import torch.nn.functional as F

from warpsmith.errors import InvalidInputError, UnknownNameError
from warpsmith.core.opspec import DISTRIBUTIONS, as_tuple
from warpsmith.ops import OPS, get_op
from warpsmith.ops.norm.spec import LAYER_NORM, LAYER_NORM_BACKWARD, RMS_NORM, RMS_NORM_BACKWARD, normalize

ALL = (RMS_NORM, RMS_NORM_BACKWARD, LAYER_NORM, LAYER_NORM_BACKWARD)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_registered_with_eps_outside_the_tuning_key():
    for spec in ALL:
        assert OPS[spec.name] is spec
        p = spec.problem("M=3,N=5", "bf16", {"eps": 0.25})
        assert p.attrs["eps"] == 0.25 and "eps" not in p.key_attrs and p.attrs["weight"] is True
        assert p.attrs["residual"] is False and p.attrs["weight_dtype"] == "input"
        assert spec.parse_attrs(["residual=true", "eps=1e-3"]) == {"residual": True, "eps": 1e-3}
    assert RMS_NORM.problem("M=1,N=1", "float32").attrs["eps"] == 1e-6
    assert LAYER_NORM.problem("M=1,N=1", "float32").attrs == {"weight": True, "bias": True, "weight_dtype": "input",
                                                              "residual": False, "eps": 1e-5}
    with pytest.raises(InvalidInputError, match="attribute eps"):
        RMS_NORM.problem("M=1,N=1", "float16", {"eps": 2.0})
    with pytest.raises(UnknownNameError):
        RMS_NORM.problem("M=1,N=1", "float16", {"bias": True})  # RMSNorm has no bias
    with pytest.raises(UnknownNameError, match="dtype"):
        RMS_NORM.problem("M=1,N=1", "float64")


@pytest.mark.parametrize("spec", ALL, ids=lambda s: s.name)
def test_outputs_reference_scale_and_contract_agree_for_every_attribute_combination(spec):
    names = [k for k, c in spec.attr_choices.items() if isinstance(c, tuple)]
    for values in itertools.product(*(spec.attr_choices[k] for k in names)):
        p = spec.problem({"M": 3, "N": 7}, "float16", dict(zip(names, values)))
        inputs = spec.make_inputs(p, gen())
        refs, outs = as_tuple(spec.reference(inputs, p.attrs)), spec.outputs(p)
        ref64, scale = (as_tuple(t) for t in spec.oracle(inputs, p.attrs))
        assert len(refs) == len(outs) == len(ref64) == len(scale) == len(as_tuple(spec.contract(p)))
        for r, r64, s, (shape, dt) in zip(refs, ref64, scale, outs):
            assert tuple(r.shape) == shape == tuple(r64.shape) == tuple(s.shape) and r.dtype == dt
            assert r64.dtype == torch.float64 and (s >= 0).all()
        assert spec.flops(p) > 0 and spec.min_bytes(p) > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_forward_references_match_torch_functional(dtype):
    x = torch.randn(4, 33, dtype=dtype)
    for wdt in (dtype, torch.float32):
        w, b = torch.randn(33, dtype=wdt), torch.randn(33, dtype=wdt)
        wd = "input" if wdt == dtype else "float32"
        attrs = RMS_NORM.problem("M=4,N=33", dtype, {"weight_dtype": wd}).attrs
        y, rstd = RMS_NORM.reference({"x": x, "weight": w}, attrs)
        torch.testing.assert_close(y, F.rms_norm(x.float(), (33,), w.float(), 1e-6).to(dtype))
        attrs = LAYER_NORM.problem("M=4,N=33", dtype, {"weight_dtype": wd}).attrs
        y, mean, rstd = LAYER_NORM.reference({"x": x, "weight": w, "bias": b}, attrs)
        torch.testing.assert_close(y, F.layer_norm(x.float(), (33,), w.float(), b.float(), 1e-5).to(dtype))
        torch.testing.assert_close(mean, x.float().mean(-1))
        torch.testing.assert_close(rstd, torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5))
        assert y.dtype == dtype and mean.dtype == rstd.dtype == torch.float32


def test_fused_residual_normalizes_the_rounded_sum_and_returns_it():
    x, r = torch.randn(3, 20).bfloat16(), torch.randn(3, 20).bfloat16()
    attrs = RMS_NORM.problem("M=3,N=20", "bfloat16", {"residual": True, "weight": False}).attrs
    y, s, rstd = RMS_NORM.reference({"x": x, "residual": r}, attrs)
    assert torch.equal(s, x + r) and s.dtype == torch.bfloat16
    assert torch.equal(y, F.rms_norm((x + r).float(), (20,), eps=1e-6).bfloat16())


@pytest.mark.parametrize("spec, fwd", [(RMS_NORM_BACKWARD, "rms"), (LAYER_NORM_BACKWARD, "layer")])
def test_backward_reference_is_the_gradient_of_torch_functional(spec, fwd):
    p = spec.problem({"M": 4, "N": 9}, "float32", {"residual": True})
    inputs = spec.make_inputs(p, gen(1))
    x64 = inputs["x"].double().requires_grad_()
    w64 = inputs["weight"].double().requires_grad_()
    leaves = [x64, w64]
    if fwd == "rms":
        y = F.rms_norm(x64, (9,), w64, p.attrs["eps"])
    else:
        b64 = torch.zeros(9, dtype=torch.float64, requires_grad=True)
        leaves.append(b64)
        y = F.layer_norm(x64, (9,), w64, b64, p.attrs["eps"])
    grads = torch.autograd.grad(y, leaves, inputs["dy"].double())
    oracle, _ = spec.oracle(inputs, p.attrs)
    torch.testing.assert_close(oracle[0], grads[0] + inputs["ds"].double())  # dx, plus the sum's gradient
    for mine, ref in zip(oracle[1:], grads[1:]):
        torch.testing.assert_close(mine, ref)
    # the saved statistics are the forward's, in fp32
    fwd_spec = RMS_NORM if fwd == "rms" else LAYER_NORM
    fp = fwd_spec.problem({"M": 4, "N": 9}, "float32", {"weight": False, "eps": p.attrs["eps"],
                                                       **({"bias": False} if fwd == "layer" else {})})
    saved = fwd_spec.reference({"x": inputs["x"]}, fp.attrs)[1:]
    assert torch.equal(saved[-1], inputs["rstd"]) and (fwd == "rms" or torch.equal(saved[0], inputs["mean"]))


@pytest.mark.parametrize("spec", ALL, ids=lambda s: s.name)
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_inputs_of_every_distribution(spec, dist):
    p = spec.problem({"M": 5, "N": 300}, "float16", {"residual": True, "weight_dtype": "float32"})
    inputs = spec.make_inputs(p, gen(2), dist)
    assert inputs["x"].shape == (5, 300) and inputs["x"].dtype == torch.float16
    assert inputs["weight"].dtype == torch.float32 and inputs["weight"].shape == (300,)
    refs = as_tuple(spec.reference(inputs, p.attrs))
    if dist == "specials":
        assert not torch.isfinite(inputs["x"]).all()
    else:  # every distribution but specials keeps inputs and outputs finite (large: near the limits)
        assert all(torch.isfinite(t).all() for t in inputs.values())
        assert all(torch.isfinite(r).all() for r in refs), [r.abs().max() for r in refs]
    if dist == "large":
        assert inputs["x"].abs().max() > 1000


def test_contract_accepts_fp32_statistics_and_rejects_half_precision_ones():
    """The planted numerical bug at the spec level: rstd computed in the input's half precision."""
    for spec in (RMS_NORM, LAYER_NORM):
        p = spec.problem({"M": 8, "N": 300}, "float16")
        inputs = spec.make_inputs(p, gen(3))
        ref64, scale = spec.oracle(inputs, p.attrs)
        contract = spec.contract(p)
        good = spec.reference(inputs, p.attrs)
        assert contract[0].check(good[0], ref64[0], scale[0], good[0])[0]
        x16, w16 = inputs["x"], inputs["weight"]
        b = inputs["bias"].half() if "bias" in inputs else None
        xs = x16.float() - x16.float().mean(-1, keepdim=True) if spec is LAYER_NORM else x16.float()
        half_rstd = torch.rsqrt(xs.half().square().mean(-1, keepdim=True, dtype=torch.float16) + 1e-5)
        bad = (xs * half_rstd.float() * w16.float() + (0 if b is None else b.float())).half()
        ok, msg = contract[0].check(bad, ref64[0], scale[0], good[0])
        assert not ok and "exceeds" in msg


def test_contract_reduction_lengths_follow_the_analysis():
    p = RMS_NORM.problem({"M": 6, "N": 100}, "bfloat16", {"residual": True})
    y, s, rstd = RMS_NORM.contract(p)
    assert (y.reduction_len, y.u_operand, y.out_dtype) == (108, 2.0**-8, "bfloat16")
    assert (s.reduction_len, rstd.out_dtype) == (1, "float32")
    pb = LAYER_NORM_BACKWARD.problem({"M": 6, "N": 100}, "float16", {"weight_dtype": "float32"})
    dx, dw, db = LAYER_NORM_BACKWARD.contract(pb)
    assert (dx.reduction_len, dw.reduction_len, db.reduction_len) == (424, 214, 6)
    assert dw.out_dtype == db.out_dtype == "float32" and dx.out_dtype == "float16"
    assert RMS_NORM_BACKWARD.contract(RMS_NORM_BACKWARD.problem({"M": 6, "N": 100}, "float16"))[0].reduction_len == 324


def test_normalize_helper_is_differentiable_and_matches_layer_norm():
    x = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    y, mean, rstd = normalize(x, "layer", 1e-5, None, None)
    torch.testing.assert_close(y, F.layer_norm(x, (5,), eps=1e-5))
    y.sum().backward()
    assert x.grad is not None and get_op("layer_norm") is LAYER_NORM
