"""Decode attention kernels under the interpreter: ragged lengths, page sizes, GQA ratios, head dims,
NHD/HND, block tables and CSR, split counts, MLA, against the spec's reference under its contract;
the verifier on both ops; planted bugs it must reject for their named reasons."""
import pytest
import torch

from warpsmith.core._triton import tl, triton
from warpsmith.ops import get_op, get_variant
from warpsmith.ops.attention.decode.kernel import FLT_MAX
from warpsmith.ops.attention.decode.plan import plan_static
from warpsmith.ops.attention.decode.variant import SplitKV
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
LENS = [1, 54, 97]  # ragged: one token, a partial last page, the full capacity


def check(op, p, cfg, inputs, variant=None):
    spec = get_op(op)
    v = variant or get_variant(op, "split_kv")
    outs = v.launch(inputs, p, cfg)
    ref64, scale = spec.oracle(inputs, p.attrs)
    for out, (shape, dtype), c, r64, s, r in zip(outs, spec.outputs(p), spec.contract(p), ref64, scale,
                                                  spec.reference(inputs, p.attrs)):
        assert out.shape == shape and out.dtype == dtype
        ok, msg = c.check(out, r64, s, r)
        assert ok, (op, p.describe(), cfg, msg)
    return outs


def cfg(p, op="attention_decode", **over):
    v = get_variant(op, "split_kv")
    return {**v.default_config(p, H100), "BLOCK_N": 16, **over}


