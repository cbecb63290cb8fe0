"""Attention (prefill / training) kernels under the interpreter, against the spec's fp64 oracle under
its error contract: forward and backward over dtypes, head dims, GQA ratios, ragged lengths, both
causal alignments, windows, softcap, packed sequences and score biases; the verifier on each
variant; planted bugs it must reject for their named reasons; the launch contracts' proofs."""
import pytest
import torch

from warpsmith.core._triton import tl, triton
from warpsmith.ops import get_op, get_variant
from warpsmith.ops.attention import kernel as K
from warpsmith.ops.attention.spec import visible, visible_pairs
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
DTYPES = ("float32", "float16", "bfloat16")
SMALL = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 2, "num_stages": 1}


def run(op, shape, dtype, attrs=None, dist="normal", cfg=None, seed=0):
    """Launch the op's flash variant; every output judged by its contract. Returns the outputs."""
    spec = get_op(op)
    p = spec.problem(shape, dtype, attrs or {})
    v = get_variant(op, "flash")
    cfg = cfg or v.default_config(p, H100)
    inputs = spec.make_inputs(p, torch.Generator().manual_seed(seed), dist)
    outs = v.launch(inputs, p, cfg)
    ref64, scale = spec.oracle(inputs, p.attrs)
    refs = spec.reference(inputs, p.attrs)
    for i, (c, o, r, s, rd) in enumerate(zip(spec.contract(p), outs, ref64, scale, refs)):
        assert o.shape == r.shape, (i, o.shape, r.shape)
        ok, msg = c.check(o, r, s, rd)
        assert ok, f"{op} output {i} {shape} {dtype} {attrs} {dist}: {msg}"
    return inputs, outs


def shape(sq, sk, d=32, b=1, h=1, g=1, dv=None):
    s = {"Sq": sq, "Sk": sk, "D": d, "B": b, "H": h, "G": g}
    if dv is not None:
        s["Dv"] = dv
    return s


