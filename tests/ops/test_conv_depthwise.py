"""The ``depthwise`` conv variant (ops/conv/depthwise.py, depthwise_kernel.py) under the interpreter:
correctness against torch's conv{1,2,3}d and the spec's fp64 oracle under its error contract
(stride, padding, dilation, channel multiplier, both memory formats, every dtype, epilogues), its
validity domain, dispatch and search choosing it, its launch contract proved in a fresh interpreter,
and planted bugs rejected by the verifier and the prover for their named reasons."""
import os

import fresh_interpreter
import pytest
import torch
import torch.nn.functional as F

from warpsmith.core._triton import tl, triton
from warpsmith.core.errors import InvalidInputError
from warpsmith.ops import get_variant
from warpsmith.ops.conv import depthwise as DW
from warpsmith.ops.conv import depthwise_kernel as DK
from warpsmith.ops.conv.spec import CONV
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
V = get_variant("conv", "depthwise")
SMALL = dict(BLOCK_P=16, BLOCK_C=4, ORDER="pixels", num_warps=1)


def run(problem, cfg=None, seed=0):
    cfg = {**V.default_config(problem, H100), **(cfg or {})}
    assert V.rejection(problem, cfg, H100) is None
    inputs = CONV.make_inputs(problem, torch.Generator().manual_seed(seed))
    out = V.launch(inputs, problem, cfg)
    ref64, scale = CONV.oracle(inputs, problem.attrs)
    assert out.shape == ref64.shape and out.dtype == problem.dtype
    ok, msg = CONV.contract(problem).check(out, ref64, scale, CONV.reference(inputs, problem.attrs))
    assert ok, f"{problem.describe()} {cfg}: {msg}"
    return inputs, out


P1 = {"pad_h": 1, "pad_end_h": 1, "pad_w": 1, "pad_end_w": 1}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_2d_geometry_every_dtype_and_format(dtype, channels_last):
    """Stride, asymmetric padding, dilation and a channel multiplier of 2, with bias + relu fused."""
    p = CONV.problem({"N": 2, "C": 5, "K": 10, "G": 5, "H": 7, "W": 8, "KH": 3, "KW": 2}, dtype,
                     {"stride_h": 2, "pad_h": 1, "pad_end_h": 2, "pad_w": 2, "pad_end_w": 1, "dil_w": 3,
                      "channels_last": channels_last, "bias": True, "activation": "relu"})
    inputs, out = run(p, {"ORDER": "channels" if channels_last else "pixels"})
    if channels_last:  # read in place, written in the input's memory format
        assert inputs["x"].stride(1) == 1 and out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_matches_torch_conv(dims):
    """Against torch.nn.functional.conv{1,2,3}d itself (groups = C_in, multiplier 3 in 1-D)."""
    g = torch.Generator().manual_seed(dims)
    c, mult = 3, 3 if dims == 1 else 1
    spatial, window = {1: ((11,), (3,)), 2: ((6, 7), (3, 3)), 3: ((4, 5, 5), (2, 3, 2))}[dims]
    x = torch.randn(2, c, *spatial, generator=g)
    w = torch.randn(c * mult, 1, *window, generator=g)
    b = torch.randn(c * mult, generator=g)
    stride, pad, dil = (2,) * dims, (1,) * dims, (2,) + (1,) * (dims - 1)
    ref = (F.conv1d, F.conv2d, F.conv3d)[dims - 1](x, w, b, stride, pad, dil, c)
    axes = "dhw"[3 - dims:]
    shape = {"N": 2, "C": c, "K": c * mult, "G": c, **{a.upper(): s for a, s in zip(axes, spatial)},
             **{"K" + a.upper(): k for a, k in zip(axes, window)}}
    attrs = {"bias": True}
    for a, s, q, d in zip(axes, stride, pad, dil):
        attrs.update({f"stride_{a}": s, f"pad_{a}": q, f"pad_end_{a}": q, f"dil_{a}": d})
    p = CONV.problem(shape, "float32", attrs)
    out = V.launch({"x": x, "w": w, "bias": b}, p, {**V.default_config(p, H100), **SMALL})
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_residual_scale_and_silu_channels_last_3d():
    p = CONV.problem({"N": 1, "C": 4, "K": 8, "G": 4, "D": 3, "H": 4, "W": 5, "KD": 3, "KH": 1, "KW": 3},
                     "float16", {"pad_d": 1, "pad_end_d": 1, "pad_w": 1, "pad_end_w": 1, "stride_w": 2,
                                 "residual": True, "bias": True, "activation": "silu", "scale": 0.5,
                                 "channels_last": True})
    run(p, SMALL)


