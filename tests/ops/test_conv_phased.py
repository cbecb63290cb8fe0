"""The transposed conv by output phase (``phased``: ``conv_transpose_phase_kernel``) under the
interpreter: against the fp64 oracle on geometries where phases differ in their taps (dilation
sharing a factor with the stride, phases with no tap at all, output padding, asymmetric padding,
groups, 1-D/2-D/3-D, channels-last), special values as torch's transposed conv gives them (for the
implicit GEMM's transposed form too), the exact identity on small integers, the verifier (its poison
shows unwritten pixels), planted bugs rejected for their reasons, validity, the tap count the cost
model uses, and dispatch without a record."""
import pytest
import torch

from warpsmith.core._triton import tl, triton
from warpsmith.ops import get_variant
from warpsmith.ops.conv import kernel as K
from warpsmith.ops.conv import variant as V
from warpsmith.ops.conv.spec import CONV
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
SMALL = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=2, num_stages=1, SPLIT_K=1, PRECISION="ieee")
PHASED = get_variant("conv", "phased")

GEOMETRIES = [
    # 2-D, stride 2 x 3, groups, output padding, asymmetric padding
    ({"N": 2, "C": 4, "K": 6, "G": 2, "H": 3, "W": 4, "KH": 3, "KW": 2},
     {"stride_h": 2, "stride_w": 3, "pad_h": 1, "pad_end_h": 2, "opad_h": 1, "opad_w": 2}),
    # 1-D, dilation 2 with stride 4: gcd 2, half of the phases have no tap
    ({"N": 1, "C": 3, "K": 2, "W": 5, "KW": 3}, {"stride_w": 4, "dil_w": 2, "pad_w": 1, "pad_end_w": 1, "opad_w": 1}),
    # 1-D, stride 3 with dilation 2 (coprime: every phase has taps, in a permuted order)
    ({"N": 2, "C": 5, "K": 3, "W": 4, "KW": 4}, {"stride_w": 3, "dil_w": 2, "opad_w": 1}),
    # 3-D, stride 2 on every axis (KernelBench's ConvTranspose3d), window 3
    ({"N": 1, "C": 3, "K": 4, "D": 3, "H": 2, "W": 3, "KD": 3, "KH": 3, "KW": 3},
     {"stride_d": 2, "stride_h": 2, "stride_w": 2, "pad_d": 1, "pad_end_d": 1, "pad_h": 1, "pad_end_h": 1}),
    # 2-D, stride larger than the window: some output rows receive no tap (bias only)
    ({"N": 1, "C": 2, "K": 3, "H": 3, "W": 2, "KH": 2, "KW": 1}, {"stride_h": 3, "stride_w": 2, "opad_h": 2}),
]


def run(problem, cfg=None, seed=0):
    cfg = {**PHASED.default_config(problem, H100), **SMALL, **(cfg or {})}
    assert PHASED.invalid(problem, cfg, H100) is None
    inputs = CONV.make_inputs(problem, torch.Generator().manual_seed(seed))
    out = PHASED.launch(inputs, problem, cfg)
    ref64, scale = CONV.oracle(inputs, problem.attrs)
    assert out.shape == ref64.shape and out.dtype == problem.dtype
    ok, msg = CONV.contract(problem).check(out, ref64, scale, CONV.reference(inputs, problem.attrs))
    assert ok, f"{problem.describe()} {cfg}: {msg}"
    return inputs, out


@pytest.mark.parametrize("loop", ["nested", "flat"])
@pytest.mark.parametrize("shape, attrs", GEOMETRIES)
def test_matches_the_oracle(shape, attrs, loop):
    run(CONV.problem(shape, "float32", {**attrs, "transposed": True, "bias": True}), {"LOOP": loop})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_dtypes_channels_last_and_epilogue(dtype):
    shape, attrs = GEOMETRIES[0]
    p = CONV.problem(shape, dtype, {**attrs, "transposed": True, "bias": True, "residual": True,
                                    "activation": "gelu", "scale": 0.5, "channels_last": True})
    inputs, out = run(p)
    assert out.is_contiguous(memory_format=torch.channels_last)


