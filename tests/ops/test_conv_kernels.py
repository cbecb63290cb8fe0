"""Convolution variants under the interpreter against the spec's fp64 oracle under its error contract
(1-D/2-D/3-D, direct and transposed, every dtype, both memory formats, split-K, both reduction
orders, epilogues), the exact identity on small integers, the verifier, planted bugs it must reject
for their named reasons, and the cost model."""
import pytest
import torch

from warpsmith.core._triton import tl, triton
from warpsmith.ops import get_variant
from warpsmith.ops.conv import kernel as K
from warpsmith.ops.conv.spec import CONV
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
SMALL = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=2, num_stages=1, SPLIT_K=1, PRECISION="ieee")


def run(problem, cfg=None, variant="implicit_gemm", seed=0, dist="normal"):
    v = get_variant("conv", variant)
    cfg = {**v.default_config(problem, H100), **SMALL, **(cfg or {})}
    inputs = CONV.make_inputs(problem, torch.Generator().manual_seed(seed), dist)
    out = v.launch(inputs, problem, cfg)
    ref64, scale = CONV.oracle(inputs, problem.attrs)
    assert out.shape == ref64.shape and out.dtype == problem.dtype
    ok, msg = CONV.contract(problem).check(out, ref64, scale, CONV.reference(inputs, problem.attrs))
    assert ok, f"{problem.describe()} {cfg}: {msg}"
    return inputs, out


S2 = {"N": 2, "C": 6, "K": 4, "H": 7, "W": 5, "KH": 3, "KW": 2}
GEOM2 = {"stride_h": 2, "pad_h": 1, "pad_end_h": 1, "pad_w": 1, "pad_end_w": 2, "dil_w": 2}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("loop", ["nested", "flat"])
def test_conv2d_every_dtype_format_and_order(dtype, channels_last, loop):
    p = CONV.problem({**S2, "G": 2}, dtype, {**GEOM2, "channels_last": channels_last, "bias": True,
                                              "activation": "relu"})
    inputs, out = run(p, {"LOOP": loop})
    if channels_last:  # read in place, written in the input's memory format
        assert inputs["x"].stride(1) == 1 and out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("shape, attrs", [
    ({"N": 3, "C": 5, "K": 7, "W": 13, "KW": 4}, {"stride_w": 3, "pad_w": 2, "pad_end_w": 2, "dil_w": 2}),
    ({"N": 1, "C": 3, "K": 2, "D": 4, "H": 5, "W": 3, "KD": 2, "KH": 3, "KW": 1},
     {"stride_h": 2, "pad_d": 1, "pad_end_d": 1, "dil_d": 2, "pad_h": 1, "pad_end_h": 1}),
    ({"N": 1, "C": 1, "K": 1, "W": 1, "KW": 1}, {}),
])
def test_1d_and_3d_and_trivial(shape, attrs):
    run(CONV.problem(shape, "float16", attrs))


def test_1d_3d_channels_last():
    run(CONV.problem({"N": 2, "C": 4, "K": 3, "W": 9, "KW": 3}, "bfloat16", {"channels_last": True, "pad_w": 1,
                                                                               "pad_end_w": 1}))
    run(CONV.problem({"N": 1, "C": 4, "K": 3, "D": 3, "H": 4, "W": 3, "KD": 3, "KH": 1, "KW": 2}, "float32",
                     {"channels_last": True, "pad_d": 1, "pad_end_d": 1}))


def test_same_with_even_window_pads_asymmetrically():
    p = CONV.problem({"N": 1, "C": 3, "K": 2, "H": 6, "W": 5, "KH": 4, "KW": 2}, "float32",
                     {"pad_h": 1, "pad_end_h": 2, "pad_w": 0, "pad_end_w": 1})
    _, out = run(p)
    assert out.shape == (1, 2, 6, 5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_depthwise_and_pointwise(dtype):
    dw = CONV.problem({"N": 2, "C": 5, "K": 5, "G": 5, "H": 6, "W": 7, "KH": 3, "KW": 3}, dtype,
                      {"pad_h": 1, "pad_end_h": 1, "pad_w": 1, "pad_end_w": 1, "channels_last": True})
    run(dw, {"LOOP": "flat"})
    pw = CONV.problem({"N": 2, "C": 19, "K": 11, "H": 3, "W": 5, "KH": 1, "KW": 1}, dtype, {"bias": True})
    run(pw, {"LOOP": "nested"}, variant="pointwise")
    v = get_variant("conv", "pointwise")
    assert "1x1" in v.rejection(dw, {**v.default_config(pw, H100), **SMALL, "LOOP": "nested"}, H100)


@pytest.mark.parametrize("split", [2, 3])
def test_split_k_with_full_epilogue(split):
    p = CONV.problem({**S2, "C": 40}, "float16", {**GEOM2, "bias": True, "residual": True, "activation": "silu",
                                                  "scale": 0.5, "channels_last": True})
    run(p, {"SPLIT_K": split, "LOOP": "nested"})


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape, attrs", [
    ({"N": 2, "C": 4, "K": 6, "G": 2, "H": 3, "W": 4, "KH": 3, "KW": 2},
     {"stride_h": 2, "stride_w": 3, "pad_h": 1, "pad_end_h": 1, "opad_h": 1, "opad_w": 2}),
    ({"N": 1, "C": 3, "K": 2, "W": 5, "KW": 3}, {"stride_w": 2, "dil_w": 3, "opad_w": 2}),
    ({"N": 1, "C": 2, "K": 3, "D": 2, "H": 3, "W": 2, "KD": 2, "KH": 2, "KW": 3},
     {"stride_d": 2, "opad_d": 1, "pad_w": 1, "pad_end_w": 1}),
])
def test_transposed(dtype, shape, attrs):
    run(CONV.problem(shape, dtype, {**attrs, "transposed": True, "bias": True}))