def test_trivial_problem_runs_at_the_default():
    p = CONV.problem({"N": 1, "C": 1, "K": 1, "W": 1, "KW": 1}, "float32", {})  # C / G = 1 with groups=1
    cfg = V.default_config(p, H100)
    assert V.rejection(p, cfg, H100) is None
    run(p)


def test_block_edges_and_exact_identity():
    """Tiles that cut neither pixels nor channels evenly; small-integer inputs are exact in fp32, so the
    result is bitwise the reference's."""
    p = CONV.problem({"N": 3, "C": 7, "K": 7, "G": 7, "H": 5, "W": 3, "KH": 3, "KW": 3}, "float16",
                     {**P1, "bias": True})
    inputs = CONV.exact_inputs(p, torch.Generator().manual_seed(3))
    for cfg in (SMALL, {"BLOCK_P": 32, "BLOCK_C": 2, "ORDER": "channels", "num_warps": 2}):
        out = V.launch(inputs, p, cfg)
        ref = CONV.reference({k: t.double() for k, t in inputs.items()}, p.attrs)
        assert torch.equal(out, ref.to(out.dtype)), cfg


def test_public_op_dispatches_to_depthwise_by_default():
    import warpsmith.ops as wops
    from warpsmith.dispatch import clear_cache, select
    from warpsmith.ops.conv.op import problem_of
    from warpsmith.ops.conv.variant import VARIANTS

    torch.manual_seed(0)
    x = torch.randn(2, 6, 7, 7).contiguous(memory_format=torch.channels_last)
    w = torch.randn(6, 1, 3, 3)
    clear_cache()
    p = problem_of(x, w, None, None, [1, 1], [1, 1], [1, 1], [1, 1], [0, 0], 6, False, "none", 1.0)
    assert select(p, VARIANTS).variant.name == "depthwise"
    torch.testing.assert_close(wops.conv(x, w, padding=1, groups=6), F.conv2d(x, w, padding=1, groups=6),
                               rtol=1e-4, atol=1e-4)
    grouped = problem_of(torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3), None, None, [1, 1], [0, 0], [0, 0],
                         [1, 1], [0, 0], 2, False, "none", 1.0)
    assert select(grouped, VARIANTS).variant.name == "implicit_gemm"  # C/G = 2: not depthwise


# ---- validity ----------------------------------------------------------------------------------
def test_validity_rejects_grouped_transposed_and_bad_tiles():
    dw = CONV.problem({"N": 1, "C": 4, "K": 4, "G": 4, "H": 5, "W": 5, "KH": 3, "KW": 3}, "float16", {})
    assert V.rejection(dw, V.default_config(dw, H100), H100) is None
    grouped = CONV.problem({"N": 1, "C": 4, "K": 4, "G": 2, "H": 5, "W": 5, "KH": 3, "KW": 3}, "float16", {})
    assert "one input channel per group" in V.rejection(grouped, SMALL, H100)
    dense = CONV.problem({"N": 1, "C": 4, "K": 4, "H": 5, "W": 5, "KH": 3, "KW": 3}, "float16", {})
    assert "one input channel per group" in V.rejection(dense, SMALL, H100)
    tr = CONV.problem({"N": 1, "C": 4, "K": 4, "G": 4, "H": 5, "W": 5, "KH": 3, "KW": 3}, "float16",
                      {"transposed": True})
    assert "transposed" in V.rejection(tr, SMALL, H100)
    assert "smaller than" in V.rejection(dw, {**SMALL, "BLOCK_P": 1, "BLOCK_C": 1, "num_warps": 2}, H100)
    assert "at most" in V.rejection(dw, {**SMALL, "BLOCK_P": 512}, H100)
    with pytest.raises(InvalidInputError, match="depthwise"):
        V.launch(CONV.make_inputs(grouped, torch.Generator().manual_seed(0)), grouped, SMALL)


def test_launcher_refuses_a_geometry_outside_the_domain():
    x, w = torch.randn(1, 2, 1, 1, 4), torch.randn(2, 1, 1, 1, 1)
    y = torch.empty(1, 2, 1, 1, 4 + 2 * 5000)
    with pytest.raises(InvalidInputError, match="pad_w"):
        DW.launch_depthwise(x, w, y, None, None, stride=(1, 1, 1), pad=(0, 0, 5000), dil=(1, 1, 1),
                            activation="none", scale=1.0, config=SMALL)
    big = DW.depthwise_limits(2**16, 1, 1, (1, 1, 1), (1, 2**8, 2**8), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1),
                              (1,) * 5, (1,) * 4, (1,) * 5, (1,) * 5, 1, 16, 4)
    with pytest.raises(InvalidInputError, match="output pixels"):
        DW._check(big)