# ---- forward and backward over the semantics ---------------------------------------------------
@pytest.mark.parametrize("op", ["attention", "attention_backward"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_gqa_ragged_causal(op, dtype):
    # 54 queries, 97 keys: no block size divides either; G = 3 query heads per key/value head
    run(op, shape(54, 97, d=64, g=3), dtype, {"causal": True}, cfg=SMALL)


@pytest.mark.parametrize("op", ["attention", "attention_backward"])
@pytest.mark.parametrize("sq, sk", [(1, 1), (1, 54), (54, 1), (97, 54)])
@pytest.mark.parametrize("align", ["bottom_right", "top_left"])
def test_both_causal_alignments_on_ragged_lengths(op, sq, sk, align):
    # Sq > Sk with bottom-right alignment leaves the first queries with no key: out 0, lse -inf
    run(op, shape(sq, sk), "float16", {"causal": True, "align": align}, cfg=SMALL)


@pytest.mark.parametrize("d, dv", [(32, 32), (80, 80), (96, 96), (128, 128), (192, 192), (256, 256), (64, 32), (40, 112)])
def test_head_dims_including_non_powers_of_two(d, dv):
    for op in ("attention", "attention_backward"):
        run(op, shape(19, 23, d=d, dv=dv), "bfloat16", {"causal": True}, cfg=SMALL)


@pytest.mark.parametrize("g", [1, 3, 8])
def test_gqa_ratios(g):
    for op in ("attention", "attention_backward"):
        run(op, shape(17, 21, g=g), "float16", {}, cfg=SMALL)


@pytest.mark.parametrize("attrs", [
    {"window_left": 7},  # non-causal, left side only
    {"window_left": 5, "window_right": 3},
    {"causal": True, "window_left": 9},
    {"causal": True, "window_left": 0},  # each query sees only its diagonal key
    {"causal": True, "align": "top_left", "window_left": 4, "window_right": 2},
])
def test_sliding_windows(attrs):
    for op in ("attention", "attention_backward"):
        run(op, shape(41, 50, g=2), "bfloat16", attrs, cfg=SMALL)


def test_window_with_more_queries_than_keys():
    """Bottom-right with Sq > Sk: whole query blocks see no key, and the window's lower edge lies past
    their upper one (the prover found the forward's unmasked key range running negative here)."""
    for op in ("attention", "attention_backward"):
        run(op, shape(60, 10), "float16", {"causal": True, "window_left": 3}, cfg=SMALL)
        run(op, shape(60, 10), "float16", {"window_left": 2, "window_right": 1}, cfg=SMALL)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softcap_and_scale(dtype):
    for op in ("attention", "attention_backward"):
        run(op, shape(37, 29, g=2), dtype, {"softcap": 2.0, "scale": 0.7, "causal": True}, dist="large", cfg=SMALL)


@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_sequences(dtype):
    # 5 ragged sequences (some maybe empty) in 97 query and 70 key tokens; bottom-right causal per sequence
    for op in ("attention", "attention_backward"):
        inputs, _ = run(op, shape(61, 45, b=4, g=2), dtype, {"varlen": True, "causal": True},
                        seed=DTYPES.index(dtype), cfg=SMALL)
        cu = inputs["cu_seqlens_q"]
        assert cu.dtype == torch.int32 and int(cu[-1]) == 61


def test_packed_self_attention_with_window_and_softcap():
    for op in ("attention", "attention_backward"):
        run(op, shape(50, 50, b=3, g=3), "bfloat16", {"varlen": True, "causal": True, "window_left": 6,
                                                   "softcap": 4.0}, cfg=SMALL)


@pytest.mark.parametrize("dtype", DTYPES)
def test_score_bias_with_fully_masked_rows(dtype):
    # the bias masks a fifth of the pairs and the whole first row of every head
    run("attention_backward", shape(25, 30, g=2), dtype, {"bias": True}, cfg=SMALL)
    out, lse = run("attention", shape(25, 30, b=2, g=2), dtype, {"bias": True}, cfg=SMALL)[1]
    assert torch.equal(out[:, :, 0], torch.zeros_like(out[:, :, 0])) and bool((lse[:, :, 0] == float("-inf")).all())


@pytest.mark.parametrize("op", ["attention", "attention_backward"])
@pytest.mark.parametrize("dist", ["uniform", "outliers", "tiny", "large", "specials"])
def test_every_input_distribution(op, dist):
    run(op, shape(30, 45, g=2), "float16", {"causal": True}, dist=dist, cfg=SMALL)


def test_special_values_follow_torch():
    """NaN in q reaches its row only; -inf scores everywhere give 0 (torch >= 2.5); a NaN in v reaches
    every row that sees its key (and may reach rows of its query block that mask it)."""
    spec, v = get_op("attention"), get_variant("attention", "flash")
    p = spec.problem(shape(40, 40), "float32", {"causal": True})
    x = spec.make_inputs(p, torch.Generator().manual_seed(0))
    x["q"][0, 0, 5, 3] = float("nan")
    x["v"][0, 0, 20, 7] = float("nan")
    out, lse = v.launch(x, p, SMALL)
    rows_nan = torch.isnan(out[0, 0]).any(-1)
    assert rows_nan[5] and torch.isnan(lse[0, 0, 5])
    assert bool(torch.isnan(out[0, 0, 20:, 7]).all())  # every row that sees key 20
    assert not bool(rows_nan[:16][torch.arange(16) != 5].any())  # query blocks before key 20's block never read it
    assert not bool(torch.isnan(lse[0, 0, torch.arange(40) != 5]).any())
    # a row whose visible scores are all -inf: torch's SDPA gives 0 there, and so does the kernel
    x = spec.make_inputs(p, torch.Generator().manual_seed(1))
    x["q"][0, 0, 0] = 0.0
    x["k"][0, 0, 0, 0] = float("-inf")
    x["q"][0, 0, 0, 0] = 1.0
    out, lse = v.launch(x, p, SMALL)
    assert torch.equal(out[0, 0, 0], torch.zeros_like(out[0, 0, 0])) and lse[0, 0, 0] == float("-inf")


def test_visible_pairs_counts_the_mask():
    for attrs in ({}, {"causal": True}, {"causal": True, "align": "top_left"}, {"window_left": 3, "window_right": 1},
                  {"causal": True, "window_left": 2}):
        for sq, sk in ((5, 9), (9, 5), (7, 7)):
            assert visible_pairs(attrs, sq, sk) == int(visible(attrs, sq, sk).sum()), (attrs, sq, sk)


def test_merge_attention_states_kernel():
    for dtype in DTYPES:
        for dist in ("normal", "specials", "large"):
            spec = get_op("merge_attention_states")
            p = spec.problem({"M": 37, "N": 80}, dtype)
            v = get_variant("merge_attention_states", "rows")
            x = spec.make_inputs(p, torch.Generator().manual_seed(0), dist)
            out = v.launch(x, p, v.default_config(p, H100))
            ref64, scale = spec.oracle(x, {})
            for c, o, r, s, rd in zip(spec.contract(p), out, ref64, scale, spec.reference(x, {})):
                ok, msg = c.check(o, r, s, rd)
                assert ok, (dtype, dist, msg)
            if dist != "specials":  # both sides empty: 0 and -inf (a NaN in such a row would still be NaN: 0 * NaN)
                assert torch.equal(out[0][-1], torch.zeros_like(out[0][-1])) and out[1][-1] == float("-inf")


def test_backward_is_deterministic_and_tiles_agree():
    spec, v = get_op("attention_backward"), get_variant("attention_backward", "flash")
    p = spec.problem(shape(33, 33, g=2), "float32", {"causal": True})
    x = spec.make_inputs(p, torch.Generator().manual_seed(0))
    a = v.launch(x, p, SMALL)
    b = v.launch(x, p, SMALL)
    c = v.launch(x, p, {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2})
    assert v.is_deterministic(SMALL)
    for t, u, w in zip(a, b, c):
        assert torch.equal(t, u)
        torch.testing.assert_close(t, w, rtol=1e-5, atol=1e-5)


# ---- the verifier ------------------------------------------------------------------------------
@pytest.mark.parametrize("op, attrs, dtype", [
    ("attention_backward", {"causal": True, "window_left": 5, "softcap": 3.0}, "float16"),
    # slow: the forward variant is verified whole in the quick tier by test_the_planted_bugs_harness_can_pass,
    # and varlen's numbers by the packed-sequence tests (test_attention_op.py)
    pytest.param("attention", {"varlen": True, "causal": True}, "float32", marks=pytest.mark.slow),
])
def test_verifier_accepts_the_variants(op, attrs, dtype):
    spec, v = get_op(op), get_variant(op, "flash")
    p = spec.problem(shape(20, 20, b=2, g=2), dtype, attrs)
    cert = verify_candidate(spec, p, v, SMALL, H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]
    st = {c.name: c.status for c in cert.checks}
    assert st["error_contract"] == "tested(6 trials)" and st["odd_shapes"].startswith("tested(")


def test_verifier_accepts_merge():
    spec, v = get_op("merge_attention_states"), get_variant("merge_attention_states", "rows")
    p = spec.problem({"M": 20, "N": 64}, "bfloat16")
    cert = verify_candidate(spec, p, v, v.default_config(p, H100), H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]


# ---- planted bugs: each must be rejected by the verifier for its reason --------------------------
@triton.jit
def causal_off_by_one(offs_i, offs_j, len_i, len_j, off, win_lo, win_hi, HAS_LO: tl.constexpr, HAS_HI: tl.constexpr):
    mask = (offs_i[:, None] < len_i) & (offs_j[None, :] < len_j)
    if HAS_HI:  # the diagonal key itself masked out
        mask = mask & (offs_j[None, :] < offs_i[:, None] + (off + win_hi))
    if HAS_LO:
        mask = mask & (offs_j[None, :] >= offs_i[:, None] + (off - win_lo))
    return mask


@triton.jit
def window_edge(offs_i, offs_j, len_i, len_j, off, win_lo, win_hi, HAS_LO: tl.constexpr, HAS_HI: tl.constexpr):
    mask = (offs_i[:, None] < len_i) & (offs_j[None, :] < len_j)
    if HAS_HI:
        mask = mask & (offs_j[None, :] <= offs_i[:, None] + (off + win_hi))
    if HAS_LO:  # the window's first key dropped
        mask = mask & (offs_j[None, :] > offs_i[:, None] + (off - win_lo))
    return mask


@triton.jit
def no_rescale_of_running_sum(m_i, l_i, s):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_base = tl.maximum(m_new, -3.4028234663852886e38)
    alpha = tl.exp2(m_i - m_base)
    p = tl.exp2(s - m_base[:, None])
    return m_new, alpha, p, l_i + tl.sum(p, 1)  # l not rescaled when the max grows


@triton.jit
def interleaved_gqa_heads(h, G):
    return h % (tl.num_programs(1) // G)  # head h -> h mod H: torch's repeat_interleave order is h // G


@pytest.mark.parametrize("helper, bug, attrs", [
    ("visible_mask", causal_off_by_one, {"causal": True}),
    ("visible_mask", window_edge, {"window_left": 6}),
    ("online_softmax_step", no_rescale_of_running_sum, {}),
    ("kv_head", interleaved_gqa_heads, {}),
])
def test_planted_bugs_are_rejected(monkeypatch, helper, bug, attrs):
    spec, v = get_op("attention"), get_variant("attention", "flash")
    p = spec.problem(shape(33, 33, h=2, g=3), "float16", attrs)
    monkeypatch.setattr(K, helper, bug)
    cert = verify_candidate(spec, p, v, SMALL, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "exceeds" in failure.status, failure


def test_the_planted_bugs_harness_can_pass():
    """The problem of the planted bugs (causal and window both on) passes without a bug: the test above
    can tell, and the forward variant is accepted whole (every check)."""
    spec, v = get_op("attention"), get_variant("attention", "flash")
    p = spec.problem(shape(24, 24, h=2, g=3), "float16", {"causal": True, "window_left": 6})
    cert = verify_candidate(spec, p, v, SMALL, H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]


# ---- launch contracts ----------------------------------------------------------------------------
def test_launch_contracts_prove_in_bounds_and_int32():
    """The packed forward with the window and softcap paths (``warpsmith prove
    warpsmith.ops.attention.contract`` proves all of CONTRACTS). The solver's budget is counted in z3's
    resource units (``verify/symbolic/budget.py``), so a loaded machine proves what an idle one does."""
    from warpsmith.ops.attention.contract import CONTRACTS
    from warpsmith.verify.symbolic import prove

    for c in (CONTRACTS[1],):
        for rep in prove(c, timeout_ms=30_000):
            for o in rep.obligations:
                if o.name in ("in_bounds", "int32_no_overflow", "race_free", "trace"):
                    assert o.status == "proved", (c.name, rep.constexprs, o.name, o.subject, o.status, o.detail)


# ---- cost model ----------------------------------------------------------------------------------
def test_cost_model_ranks_configs_and_counts_causal_skipping():
    from warpsmith.cost.cost import predict_ms

    h200 = get_target("h200")
    for op in ("attention", "attention_backward"):
        spec, v = get_op(op), get_variant(op, "flash")
        full = spec.problem(shape(4096, 4096, d=128, b=4, h=16), "bfloat16", {})
        causal = spec.problem(shape(4096, 4096, d=128, b=4, h=16), "bfloat16", {"causal": True})
        cfg = v.default_config(full, h200)
        t_full, t_causal = predict_ms(v, full, cfg, h200), predict_ms(v, causal, cfg, h200)
        assert 0 < t_causal < 0.7 * t_full < float("inf")  # the causal kernel skips about half the blocks
        assert spec.flops(causal) == pytest.approx(spec.flops(full) * (4096 + 1) / (2 * 4096))
        tiny = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 2, "num_stages": 1}
        assert predict_ms(v, full, tiny, h200) > t_full  # small tiles reuse less
        assert predict_ms(v, full, {**cfg, "BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 4}, h200) == float("inf")
