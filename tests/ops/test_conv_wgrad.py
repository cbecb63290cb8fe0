"""The convolution's weight gradient as a pipeline op (``conv_weight_grad``, ops/conv/wgrad.py): split-K
partials summed in order, against the fp64 oracle under the error contract on several geometries; the
verifier; planted bugs rejected; the heuristic's split on GPU-sized layers; dispatch of a tuned record by
the conv's autograd; the split form's launch contract proved."""

import fresh_interpreter
import pytest
import torch

import warpsmith.ops as wops
from warpsmith import dispatch
from warpsmith.core._triton import tl, triton
from warpsmith.db import TuningDB
from warpsmith.ops.conv import kernel as K
from warpsmith.ops.conv.variant import wgrad_config
from warpsmith.ops.conv.wgrad import CONV_WEIGHT_GRAD as S, VARIANTS, weight_grad_problem
from warpsmith.targets import get_target
from warpsmith.tune import tune
from warpsmith.verify.verifier import verify_candidate

H100 = get_target("h100")
V = VARIANTS[0]
P1 = {"pad_h": 1, "pad_end_h": 1, "pad_w": 1, "pad_end_w": 1}

GEOMETRIES = [
    ({"N": 2, "C": 6, "K": 8, "G": 2, "H": 9, "W": 7, "KH": 3, "KW": 3}, {**P1, "stride_h": 2}),
    ({"N": 3, "C": 5, "K": 4, "W": 23, "KW": 3}, {"dil_w": 2, "pad_w": 2, "pad_end_w": 1}),
    ({"N": 1, "C": 3, "K": 5, "D": 4, "H": 5, "W": 6, "KD": 2, "KH": 3, "KW": 2},
     {"stride_d": 2, "pad_h": 1, "pad_end_h": 1, "channels_last": True}),
    ({"N": 2, "C": 4, "K": 8, "G": 4, "H": 8, "W": 8, "KH": 3, "KW": 3}, {**P1, "channels_last": True}),
]


def check(p, cfg, seed=0):
    inputs = S.make_inputs(p, torch.Generator().manual_seed(seed))
    out = V.launch(inputs, p, cfg)
    ref64, scale = S.oracle(inputs, p.attrs)
    return out, S.contract(p).check(out, ref64, scale, S.reference(inputs, p.attrs))


@pytest.mark.parametrize("split", [1, 2, 4])
@pytest.mark.parametrize("shape, attrs", GEOMETRIES, ids=["2d-groups-stride", "1d-dilation", "3d-cl", "depthwise-cl"])
def test_every_split_meets_the_contract(shape, attrs, split):
    p = S.problem(shape, "float16", attrs)
    cfg = {**V.default_config(p, H100), "BLOCK_K": 16, "SPLIT_K": split}
    assert V.invalid(p, cfg, H100) is None
    out, (ok, msg) = check(p, cfg)
    assert out.shape == S.shapes(p)["w"] and ok, msg


def test_splits_sum_in_a_fixed_order_and_fp32_and_bf16_pass():
    p = S.problem(*GEOMETRIES[0][:1], "bfloat16", GEOMETRIES[0][1])
    cfg = {**V.default_config(p, H100), "BLOCK_K": 16, "SPLIT_K": 4}
    a, (ok, msg) = check(p, cfg)
    b, _ = check(p, cfg)
    assert ok, msg
    assert torch.equal(a, b)  # deterministic: no atomics
    p32 = S.problem(*GEOMETRIES[1][:1], "float32", GEOMETRIES[1][1])
    _, (ok, msg) = check(p32, {**V.default_config(p32, H100), "SPLIT_K": 2, "BLOCK_K": 16})
    assert ok, msg


def test_the_verifier_accepts_a_split_config():
    p = S.problem(*GEOMETRIES[0][:1], "float16", GEOMETRIES[0][1])
    cert = verify_candidate(S, p, V, {**V.default_config(p, H100), "BLOCK_K": 16, "SPLIT_K": 2}, H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]