def test_cost_model_counts_bytes_once_and_the_window_as_steps():
    from warpsmith.cost.cost import predict_ms

    h200 = get_target("h200")
    base = {"N": 32, "C": 96, "K": 96, "G": 96, "H": 56, "W": 56, "KH": 7, "KW": 7}
    p7 = CONV.problem(base, "bfloat16", {"pad_h": 3, "pad_end_h": 3, "pad_w": 3, "pad_end_w": 3,
                                         "channels_last": True})
    p3 = CONV.problem({**base, "KH": 3, "KW": 3}, "bfloat16", {**P1, "channels_last": True})
    cfg = V.default_config(p7, h200)
    w7 = V.work(p7, cfg, h200)
    assert w7.bytes_moved == 2 * (2 * 32 * 96 * 56 * 56 + 96 * 49) and w7.steps == 49
    assert 0 < predict_ms(V, p3, cfg, h200) < predict_ms(V, p7, cfg, h200) < float("inf")


# ---- search and the verifier --------------------------------------------------------------------
DW_PROBLEM = ({"N": 1, "C": 4, "K": 4, "G": 4, "H": 6, "W": 6, "KH": 3, "KW": 3},
              {"pad_h": 1, "pad_end_h": 1, "channels_last": True})


def test_search_explores_both_variants_and_the_verified_winner_is_dispatched(tmp_path, monkeypatch):
    """`tune` on a depthwise problem scores candidates of both depthwise and implicit_gemm; the best depthwise
    candidate passes the verifier; a search over the depthwise space records a verified winner, and dispatch
    runs that record."""
    from warpsmith import tune as T
    from warpsmith.db import TuningDB
    from warpsmith.dispatch import clear_cache, select
    from warpsmith.ops.conv.variant import VARIANTS

    p = CONV.problem(DW_PROBLEM[0], "float16", DW_PROBLEM[1])
    res = T.tune(p, target="h100", budget=24, finalists=1, db=None)
    assert {s.variant for s in res.leaderboard} == {"depthwise", "implicit_gemm"}
    assert res.winner is not None and res.certificate.passed
    best_dw = min((s for s in res.leaderboard if s.variant == "depthwise"), key=lambda s: s.ms)
    cert = verify_candidate(CONV, p, V, best_dw.config, H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]

    monkeypatch.setattr(T, "op_variants", lambda op: {"depthwise": V})
    db = tmp_path / "db.sqlite"
    res = T.tune(p, target="h100", budget=8, finalists=1, db=TuningDB(db))
    assert res.winner.variant == "depthwise" and res.certificate.passed and res.record_id is not None
    monkeypatch.setenv("WARPSMITH_DB", str(db))
    monkeypatch.setenv("WARPSMITH_TARGET", "h100")
    launched = []
    real_launch = type(V).launch
    monkeypatch.setattr(type(V), "launch", lambda self, i, prob, c, out=None: launched.append(dict(c)) or
                        real_launch(self, i, prob, c, out))
    clear_cache()
    try:
        choice = select(p, VARIANTS)
        # warpsmith.nn.Conv2d runs the same problem through dispatch: the record's config
        import warpsmith.nn as wnn

        torch.manual_seed(0)
        m = wnn.Conv2d(4, 4, 3, padding=(1, 0), groups=4, bias=False).half()
        x = torch.randn(1, 4, 6, 6).half().contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            y = m(x)
    finally:
        clear_cache()
    assert (choice.source, choice.variant.name, choice.config) == ("db", "depthwise", dict(res.winner.config))
    assert launched == [dict(res.winner.config)]
    ref = F.conv2d(x.float(), m.weight.detach().float(), padding=(1, 0), groups=4)
    torch.testing.assert_close(y.float(), ref, rtol=2e-3, atol=2e-3)


@triton.jit
def dilation_ignored(o, t, size, stride, pad, dil, TRANSPOSED: tl.constexpr):
    i = o * stride - pad + t  # taps one apart whatever the dilation
    return i, (i >= 0) & (i < size)


