"""Scaled GEMM (fp8 e4m3/e5m2, int8; tensor, row and block scales) under the interpreter: every format and
granularity against the fp64 product of the dequantized operands under the error contract, odd shapes,
epilogues, the public op's validation of the scale convention, the verifier (planted bugs rejected for
their reasons) and the launch contracts."""

import fresh_interpreter
import pytest
import torch

import warpsmith.ops as wops
from warpsmith.core._triton import tl, triton
from warpsmith.core.errors import InvalidInputError
from warpsmith.ops import get_variant
from warpsmith.ops.lowprec.scaled import kernel as K
from warpsmith.ops.lowprec.quant.reference import DTYPE_OF, calc_diff, quantize_blocks, quantize_rows, quantize_tensor, snr_db
from warpsmith.ops.lowprec.scaled.spec import SCALED_MATMUL as S
from warpsmith.targets import get_target
from warpsmith.verify.verifier import verify_candidate

H100 = get_target("h100")
SMALL = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=64, GROUP_M=2, num_warps=2, num_stages=2)
COMBOS = [(f, s) for f in ("e4m3", "e5m2", "int8") for s in ("tensor", "row", "block") if (f, s) != ("int8", "block")]


def run(name, p, seed=0, dist="normal", **over):
    v = get_variant("scaled_matmul", name)
    cfg = {**v.default_config(p, H100), **SMALL, **({"SPLIT_K": 3} if name == "splitk" else {}), **over}
    inputs = S.make_inputs(p, torch.Generator().manual_seed(seed), dist)
    out = v.launch(inputs, p, cfg)
    ref64, scale = S.oracle(inputs, p.attrs)
    return out, S.contract(p).check(out, ref64, scale, S.reference(inputs, p.attrs))


@pytest.mark.parametrize("fmt, scaling", COMBOS)
@pytest.mark.parametrize("name", ["tiled", "splitk"])
def test_every_format_and_granularity_odd_shape(name, fmt, scaling):
    if name == "splitk" and scaling == "tensor":
        pytest.skip("split-K shares scaled_tile with tiled; row and block cover its scale paths")
    p = S.problem({"M": 19, "N": 141, "K": 300}, "bfloat16",
                  {"format": fmt, "scaling": scaling, "bias": True, "activation": "gelu", "layout": "nn"})
    out, (ok, msg) = run(name, p)
    assert out.shape == (19, 141) and out.dtype == torch.bfloat16
    assert ok, msg


MIXED = [("e4m3", "e5m2"), ("e5m2", "e4m3")]


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("fa, fb", MIXED)
def test_mixed_fp8_operands(fa, fb, scaling):
    """e4m3 x e5m2 and e5m2 x e4m3 (fp8 training's hybrid recipe): each operand quantized in its own
    format, the product against the fp64 product of the dequantized operands; split-K on row scales."""
    p = S.problem({"M": 19, "N": 141, "K": 300}, "bfloat16",
                  {"format": fa, "format_b": fb, "scaling": scaling, "bias": True, "activation": "gelu"})
    inputs = S.make_inputs(p, torch.Generator().manual_seed(0))
    assert (inputs["a"].dtype, inputs["b"].dtype) == (DTYPE_OF[fa], DTYPE_OF[fb])
    for name in ("tiled", "splitk") if scaling == "row" else ("tiled",):
        out, (ok, msg) = run(name, p)
        assert out.shape == (19, 141) and ok, (name, msg)


def test_mixed_formats_through_the_public_op_and_one_name_per_problem():
    x, w = torch.randn(4, 200), torch.randn(130, 200)
    (qx, sx), (qw, sw) = quantize_rows(x, "e5m2"), quantize_rows(w, "e4m3")
    y = wops.scaled_matmul(qx, qw.t(), sx, sw.t(), torch.float32, scaling="row")
    ref = (qx.double() * sx.double()) @ (qw.double() * sw.double()).t()
    assert (y.double() - ref).abs().max() <= 1e-5 * ref.abs().max()
    same = S.problem({"M": 4, "N": 130, "K": 200}, "bfloat16", {"format": "e4m3", "format_b": "e4m3"})
    assert same == S.problem({"M": 4, "N": 130, "K": 200}, "bfloat16", {"format": "e4m3"})
    assert same.attrs["format_b"] == "same"