@triton.jit
def last_split_dropped(p_ptr, c_ptr, bias_ptr, M, N, SPLIT_K, stride_cb, stride_cm, stride_cn, stride_bias,
                       BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, EMULATE: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < M * N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, SPLIT_K - 1):  # the last split's partial is never added
        acc += tl.load(p_ptr + s * M * N + idx, mask=mask, other=0.0)
    tl.store(c_ptr + (idx // N) * stride_cm + (idx % N) * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


def test_a_reduction_that_drops_the_last_split_is_rejected(monkeypatch):
    from warpsmith.ops.matmul import kernel as MK

    p = S.problem(*GEOMETRIES[0][:1], "float16", GEOMETRIES[0][1])
    cfg = {**V.default_config(p, H100), "BLOCK_K": 16, "SPLIT_K": 2}
    monkeypatch.setattr(MK, "matmul_splitk_reduce_kernel", last_split_dropped)
    cert = verify_candidate(S, p, V, cfg, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name in ("error_contract", "exact_identity"), failure
    assert "exceeds" in failure.status or "mismatch" in failure.status, failure


def test_the_heuristic_splits_long_reductions_into_few_tiles():
    """A ResNet-50 3x3 layer at batch 32 (64 -> 64 channels): 9 tiles of 64 x 64 and 100k pixels reduced:
    split 16 on an H100 (132 SMs); a tiny problem is not split; the split is a power of two, a valid config."""
    big = S.problem({"N": 32, "C": 64, "K": 64, "H": 56, "W": 56, "KH": 3, "KW": 3}, "bfloat16",
                    {**P1, "channels_last": True})
    M, N, Kr, G = V.gemm_shape(big)
    assert (M, N, Kr, G) == (64, 576, 32 * 56 * 56, 1)
    cfg = wgrad_config(Kr, M, N, G, H100, interpret=False)
    assert cfg["SPLIT_K"] == 16 and (cfg["BLOCK_M"], cfg["BLOCK_N"]) == (64, 64)
    assert wgrad_config(70, 4, 27, 2, H100, interpret=False)["SPLIT_K"] == 1
    assert V.invalid(big, V.default_config(big, H100), H100) is None
    p = S.problem(*GEOMETRIES[0][:1], "float16", GEOMETRIES[0][1])
    assert "exceeds the" in V.invalid(p, {**V.default_config(p, H100), "BLOCK_K": 64, "SPLIT_K": 16}, H100)


def test_the_problem_of_a_conv_backward_matches_its_geometry():
    x, dy = torch.randn(2, 6, 9, 7), torch.randn(2, 8, 5, 7)
    p = weight_grad_problem(x, dy, [8, 3, 3, 3], [2, 1], [1, 1], [1, 1], 2)
    assert p is not None and S.shapes(p)["y"] == (2, 8, 5, 7) and p.attrs["pad_end_h"] == 1
    wide = weight_grad_problem(x, torch.randn(2, 8, 6, 7), [8, 3, 3, 3], [2, 1], [1, 1], [1, 1], 2)
    assert wide.attrs["pad_end_h"] == 3  # dy's last row reads two padding rows: a conv with more trailing padding
    # rows of x past the last window (dy of height 3 needs a negative trailing padding): no problem of the
    # spec; the custom op then launches the kernel at its default, and the gradient is still right
    short = torch.randn(2, 8, 3, 7, dtype=torch.float64)
    assert weight_grad_problem(x, short, [8, 3, 3, 3], [2, 1], [1, 1], [1, 1], 2) is None
    dw = torch.ops.warpsmith.conv_weight_grad(short.float(), x, [8, 3, 3, 3], [2, 1], [1, 1], [1, 1], 2)
    x64 = x.double().requires_grad_()
    w64 = torch.zeros(8, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.conv2d(x64[:, :, :6], w64, stride=(2, 1), padding=(1, 1), groups=2)
    (ref,) = torch.autograd.grad(y, w64, short)
    assert torch.allclose(dw.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("transposed", [False, True])
def test_conv_autograd_weight_gradients_match_torch(transposed):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 7, 6, requires_grad=True)
    w = torch.randn(4, 3, 3, 2, requires_grad=True) if transposed else torch.randn(6, 2, 3, 2, requires_grad=True)
    kw = dict(stride=2, padding=1, groups=2)
    if transposed:
        y = wops.conv_transpose(x, w, None, 2, 1, 1, 2)
        yr = torch.nn.functional.conv_transpose2d(x, w, None, 2, 1, 1, 2)
    else:
        y, yr = wops.conv(x, w, **kw), torch.nn.functional.conv2d(x, w, **kw)
    g = torch.randn_like(yr)
    (dw,) = torch.autograd.grad(y, w, g)
    (dwr,) = torch.autograd.grad(yr, w, g)
    assert torch.allclose(dw, dwr, rtol=1e-4, atol=1e-4), (dw - dwr).abs().max()


def test_tune_records_a_verified_config_that_the_conv_backward_then_runs(tmp_path, monkeypatch):
    db_path = tmp_path / "wg.db"
    monkeypatch.setenv("WARPSMITH_DB", str(db_path))
    shape, attrs = GEOMETRIES[0]
    p = S.problem(shape, "float16", attrs)
    r = tune(p, budget=4, finalists=1, db=TuningDB(db_path))
    assert r.winner is not None and r.record_id is not None and r.certificate.passed
    dispatch.clear_cache()
    seen = []
    real = V.launch
    monkeypatch.setattr(type(V), "launch", lambda self, i, pr, c, out=None: seen.append(dict(c)) or real(i, pr, c, out))
    x = torch.randn(2, 6, 9, 7, dtype=torch.float16, requires_grad=True)
    w = torch.randn(8, 3, 3, 3, dtype=torch.float16, requires_grad=True)
    wops.conv(x, w, stride=(2, 1), padding=1, groups=2).float().sum().backward()
    assert seen and seen[0] == r.winner.config  # the conv's weight gradient dispatched the record


def test_the_split_contract_is_proved_in_bounds_and_free_of_int32_overflow():
    """In a fresh interpreter (z3's answers near a budget's edge depend on the process's history)."""
    code = """import json
from warpsmith.verify.symbolic import prove
from warpsmith.ops.conv import wgrad_contract as WC
out = [(o.name, o.subject, o.status) for c in WC.CONTRACTS for r in prove(c) for o in r.obligations]
print(json.dumps(out))
"""
    obs = fresh_interpreter.last_json(code)
    memory = [o for o in obs if o[0] in ("in_bounds", "int32_no_overflow")]
    assert memory and all(st == "proved" for *_, st in memory), memory
    assert not [o for o in obs if o[2].startswith("failed")], obs
    assert any(o[0] == "race_free" and "p_ptr" in o[1] for o in obs)