def test_exact_identity_on_small_integers():
    """Integer inputs: every partial sum is exact in fp32, so the result is bitwise the reference's."""
    for attrs in ({**GEOM2, "bias": True}, {"transposed": True, "stride_h": 2, "opad_h": 1}):
        p = CONV.problem({**S2, "G": 2}, "float16", attrs)
        v = get_variant("conv", "implicit_gemm")
        inputs = CONV.exact_inputs(p, torch.Generator().manual_seed(3))
        out = v.launch(inputs, p, {**v.default_config(p, H100), **SMALL, "SPLIT_K": 2})
        ref = CONV.reference({k: t.double() for k, t in inputs.items()}, p.attrs)
        assert torch.equal(out, ref.to(out.dtype))


def test_tf32_only_where_allowed():
    p = CONV.problem(S2, "float32", GEOM2)
    v = get_variant("conv", "implicit_gemm")
    inputs = CONV.make_inputs(p, torch.Generator().manual_seed(0))
    out = v.launch(inputs, p, {**v.default_config(p, H100), **SMALL, "PRECISION": "tf32"})
    ref64, scale = CONV.oracle(inputs, p.attrs)
    ok, _ = CONV.contract(p).check(out, ref64, scale, CONV.reference(inputs, p.attrs))
    assert not ok  # tf32 products exceed the ieee fp32 contract ...
    p32 = CONV.problem(S2, "float32", {**GEOM2, "allow_tf32": True})
    assert CONV.contract(p32).check(out, ref64, scale)[0]  # ... and meet the tf32 one


# ---- the verifier ------------------------------------------------------------------------------
def test_verifier_accepts_the_variant():
    p = CONV.problem({**S2, "N": 1, "G": 2}, "float16", {**GEOM2, "bias": True, "channels_last": True})
    v = get_variant("conv", "implicit_gemm")
    cert = verify_candidate(CONV, p, v, {**v.default_config(p, H100), **SMALL}, H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]


# ---- planted bugs: each must be rejected by the verifier for its reason --------------------------
@triton.jit
def padding_mask_off_by_one(o, t, size, stride, pad, dil, TRANSPOSED: tl.constexpr):
    i = o * stride - pad + t * dil
    return i, (i >= 1) & (i < size)  # the first row counted as padding


@triton.jit
def dilation_ignored(o, t, size, stride, pad, dil, TRANSPOSED: tl.constexpr):
    i = o * stride - pad + t  # dilation dropped (the problem dilates only along w)
    return i, (i >= 0) & (i < size)


@triton.jit
def group_offset_wrong(g, CG):
    return g * (CG - 1)  # group g starts one channel early per group


@pytest.mark.parametrize("helper, bug, attrs", [
    ("input_coord", padding_mask_off_by_one, {"pad_h": 1, "pad_end_h": 1}),
    ("input_coord", dilation_ignored, {"dil_w": 2}),
    ("group_channel", group_offset_wrong, {}),
])
def test_planted_bugs_are_rejected(monkeypatch, helper, bug, attrs):
    p = CONV.problem({**S2, "G": 2}, "float16", attrs)
    v = get_variant("conv", "implicit_gemm")
    monkeypatch.setattr(K, helper, bug)
    cert = verify_candidate(CONV, p, v, {**v.default_config(p, H100), **SMALL}, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "exceeds" in failure.status, failure


def test_planted_output_padding_dropped_is_rejected(monkeypatch):
    """A launcher that sizes the transposed conv's grid without output_padding (opad_h=1: the last row):
    the rows it leaves unwritten hold the verifier's poison."""
    from warpsmith.ops.conv import variant as V

    p = CONV.problem({"N": 1, "C": 2, "K": 3, "H": 3, "W": 4, "KH": 2, "KW": 2}, "float16",
                     {"transposed": True, "stride_h": 2, "opad_h": 1})
    v = get_variant("conv", "implicit_gemm")
    cert = verify_candidate(CONV, p, v, {**v.default_config(p, H100), **SMALL}, H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]  # the launcher as it is
    monkeypatch.setattr(V, "output_extent", lambda y5: (y5.shape[2], y5.shape[3] - 1, y5.shape[4]))
    cert = verify_candidate(CONV, p, v, {**v.default_config(p, H100), **SMALL}, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "unwritten" in failure.status, failure


# ---- cost model ----------------------------------------------------------------------------------
def test_cost_model_sees_the_window():
    from warpsmith.cost.cost import predict_ms

    h200 = get_target("h200")
    v = get_variant("conv", "implicit_gemm")
    base = {"N": 32, "C": 256, "K": 256, "H": 28, "W": 28, "KH": 3, "KW": 3}
    p3 = CONV.problem(base, "bfloat16", {"pad_h": 1, "pad_end_h": 1, "pad_w": 1, "pad_end_w": 1, "channels_last": True})
    p1 = CONV.problem({**base, "KH": 1, "KW": 1}, "bfloat16", {"channels_last": True})
    cfg = v.default_config(p3, h200)
    assert 0 < predict_ms(v, p1, cfg, h200) < predict_ms(v, p3, cfg, h200) < float("inf")
    assert predict_ms(v, p3, {**cfg, "BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 4},
                      h200) == float("inf")