@triton.jit
def padding_mask_off_by_one(o, t, size, stride, pad, dil, TRANSPOSED: tl.constexpr):
    i = o * stride - pad + t * dil
    return i, (i >= 1) & (i < size)  # the first row counted as padding


@pytest.mark.parametrize("bug, attrs", [(dilation_ignored, {"dil_w": 2}), (padding_mask_off_by_one, P1)])
def test_planted_bugs_are_rejected_by_the_verifier(monkeypatch, bug, attrs):
    p = CONV.problem({"N": 1, "C": 3, "K": 6, "G": 3, "H": 6, "W": 7, "KH": 3, "KW": 3}, "float16", attrs)
    cfg = {**V.default_config(p, H100), **SMALL}
    assert V.rejection(p, cfg, H100) is None  # (the kernel as it is passes: the search test above)
    monkeypatch.setattr(DK, "input_coord", bug)
    cert = verify_candidate(CONV, p, V, cfg, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "exceeds" in failure.status, failure


# ---- the launch contract, proved as `warpsmith prove` proves it: in a fresh interpreter -----------
_PRELUDE = """
import json
from warpsmith.ops.conv import contract as C
from warpsmith.verify.symbolic import prove
from warpsmith.verify.symbolic.prove import Prover
"""


def _fresh(code: str):
    """What ``code`` (after the prelude) prints as its last line, parsed as JSON, run in a new interpreter
    (z3's answers near a budget's edge depend on the terms the process built before)."""
    return fresh_interpreter.last_json(_PRELUDE + code)


@pytest.mark.slow  # about a minute of z3; the quick tier proves the other conv contracts (test_conv_proofs.py)
def test_contract_is_proved_for_every_shape_in_the_domain():
    """Every obligation of a depthwise contract (in_bounds of each access, int32, and race freedom and
    coverage of y by the writer witness): channels-last output, the "channels" order, the full epilogue
    (the other combinations are in ``contract.CONTRACTS``, proved by `warpsmith prove`); and the domain is
    the launcher's own limits."""
    reports = _fresh("""
contract = C.depthwise([C._dw_meta("channels")], "ndhwc")
out = [[r.proved, r.constexprs, sorted({o.name for o in r.obligations}),
        len(r.obligations), [(o.name, o.subject, o.status, o.detail) for o in r.obligations if o.status != "proved"]]
       for r in prove(contract)]
print(json.dumps(out, default=str))
""")
    assert len(reports) == 1
    proved, _, names, count, unproved = reports[0]
    assert proved and unproved == [], unproved
    assert set(names) == {"in_bounds", "int32_no_overflow", "race_free", "coverage"}
    assert count == 8  # x, w, bias, residual, y; race_free, coverage; int32
    from warpsmith.ops.conv import contract as C

    strs = {str(f) for f in C.depthwise([C._dw_meta("pixels")], "ncdhw").domain}
    for what, value, bound in DW.depthwise_limits(C.BATCH, C.G, C.KG, C.I3, C.O3, C.K3, C.STRIDE, C.PAD, C.DIL,
                                                  C.SX, C.SWDW, C.SY, C.SR, C.SBIAS, 32, 16):
        assert str(value < bound) in strs, what


@triton.jit
def padding_mask_below_zero(o, t, size, stride, pad, dil, TRANSPOSED: tl.constexpr):
    i = o * stride - pad + t * dil
    return i, (i >= -1) & (i < size)  # the row before the input passes the padding mask


def test_planted_index_bug_fails_with_a_counterexample():
    here = os.path.dirname(os.path.abspath(__file__))
    status, detail, cex = _fresh(f"""
import sys
sys.path.insert(0, {here!r})
import test_conv_depthwise as T
from warpsmith.ops.conv import depthwise_kernel as DK
consts = C._dw_meta("pixels", epilogue=False)
contract = C.depthwise([consts], "ndhwc")
DK.input_coord = T.padding_mask_below_zero
p = Prover(contract, consts)
tr = p.trace()
assert tr.accesses[0].base == "x_ptr"
ob = p.in_bounds(tr, tr.accesses[0], 0)
print(json.dumps([ob.status, ob.detail, ob.counterexample], default=str))
""")
    assert status == "failed", (status, detail)
    assert cex["offset"] < 0 or cex["offset"] > cex["span"], cex  # the address really lies outside x
    assert any(cex[f"pad_{a}_plus_1"] >= 2 for a in "dhw"), cex
    assert "depthwise_kernel.py" in cex["source"], cex