def test_exact_identity_on_small_integers():
    for shape, attrs in GEOMETRIES[:4]:
        p = CONV.problem(shape, "float16", {**attrs, "transposed": True})
        inputs = CONV.exact_inputs(p, torch.Generator().manual_seed(3))
        out = PHASED.launch(inputs, p, {**PHASED.default_config(p, H100), **SMALL})
        ref = CONV.reference({k: t.double() for k, t in inputs.items()}, p.attrs)
        assert torch.equal(out, ref.to(out.dtype)), p.describe()


def test_verifier_accepts_the_variant():
    shape, attrs = GEOMETRIES[1]
    p = CONV.problem(shape, "float16", {**attrs, "transposed": True, "bias": True})
    cert = verify_candidate(CONV, p, PHASED, {**PHASED.default_config(p, H100), **SMALL}, H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]


@pytest.mark.parametrize("variant, split, dtype", [
    ("phased", 1, "float16"), ("implicit_gemm", 2, "float32"),
    # each variant and dtype is quick above (6 CPU-s each): the other dtype, and the split-free implicit GEMM
    pytest.param("phased", 1, "float32", marks=pytest.mark.slow),
    pytest.param("implicit_gemm", 1, "float32", marks=pytest.mark.slow),
    # the implicit GEMM in float16 too: each dtype is quick with the phased variant (4 CPU-s each)
    pytest.param("implicit_gemm", 1, "float16", marks=pytest.mark.slow),
    pytest.param("implicit_gemm", 2, "float16", marks=pytest.mark.slow)])
def test_special_values_as_torch(variant, split, dtype):
    """inf and NaN in x, w and bias: torch's transposed conv multiplies real inputs only, so a stride hole
    or an input past the edge never meets an inf weight (0 x inf = NaN); both transposed forms redo
    such a tile exactly. NaN exactly where the fp64 reference has it, infinities equal."""
    v = get_variant("conv", variant)
    for shape, attrs in GEOMETRIES[:2]:
        p = CONV.problem(shape, dtype, {**attrs, "transposed": True, "bias": True})
        for seed in range(6):
            inputs = CONV.make_inputs(p, torch.Generator().manual_seed(seed), "specials")
            ref = CONV.oracle(inputs, p.attrs)[0].to(p.dtype)
            out = v.launch(inputs, p, {**v.default_config(p, H100), **SMALL, "SPLIT_K": split})
            assert torch.equal(out.isnan(), ref.isnan()), (p.describe(), seed)
            inf = ref.isinf() | out.isinf()
            assert torch.equal(out[inf], ref[inf]), (p.describe(), seed)