@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
@pytest.mark.parametrize("activation", ["relu", "silu"])
def test_output_dtypes_epilogues_and_k_major_b(out_dtype, activation):
    p = S.problem({"M": 1, "N": 33, "K": 257}, out_dtype,
                  {"format": "e4m3", "scaling": "block", "activation": activation, "layout": "nt"})
    _, (ok, msg) = run("tiled", p, BLOCK_K=128)
    assert ok, msg


def test_int8_accumulates_exactly_in_int32():
    """Full-range int8 operands at K = 2048: partial sums far beyond int16 and fp16's exact integers; with
    unit scales and an fp32 output the result must equal the exact integer product bit for bit."""
    g = torch.Generator().manual_seed(3)
    a = torch.randint(-127, 128, (5, 2048), generator=g, dtype=torch.int8)
    b = torch.randint(-127, 128, (2048, 7), generator=g, dtype=torch.int8)
    one = torch.ones(1)
    out = wops.scaled_matmul(a, b, one, one, torch.float32)
    exact = (a.long() @ b.long())
    assert exact.abs().max() > 2**16 and exact.abs().max() < 2**24
    assert torch.equal(out, exact.float())


def test_quantization_error_is_reported_apart_from_kernel_error():
    x, w = torch.randn(16, 256), torch.randn(64, 256)
    full = x @ w.t()
    snrs = {}
    for fmt in ("e4m3", "e5m2", "int8"):
        (qa, sa), (qw, sw) = quantize_rows(x, fmt), quantize_rows(w, fmt)
        y = wops.scaled_matmul(qa, qw.t(), sa, sw.t(), torch.float32, scaling="row")
        snrs[fmt] = snr_db(y, full)
        assert calc_diff(y, full) < 1e-2
    # 8-bit integers (with scales per row) beat e4m3 (3 mantissa bits) beat e5m2 (2)
    assert snrs["int8"] > snrs["e4m3"] > snrs["e5m2"] > 15, snrs
    (qa, sa), (qw, sw) = quantize_tensor(x, "e4m3"), quantize_tensor(w, "e4m3")
    y = wops.scaled_matmul(qa, qw.t(), sa, sw, torch.float32)
    assert 15 < snr_db(y, full) < snrs["e4m3"] + 3  # one scale per tensor: no better than per row
    assert calc_diff(full, full) == 0.0 and snr_db(full, full) == float("inf")


def test_public_op_validates_the_scale_convention():
    x, w = torch.randn(4, 200), torch.randn(130, 200)
    (qa, sa), (qw, sw) = quantize_blocks(x, "e4m3", 1, 128), quantize_blocks(w, "e4m3", 128, 128)
    y = wops.scaled_matmul(qa, qw.t(), sa, sw.t(), torch.bfloat16, scaling="block")
    assert y.shape == (4, 130)
    with pytest.raises(InvalidInputError, match=r"scale_a: expected \(4, 2\) for block scaling.*got \(2, 4\)"):
        wops.scaled_matmul(qa, qw.t(), sa.t(), sw.t(), torch.bfloat16, scaling="block")
    with pytest.raises(InvalidInputError, match=r"shape of scale_a.*expected \(1,\).*got \(4, 2\)"):
        wops.scaled_matmul(qa, qw.t(), sa, sw.t(), torch.bfloat16, scaling="tensor")
    with pytest.raises(InvalidInputError, match="dtype of scale_b.*float32"):
        wops.scaled_matmul(qa, qw.t(), sa, sw.t().half(), torch.bfloat16, scaling="block")
    with pytest.raises(InvalidInputError, match="scaling for int8"):
        wops.scaled_matmul(qa.float().to(torch.int8), qw.t().float().to(torch.int8), sa, sw.t(), scaling="block")
    with pytest.raises(InvalidInputError, match=r"dtype of b: expected torch.float8_e4m3fn or torch.float8_e5m2"):
        wops.scaled_matmul(qa, qw.t().float().to(torch.int8), sa, sw.t(), scaling="block")
    with pytest.raises(InvalidInputError, match=r"dtype of b: expected torch.int8 \(as a\)"):
        wops.scaled_matmul(qa.float().to(torch.int8), qw.t(), sa, sw.t(), scaling="row")
    with pytest.raises(InvalidInputError, match="formats of a and b"):
        S.problem({"M": 4, "N": 130, "K": 200}, "bfloat16", {"format": "int8", "format_b": "e4m3"})
    with pytest.raises(InvalidInputError, match="dtype of a"):
        wops.scaled_matmul(x, w.t(), sa, sw.t(), scaling="block")
    with pytest.raises(InvalidInputError, match="out_dtype"):
        wops.scaled_matmul(qa, qw.t(), sa, sw.t(), torch.int32, scaling="block")
    with pytest.raises(InvalidInputError, match="bias"):
        wops.scaled_matmul(qa, qw.t(), sa, sw.t(), torch.bfloat16, bias=torch.zeros(130), scaling="block")