# (dtype, Hk, G, D, cache, layout, table, page size, NUM_SPLITS)
CASES = [
    ("float16", 2, 1, 64, "contiguous", "NHD", "block_table", 16, 1),
    ("bfloat16", 2, 3, 64, "paged", "NHD", "block_table", 16, 4),
    ("float32", 1, 8, 128, "paged", "HND", "csr", 1, 2),
    ("float16", 2, 3, 128, "paged", "HND", "block_table", 1, 1),
    ("bfloat16", 1, 8, 64, "paged", "NHD", "csr", 16, 8),
    ("float16", 1, 8, 64, "contiguous", "NHD", "block_table", 16, 2),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-G{c[2]}-D{c[3]}-{c[4]}-{c[5]}-{c[6]}-P{c[7]}-s{c[8]}" for c in CASES])
def test_ragged_lengths_layouts_tables_and_splits(case):
    dtype, hk, g, d, cache, layout, table, page, splits = case
    spec = get_op("attention_decode")
    p = spec.problem({"B": 3, "Hk": hk, "G": g, "S": 97, "D": d}, dtype,
                     {"cache": cache, "layout": layout, "table": table, "page_size": page})
    x = spec.inputs_for_lens(p, LENS, torch.Generator().manual_seed(CASES.index(case)))
    check("attention_decode", p, cfg(p, NUM_SPLITS=splits), x)


def test_zero_length_sequences_give_zero_and_minus_inf_and_softcap_and_scale():
    spec = get_op("attention_decode")
    p = spec.problem({"B": 3, "Hk": 1, "G": 2, "S": 20, "D": 16}, "float16",
                     {"cache": "paged", "page_size": 4, "table": "csr", "softcap": 2.5, "scale": 0.7})
    x = spec.inputs_for_lens(p, [0, 20, 0], torch.Generator().manual_seed(3))
    out, lse = check("attention_decode", p, cfg(p, NUM_SPLITS=2), x)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.isinf(lse[0]).all() and (lse[0] < 0).all()
    assert torch.isfinite(out[1]).all()


def test_special_values_follow_torch():
    spec = get_op("attention_decode")
    p = spec.problem({"B": 2, "Hk": 2, "G": 2, "S": 24, "D": 16}, "float32", {"cache": "contiguous"})
    for seed in range(3):
        check("attention_decode", p, cfg(p, NUM_SPLITS=2), spec.make_inputs(p, torch.Generator().manual_seed(seed),
                                                                          "specials"))


def test_mla_small():
    spec = get_op("attention_decode_mla")
    for dtype, table, page, splits in (("bfloat16", "block_table", 16, 2), ("float16", "csr", 1, 1)):
        p = spec.problem({"B": 3, "H": 16, "S": 97, "Dc": 64, "Dr": 16}, dtype, {"table": table, "page_size": page})
        x = spec.inputs_for_lens(p, LENS, torch.Generator().manual_seed(5))
        check("attention_decode_mla", p, cfg(p, "attention_decode_mla", NUM_SPLITS=splits, num_warps=4), x)


def test_mla_head_blocks_when_heads_exceed_64():
    spec = get_op("attention_decode_mla")
    p = spec.problem({"B": 1, "H": 80, "S": 9, "Dc": 32, "Dr": 16}, "bfloat16", {"page_size": 4})
    x = spec.make_inputs(p, torch.Generator().manual_seed(6))
    c = cfg(p, "attention_decode_mla", BLOCK_H=32, NUM_SPLITS=1)
    assert SplitKV("attention_decode_mla").head_blocks(p, c) == 3
    check("attention_decode_mla", p, c, x)


@pytest.mark.parametrize("op, shape, dtype, attrs", [
    ("attention_decode", {"B": 3, "Hk": 2, "G": 3, "S": 24, "D": 16}, "bfloat16",
     {"cache": "paged", "page_size": 4, "layout": "HND", "softcap": 5.0}),
    ("attention_decode_mla", {"B": 2, "H": 4, "S": 30, "Dc": 32, "Dr": 16}, "float16", {"page_size": 4, "table": "csr"}),
])
def test_verify_candidate_passes(op, shape, dtype, attrs):
    spec, v = get_op(op), get_variant(op, "split_kv")
    p = spec.problem(shape, dtype, attrs)
    cert = verify_candidate(spec, p, v, cfg(p, op, NUM_SPLITS=2), H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]
    st = {c.name: c.status for c in cert.checks}
    assert st["error_contract"].startswith("tested") and st["odd_shapes"].startswith("tested")


# ---- planted bugs: each must be rejected by the verifier, for its named reason ------------------------------
class StalePage(SplitKV):
    """A stale block table: the entry of each sequence's last page still names the page it held before."""

    def launch(self, inputs, problem, config, out=None):
        table = inputs["block_table"].clone()
        nb = inputs["k_cache"].shape[0]
        P = problem.attrs["page_size"]
        for b, n in enumerate(inputs["seq_lens"].tolist()):
            if n:
                table[b, (n - 1) // P] = (table[b, (n - 1) // P] + 1) % nb
        return super().launch({**inputs, "block_table": table}, problem, config, out)


class WholeLastPage(SplitKV):
    """The last partial page read whole: kv_last_page_len taken as page_size."""

    def launch(self, inputs, problem, config, out=None):
        full = torch.full_like(inputs["kv_last_page_len"], problem.attrs["page_size"])
        full = torch.where(inputs["kv_last_page_len"] > 0, full, inputs["kv_last_page_len"])
        return super().launch({**inputs, "kv_last_page_len": full}, problem, config, out)


class WrongGqaMapping(SplitKV):
    """Query head h reads KV head h % Hk instead of h // G."""

    def launch(self, inputs, problem, config, out=None):
        hk, g = problem.shape["Hk"], problem.shape["G"]
        h = torch.arange(hk * g)
        where = (h % hk) * g + h // hk  # the position whose correct KV head is h % Hk
        q = torch.empty_like(inputs["q"])
        q[:, where] = inputs["q"]
        o, lse = super().launch({**inputs, "q": q}, problem, config)
        out[0].copy_(o[:, where])
        out[1].copy_(lse[:, where])
        return out


@triton.jit
def no_rescale_reduce_kernel(o_part_ptr, lse_part_ptr, indptr_ptr, out_ptr, lse_ptr, DV,
                             stride_pw, stride_ph, stride_pd, stride_lpw, stride_lph,
                             stride_ob, stride_oh, stride_od, stride_lb, stride_lh,
                             BLOCK_DV: tl.constexpr, EMULATE: tl.constexpr):
    """The merge without exp(lse_i - max) rescaling: each non-empty partial weighs 1."""
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    lo = tl.load(indptr_ptr + b).to(tl.int64)
    hi = tl.load(indptr_ptr + b + 1).to(tl.int64)
    dv = tl.arange(0, BLOCK_DV)
    acc = tl.zeros((BLOCK_DV,), tl.float32)
    l = 0.0
    mx = -FLT_MAX
    for i in range(lo, hi):
        item = lo + (i - lo)
        lse_i = tl.load(lse_part_ptr + item * stride_lpw + h * stride_lph)
        wt = (lse_i > -FLT_MAX).to(tl.float32)
        mx = tl.maximum(mx, lse_i)
        l += wt
        acc += wt * tl.load(o_part_ptr + item * stride_pw + h * stride_ph + dv * stride_pd, mask=dv < DV, other=0.0)
    tl.store(out_ptr + b * stride_ob + h * stride_oh + dv * stride_od, (acc / tl.maximum(l, 1.0)).to(
        out_ptr.dtype.element_ty), mask=dv < DV)
    tl.store(lse_ptr + b * stride_lb + h * stride_lh, mx)


class MissingRescale(SplitKV):
    def _reduce(self, o_part, lse_part, pl, o, lse, B, hq, dv, emulate):
        no_rescale_reduce_kernel[(B, hq)](o_part, lse_part, pl.batch_indptr, o, lse, dv, *o_part.stride(),
                                          *lse_part.stride(), *o.stride(), *lse.stride(),
                                          BLOCK_DV=triton.next_power_of_2(dv), EMULATE=emulate)


@pytest.mark.parametrize("bug, attrs, splits, reason", [
    (StalePage, {"cache": "paged", "table": "block_table", "page_size": 4}, 1, "exceeds contract"),
    (WholeLastPage, {"cache": "paged", "table": "csr", "page_size": 4, "layout": "HND"}, 2, "exceeds contract"),
    (WrongGqaMapping, {"cache": "contiguous"}, 2, "exceeds contract"),
    (MissingRescale, {"cache": "paged", "page_size": 2}, 4, "exceeds contract"),
])
def test_planted_bugs_are_rejected(bug, attrs, splits, reason):
    spec = get_op("attention_decode")
    p = spec.problem({"B": 3, "Hk": 2, "G": 2, "S": 30, "D": 16}, "float16", attrs)
    v = bug("attention_decode")
    cert = verify_candidate(spec, p, v, cfg(p, NUM_SPLITS=splits), H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and reason in failure.status, \
        (failure.name, failure.status)


def test_the_buggy_variants_are_the_correct_one_without_their_bug():
    """Each planted bug changes something the inputs exercise: the same inputs, correct launch, pass."""
    spec = get_op("attention_decode")
    p = spec.problem({"B": 3, "Hk": 2, "G": 2, "S": 30, "D": 16}, "float16", {"cache": "paged", "page_size": 4})
    x = spec.make_inputs(p, torch.Generator().manual_seed(0))
    check("attention_decode", p, cfg(p, NUM_SPLITS=4), x)
    pl = plan_static(x["seq_lens"], 4, 16)
    assert int((pl.work_end > pl.work_start).sum()) > 3  # some sequence is really split: the merge matters


# ---- several query tokens per sequence (speculative decoding): causal among the step's tokens -------------
@pytest.mark.parametrize("op, shape, attrs, splits", [
    ("attention_decode", {"B": 3, "Hk": 2, "G": 3, "S": 40, "D": 32, "T": 3}, {"cache": "paged", "page_size": 4}, 2),
    ("attention_decode", {"B": 3, "Hk": 1, "G": 8, "S": 40, "D": 16, "T": 4},
     {"cache": "paged", "layout": "HND", "table": "csr", "page_size": 1}, 1),
    ("attention_decode", {"B": 3, "Hk": 2, "G": 1, "S": 40, "D": 16, "T": 2}, {"cache": "contiguous"}, 4),
    ("attention_decode_mla", {"B": 3, "H": 16, "S": 40, "Dc": 32, "Dr": 16, "T": 2}, {"page_size": 16}, 2),
])
def test_several_query_tokens_per_sequence(op, shape, attrs, splits):
    spec = get_op(op)
    p = spec.problem(shape, "float16", attrs)
    T = shape["T"]
    x = spec.inputs_for_lens(p, [1, 23, 40], torch.Generator().manual_seed(7))  # L_b = 1 < T: early tokens see nothing
    out, lse = check(op, p, cfg(p, op, NUM_SPLITS=splits, num_warps=4), x)
    assert out.shape[:2] == (3, T) and lse.shape[:2] == (3, T)
    assert torch.isinf(lse[0, :T - 1]).all() and torch.equal(out[0, :T - 1], torch.zeros_like(out[0, :T - 1]))
    # the last query token of each sequence is plain one-token decode
    one = spec.problem({k: v for k, v in shape.items() if k != "T"}, "float16", attrs)
    qk = ("q_nope", "q_pe") if op.endswith("mla") else ("q",)
    single = get_variant(op, "split_kv").launch({**x, **{k: x[k][:, -1] for k in qk}}, one, cfg(one, op, num_warps=4))
    assert torch.allclose(single[0].float(), out[:, -1].float(), atol=2e-3)
    assert torch.allclose(single[1], lse[:, -1], atol=1e-5)


@pytest.mark.slow  # quick tier: the verifier accepts one-token decode (above), several tokens' numbers are checked above
def test_verify_candidate_passes_with_several_query_tokens():
    spec, v = get_op("attention_decode"), get_variant("attention_decode", "split_kv")
    p = spec.problem({"B": 2, "Hk": 2, "G": 2, "S": 24, "D": 16, "T": 3}, "bfloat16", {"cache": "paged", "page_size": 4})
    cert = verify_candidate(spec, p, v, cfg(p, NUM_SPLITS=2), H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]