# ---- planted bugs ----------------------------------------------------------------------------------
@triton.jit
def first_tap_off_by_one(r, KS, stride, pad, dil, gcd, inv):
    q = r + pad
    step = stride // gcd
    t0 = ((q // gcd) * inv) % step + 1  # skips each phase's first tap
    count = tl.where(q % gcd == 0, (KS - t0 + step - 1) // step, 0)
    return t0, step, count, (q - t0 * dil) // stride


@triton.jit
def gcd_ignored(r, KS, stride, pad, dil, gcd, inv):
    q = r + pad
    step = stride // gcd
    t0 = (q * inv) % step  # phases whose q is not a multiple of gcd get taps that do not feed them
    count = (KS - t0 + step - 1) // step
    return t0, step, count, (q - t0 * dil) // stride


@pytest.mark.parametrize("bug", [first_tap_off_by_one, gcd_ignored])
def test_planted_tap_bugs_are_rejected(monkeypatch, bug):
    shape, attrs = GEOMETRIES[1]  # gcd(4, 2) = 2
    p = CONV.problem(shape, "float16", {**attrs, "transposed": True})
    monkeypatch.setattr(K, "phase_taps", bug)
    cert = verify_candidate(CONV, p, PHASED, {**PHASED.default_config(p, H100), **SMALL}, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "exceeds" in failure.status, failure


def test_a_grid_missing_the_last_phase_leaves_pixels_unwritten(monkeypatch):
    shape, attrs = GEOMETRIES[0]
    p = CONV.problem(shape, "float16", {**attrs, "transposed": True})
    real = K.conv_transpose_phase_kernel

    class Short:
        def __getitem__(self, grid):
            return real[(grid[0], grid[1], grid[2] - 1)]

    monkeypatch.setattr(K, "conv_transpose_phase_kernel", Short())
    cert = verify_candidate(CONV, p, PHASED, {**PHASED.default_config(p, H100), **SMALL}, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "unwritten" in failure.status, failure


# ---- validity, cost, dispatch -----------------------------------------------------------------------
def test_valid_only_for_strided_transposed_convs_without_split_k():
    shape, attrs = GEOMETRIES[0]
    direct = CONV.problem(shape, "float16", attrs)
    unit = CONV.problem(shape, "float16", {"transposed": True})
    strided = CONV.problem(shape, "float16", {**attrs, "transposed": True})
    cfg = {**PHASED.default_config(strided, H100), **SMALL}
    assert "transposed" in PHASED.rejection(direct, cfg, H100)
    assert "unit stride" in PHASED.rejection(unit, cfg, H100)
    assert "split-K" in PHASED.rejection(strided, {**cfg, "SPLIT_K": 2}, H100)
    assert PHASED.space(strided, H100).default()["SPLIT_K"] == 1


def test_taps_per_phase_and_the_cost_model():
    from warpsmith.cost.cost import predict_ms

    # stride 4, dilation 2, window 3, padding 1: r + 1 - 2t divisible by 4 for t = 1 at r = 1, for
    # t = 0 and 2 at r = 3; even phases have no tap
    assert [V.phase_taps(r, 3, 4, 1, 2) for r in range(4)] == [0, 1, 0, 2]
    assert V.phase_constants(4, 2) == (2, 1) and V.phase_constants(3, 2) == (1, 2) and V.phase_constants(2, 1) == (1, 1)
    h200 = get_target("h200")
    p = CONV.problem({"N": 8, "C": 64, "K": 64, "D": 16, "H": 32, "W": 32, "KD": 3, "KH": 3, "KW": 3}, "bfloat16",
                     {"transposed": True, "stride_d": 2, "stride_h": 2, "stride_w": 2, "pad_d": 1, "pad_end_d": 1,
                      "pad_h": 1, "pad_end_h": 1, "pad_w": 1, "pad_end_w": 1, "channels_last": True})
    gemm = get_variant("conv", "implicit_gemm")
    M, N, full, _ = gemm.gemm_shape(p)
    assert PHASED.gemm_shape(p)[2] == round(64 * 1.5 ** 3) and full == 64 * 27  # (2 + 1) / 2 taps per axis
    assert predict_ms(PHASED, p, PHASED.default_config(p, h200), h200) < predict_ms(gemm, p, gemm.default_config(p, h200), h200)


def test_dispatch_without_a_record_runs_it_for_a_strided_transposed_conv(monkeypatch):
    from warpsmith.ops.conv import op

    shape, attrs = GEOMETRIES[3]
    p = CONV.problem(shape, "float32", {**attrs, "transposed": True})
    launched = []
    real = type(PHASED).launch
    monkeypatch.setattr(type(PHASED), "launch", lambda self, i, prob, c, out=None: launched.append(self.name) or
                        real(self, i, prob, c, out))
    inputs = CONV.make_inputs(p, torch.Generator().manual_seed(0))
    y = op.conv_transpose(inputs["x"], inputs["w"], None, stride=(2, 2, 2), padding=(1, 1, 0))
    ref64, scale = CONV.oracle(inputs, p.attrs)
    assert launched and set(launched) == {"phased"}
    assert CONV.contract(p).check(y, ref64, scale, CONV.reference(inputs, p.attrs))[0]