@pytest.mark.parametrize("scaling, which", [("row", "scale_b"), ("row", "scale_a"), ("block", "scale_b")])
def test_the_launcher_refuses_scale_offsets_past_int32(scaling, which):
    """The kernels index the scale tensors in 32 bits: a scale tensor whose strides reach 2^31 is refused
    before any launch (meta tensors: only shapes and strides are read), as A, B and C are."""
    M, N, Kd = 4, 130, 200
    p = S.problem({"M": M, "N": N, "K": Kd}, "bfloat16", {"format": "e4m3", "scaling": scaling, "bias": False})
    meta = {"device": "meta", "dtype": torch.float32}
    kb, nb = -(-Kd // 128), -(-N // 128)
    shapes = {"row": {"scale_a": (M, 1), "scale_b": (1, N)}, "block": {"scale_a": (M, kb), "scale_b": (kb, nb)}}[scaling]
    scales = {k: torch.empty(s, **meta) for k, s in shapes.items()}
    big = torch.empty_strided(shapes[which], (2**31, 2**31) if which == "scale_a" else (1, 2**31), **meta)
    scales[which] = big
    inputs = {"a": torch.empty(M, Kd, device="meta", dtype=torch.float8_e4m3fn),
              "b": torch.empty(Kd, N, device="meta", dtype=torch.float8_e4m3fn), **scales}
    v = get_variant("scaled_matmul", "tiled")
    with pytest.raises(InvalidInputError, match=rf"size of {which}.*below 2\^31"):
        v.launch(inputs, p, v.default_config(p, H100))


def test_row_scaled_contracts_prove_int32_for_every_shape():
    """The row scales (``sb[n]`` with any stride) and the split-K workspace (SPLIT_K x M x N, indexed in
    64 bits) are proved free of 32-bit overflow over the domain the launcher checks; before, the prover
    found a wrap (N = 46146, stride 46532). In a fresh interpreter: z3's answers near a budget's edge
    depend on the process's history."""
    code = """import json
from warpsmith.verify.symbolic import prove
from warpsmith.ops.lowprec.scaled.contract import _EPI, _meta, splitk, tiled
out = []
for c in (tiled([{**_meta("row", False), **_EPI}]), splitk([_meta("row", True)]), splitk([_meta("block", False)])):
    out += [(r.contract, o.name, o.subject, o.status) for r in prove(c) for o in r.obligations]
print(json.dumps(out))
"""
    statuses = fresh_interpreter.last_json(code)
    int32 = [(k, s, st) for k, n, s, st in statuses if n == "int32_no_overflow"]
    assert int32 and all(st == "proved" for *_, st in int32), int32
    assert not [x for x in statuses if x[3].startswith("failed")], statuses


def test_hopper_layout_guard():
    p = S.problem({"M": 64, "N": 64, "K": 256}, "bfloat16", {"format": "e4m3", "layout": "nn"})
    v = get_variant("scaled_matmul", "tiled")
    assert "K-major" in v.invalid(p, v.default_config(p, get_target("a100")) | {}, H100)
    assert v.invalid(p, v.default_config(p, get_target("a100")), get_target("a100")) is None
    pb = S.problem({"M": 64, "N": 64, "K": 256}, "bfloat16", {"format": "e4m3", "scaling": "block"})
    assert "BLOCK_K <= 128" in v.invalid(pb, {**v.default_config(pb, H100), "BLOCK_K": 256}, H100)
    big = {**v.default_config(pb, H100), "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8}
    assert "would spill" in v.invalid(pb, big, H100)  # measured by gpucheck on sm_90
    pbig = S.problem({"M": 257, "N": 129, "K": 300}, "bfloat16", {"format": "e4m3", "scaling": "block"})
    assert v.invalid(pbig, v.default_config(pbig, H100), H100) is None


# ---- special values (issue 27, item 4) -------------------------------------------------------------
@pytest.mark.parametrize("fa, fb", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")])
@pytest.mark.parametrize("name", ["tiled", "splitk"])
def test_fp8_nan_and_inf_propagate_as_in_torch(name, fa, fb):
    """A NaN byte in an e4m3 operand gave 480 under the interpreter (finite, wrong): NaN rows and columns
    where torch._scaled_mm and the product of the dequantized operands have them; e5m2 infinities too."""
    g = torch.Generator().manual_seed(5)
    a = (torch.randn(5, 64, generator=g)).to(DTYPE_OF[fa])
    b = (torch.randn(64, 40, generator=g)).to(DTYPE_OF[fb])
    a[1, 7] = float("nan")
    a[3, 0] = -float("nan")  # 0xFF in e4m3
    b[9, 17] = float("nan")
    if fb == "e5m2":
        b[2, 30] = float("inf")
    one = torch.ones(1)
    p = S.problem({"M": 5, "N": 40, "K": 64}, "float32", {"format": fa, "format_b": fb, "scaling": "tensor"})
    v = get_variant("scaled_matmul", name)
    cfg = {**v.default_config(p, H100), **SMALL, **({"SPLIT_K": 2} if name == "splitk" else {})}
    out = v.launch({"a": a, "b": b, "scale_a": one, "scale_b": one}, p, cfg)
    ref = a.double() @ b.double()
    assert torch.equal(out.isnan(), ref.isnan()) and out.isnan()[[1, 3]].all() and out.isnan()[:, 17].all()
    assert torch.equal(out.isinf(), ref.isinf())
    finite = ref.isfinite()
    assert torch.allclose(out.double()[finite], ref[finite], rtol=1e-6, atol=1e-6)
    if fa == fb:  # torch._scaled_mm takes one fp8 format (CPU)
        torch_out = torch._scaled_mm(a, b.t().contiguous().t(), one[0], one[0], out_dtype=torch.float32)
        assert torch.equal(out.isnan(), torch_out.isnan())
        assert torch.equal(wops.scaled_matmul(a, b, one, one, torch.float32).isnan(), torch_out.isnan())


@pytest.mark.parametrize("fmt, scaling, fmt_b", [("e4m3", "row", "same"), ("e5m2", "block", "same"),
                                                  ("e4m3", "tensor", "e5m2")])
def test_special_value_inputs_keep_their_specials_and_pass_the_contract(fmt, scaling, fmt_b):
    """The "specials" inputs plant the formats' NaN (and e5m2's infinities) in the quantized operands, with
    finite scales; they used to be replaced by normal values, so the verifier never saw a special value."""
    p = S.problem({"M": 19, "N": 141, "K": 300}, "bfloat16",
                  {"format": fmt, "format_b": fmt_b, "scaling": scaling, "bias": True})
    x = S.make_inputs(p, torch.Generator().manual_seed(1), "specials")
    assert x["a"].float().isnan().sum() == 1 and x["b"].float().isnan().sum() == 1
    assert x["scale_a"].isfinite().all() and x["scale_b"].isfinite().all()
    if "e5m2" in (fmt, fmt_b):
        assert x["a" if fmt == "e5m2" else "b"].float().isinf().sum() == 2
    for name in ("tiled", "splitk"):
        out, (ok, msg) = run(name, p, seed=1, dist="specials")
        assert ok and out.float().isnan().any(), (name, msg)


# ---- the scaling read off the scales' shapes (issue 27, item 6) -----------------------------------------
def test_scaling_is_inferred_from_the_scale_shapes():
    from warpsmith.ops.lowprec.scaled.op import infer_scaling

    x, w = torch.randn(4, 200), torch.randn(130, 200)
    (qx, sx), (qw, sw) = quantize_rows(x, "e4m3"), quantize_rows(w, "e4m3")
    row = wops.scaled_matmul(qx, qw.t(), sx, sw.t(), torch.float32)  # (4, 1) and (1, 130): refused before
    assert torch.equal(row, wops.scaled_matmul(qx, qw.t(), sx, sw.t(), torch.float32, scaling="row"))
    ref = torch._scaled_mm(qx, qw.t(), sx, sw.t(), out_dtype=torch.float32)
    assert torch.allclose(row, ref, rtol=1e-5, atol=1e-5)
    (bx, bsx), (bw, bsw) = quantize_blocks(x, "e4m3", 1, 128), quantize_blocks(w, "e4m3", 128, 128)
    blk = wops.scaled_matmul(bx, bw.t(), bsx, bsw.t(), torch.float32)
    assert torch.equal(blk, wops.scaled_matmul(bx, bw.t(), bsx, bsw.t(), torch.float32, scaling="block"))
    (tx, tsx), (tw, tsw) = quantize_tensor(x, "e4m3"), quantize_tensor(w, "e4m3")
    ten = wops.scaled_matmul(tx, tw.t(), tsx, tsw, torch.float32)
    assert torch.equal(ten, wops.scaled_matmul(tx, tw.t(), tsx[0], tsw.reshape(1, 1), torch.float32))  # () and (1, 1)
    assert torch.equal(ten, wops.scaled_matmul(tx, tw.t(), tsx, tsw, torch.float32, scaling="tensor"))
    # shapes that fit no scaling name both shapes and every scaling's
    with pytest.raises(InvalidInputError, match=r"shapes of scale_a and scale_b.*\(4, 1\) and \(1, 130\) \(row\).*"
                                                r"got '\(1, 4\) and \(130, 1\)'"):
        wops.scaled_matmul(qx, qw.t(), sx.t(), sw, torch.float32)
    # the explicit argument is still checked against the shapes
    with pytest.raises(InvalidInputError, match=r"shape of scale_a: expected \(4, 2\) for block scaling"):
        wops.scaled_matmul(qx, qw.t(), sx, sw.t(), torch.float32, scaling="block")
    with pytest.raises(InvalidInputError, match=r"shape of scale_a: expected \(1,\) for tensor scaling"):
        wops.scaled_matmul(qx, qw.t(), sx, sw.t(), torch.float32, scaling="tensor")
    # int8 with block-shaped scales: the scaling is inferred, then refused for int8
    with pytest.raises(InvalidInputError, match="scaling for int8"):
        wops.scaled_matmul(qx.float().to(torch.int8), qw.t().float().to(torch.int8), bsx, bsw.t())
    # where shapes fit two scalings, they are the same product: the first is taken
    one, col = torch.ones(1, 1), torch.ones(1, 1)
    assert infer_scaling(one, col, 1, 1, 300) == "tensor"  # M = N = 1: tensor = row
    assert infer_scaling(torch.ones(1, 1), torch.ones(1, 1), 1, 100, 100) == "tensor"  # one block each
    assert infer_scaling(torch.ones(5, 1), torch.ones(1, 1), 5, 1, 100) == "row"  # N = 1, K <= 128: row = block
    g = torch.Generator().manual_seed(0)
    a1, b1 = torch.randn(1, 100, generator=g).to(torch.float8_e4m3fn), torch.randn(100, 1, generator=g).to(torch.float8_e4m3fn)
    s1, s2 = torch.full((1, 1), 0.5), torch.full((1, 1), 4.0)
    outs = {sc: wops.scaled_matmul(a1, b1, s1, s2, torch.float32, scaling=sc) for sc in ("tensor", "row", "block")}
    assert torch.equal(outs["tensor"], outs["row"]) and torch.equal(outs["row"], outs["block"])
    assert torch.equal(outs["tensor"], wops.scaled_matmul(a1, b1, s1, s2, torch.float32))


# ---- the verifier and planted bugs ---------------------------------------------------------------
def verified_problem(fmt, scaling, fmt_b="same"):
    return S.problem({"M": 5, "N": 130, "K": 160 if fmt != "int8" else 256}, "bfloat16",
                     {"format": fmt, "format_b": fmt_b, "scaling": scaling, "bias": True})


@pytest.mark.parametrize("fmt, scaling, fmt_b", [("e4m3", "block", "same"), ("int8", "row", "same"),
                                                  ("e5m2", "row", "e4m3")])
def test_verifier_accepts(fmt, scaling, fmt_b):
    p = verified_problem(fmt, scaling, fmt_b)
    v = get_variant("scaled_matmul", "tiled")
    cert = verify_candidate(S, p, v, {**v.default_config(p, H100), **SMALL}, H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]


@triton.jit
def transposed_weight_scale_grid(sa_ptr, sb_ptr, rm, rn, k, M, N, stride_sam, stride_sak, stride_sbk, stride_sbn):
    kb = k // 128
    sa = tl.load(sa_ptr + rm * stride_sam + kb * stride_sak, mask=rm < M, other=0.0)
    sb = tl.load(sb_ptr + (rn // 128) * stride_sbk + kb * stride_sbn, mask=rn < N, other=0.0)  # axes swapped
    return sa, sb


@triton.jit
def scale_block_off_by_one(sa_ptr, sb_ptr, rm, rn, k, M, N, stride_sam, stride_sak, stride_sbk, stride_sbn):
    kb = tl.maximum(k // 128 - 1, 0)  # each K tile after the first block takes the previous block's scales
    sa = tl.load(sa_ptr + rm * stride_sam + kb * stride_sak, mask=rm < M, other=0.0)
    sb = tl.load(sb_ptr + kb * stride_sbk + (rn // 128) * stride_sbn, mask=rn < N, other=0.0)
    return sa, sb


@triton.jit
def int16_accumulator(a, b, acc):
    return (acc + tl.dot(a, b, tl.zeros_like(acc))).to(tl.int16).to(tl.int32)  # wraps past 32767


@triton.jit
def b_read_in_a_format(a, b, acc):
    return tl.dot(a, b.to(a.dtype), acc, out_dtype=acc.dtype)  # e5m2 cast to e4m3: past 448 it overflows


@pytest.mark.parametrize("helper, bug, fmt, scaling, fmt_b", [
    ("load_scales_block", transposed_weight_scale_grid, "e4m3", "block", "same"),
    ("load_scales_block", scale_block_off_by_one, "e4m3", "block", "same"),
    ("accumulate", int16_accumulator, "int8", "row", "same"),
    ("accumulate", b_read_in_a_format, "e4m3", "row", "e5m2"),
])
def test_planted_bugs_are_rejected(monkeypatch, helper, bug, fmt, scaling, fmt_b):
    """The same problems as test_verifier_accepts (which shows the harness can pass); int8 at K = 256 with
    full-range operands: partial sums beyond int16, so an int16 accumulator wraps."""
    p = verified_problem(fmt, scaling, fmt_b)
    v = get_variant("scaled_matmul", "tiled")
    monkeypatch.setattr(K, helper, bug)
    cert = verify_candidate(S, p, v, {**v.default_config(p, H100), **SMALL}, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name in ("exact_identity", "error_contract"), failure
    assert "mismatch" in failure.status or "exceeds" in failure.status, failure


@triton.jit
def e4m3_nan_ignored(x, axis: tl.constexpr):
    return tl.max(tl.zeros(x.shape, tl.int32), axis=axis)  # the interpreter's e4m3 NaN read as 480


def test_the_verifier_sees_special_values(monkeypatch):
    """The "specials" inputs used to be drawn as normal ones: a GEMM that turns a NaN into a finite value
    passed. Now the verifier's error contract finds the NaN that was not propagated."""
    p = verified_problem("e4m3", "row")
    v = get_variant("scaled_matmul", "tiled")
    monkeypatch.setattr(K, "e4m3_nan", e4m3_nan_ignored)
    cert = verify_candidate(S, p, v, {**v.default_config(p, H100), **SMALL}, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "specials" in failure.status, failure
    assert "NaN not propagated" in failure.status, failure


# ---- launch contracts ----------------------------------------------------------------------------
def test_launch_contract_of_block_scaling_proves_in_bounds():
    """Every load and store of the block-scaled kernel, scale indices ``sa[m, k // 128]`` and
    ``sb[k // 128, n // 128]`` included, is proved in bounds for all shapes of the domain, and C is
    written once per element. int32: proved in a fresh interpreter (the row-scaled test below); in this
    process's history the solver may stop at its budget and check the launcher's 32-bit precondition
    on the bounded shapes instead (``bounded``), never ``failed``. ``warpsmith prove
    warpsmith.ops.lowprec.scaled.contract`` runs all of CONTRACTS."""
    from warpsmith.ops.lowprec.scaled.contract import _EPI, _meta, tiled
    from warpsmith.verify.symbolic import prove

    (rep,) = prove(tiled([{**_meta("block", False, 16, 32, 64), **_EPI}]), timeout_ms=120_000)
    st = {(o.name, o.subject): o.status for o in rep.obligations}
    assert [s for (n, _), s in st.items() if n == "in_bounds"] == ["proved"] * 6, st
    assert all(s == "proved" for (n, _), s in st.items() if n in ("race_free", "coverage")), st
    assert all(s.startswith(("proved", "bounded")) for (n, _), s in st.items() if n == "int32_no_overflow"), st
