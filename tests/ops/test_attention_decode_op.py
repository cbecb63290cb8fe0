"""The public decode ops and their custom ops: every cache form through ``warpsmith.ops``, plans, fake
kernels, argument checks; the variant's space, validity and cost model."""
import pytest
import torch

import warpsmith.ops as wops
from warpsmith.errors import InvalidInputError
from warpsmith.ops import default_variant, get_op, get_variant
from warpsmith.ops.attention.decode_plan import plan_balanced, plan_static
from warpsmith.targets import get_target

H100, H200 = get_target("h100"), get_target("h200")


def _close(out, ref, dtype):
    tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float32: 1e-5}[dtype]
    assert torch.allclose(out.float(), ref.float(), atol=tol, rtol=tol), (out - ref).abs().max()


@pytest.mark.parametrize("attrs", [{"cache": "contiguous"}, {"cache": "paged", "layout": "NHD", "page_size": 16},
                                   {"cache": "paged", "layout": "HND", "table": "csr", "page_size": 1}])
def test_attention_decode_every_cache_form(attrs):
    spec = get_op("attention_decode")
    p = spec.problem({"B": 3, "Hk": 2, "G": 3, "S": 37, "D": 32}, "float16", attrs)
    x = spec.inputs_for_lens(p, [1, 20, 37], torch.Generator().manual_seed(0))
    kw = {k: x[k] for k in ("block_table", "kv_indptr", "kv_indices", "kv_last_page_len") if k in x}
    out, lse = wops.attention_decode(x["q"], x["k_cache"], x["v_cache"], x.get("seq_lens"), layout=attrs.get("layout", "NHD"),
                                     return_lse=True, **kw)
    ref, ref_lse = spec.reference(x, {**p.attrs, "scale": 32 ** -0.5})
    _close(out, ref, torch.float16)
    assert torch.allclose(lse, ref_lse, atol=1e-5)
    # a balanced plan (one per decode step, reused across layers) gives the same result
    lens = [1, 20, 37]
    out2 = wops.attention_decode(x["q"], x["k_cache"], x["v_cache"], x.get("seq_lens"), layout=attrs.get("layout", "NHD"),
                                 plan=plan_balanced(lens, 16, max_items=8), **kw)
    _close(out2, ref, torch.float16)


def test_mla_decode_and_softcap_and_scale():
    spec = get_op("attention_decode_mla")
    p = spec.problem({"B": 2, "H": 16, "S": 20, "Dc": 64, "Dr": 16}, "bfloat16", {"page_size": 4})
    x = spec.make_inputs(p, torch.Generator().manual_seed(1))
    out = wops.mla_decode(x["q_nope"], x["q_pe"], x["ckv_cache"], x["kpe_cache"], x["seq_lens"],
                          block_table=x["block_table"], scale=0.2, softcap=3.0)
    ref, _ = spec.reference(x, {**p.attrs, "scale": 0.2, "softcap": 3.0})
    _close(out, ref, torch.bfloat16)
    # a combined [NB, P, Dc + Dr] cache split into views
    both = torch.cat([x["ckv_cache"], x["kpe_cache"]], dim=-1)
    out2 = wops.mla_decode(x["q_nope"], x["q_pe"], both[..., :64], both[..., 64:], x["seq_lens"],
                           block_table=x["block_table"], scale=0.2, softcap=3.0,
                           plan=plan_static(x["seq_lens"], 3, 16))
    _close(out2, ref, torch.bfloat16)


def test_fake_kernels_give_shapes_without_running():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(4, 8, 64, dtype=torch.float16)
        kc = torch.empty(10, 16, 2, 64, dtype=torch.float16)
        out, lse = torch.ops.warpsmith.attention_decode(q, kc, kc, torch.empty(4, dtype=torch.int32),
                                                        torch.empty(4, 3, dtype=torch.int32), None, None, None,
                                                        None, None, None, None, "NHD", 0.125, 0.0)
        assert out.shape == (4, 8, 64) and lse.shape == (4, 8) and lse.dtype == torch.float32
        qn, qp = torch.empty(2, 16, 512, dtype=torch.bfloat16), torch.empty(2, 16, 64, dtype=torch.bfloat16)
        o, l = torch.ops.warpsmith.attention_decode_mla(qn, qp, torch.empty(9, 64, 512, dtype=torch.bfloat16),
                                                        torch.empty(9, 64, 64, dtype=torch.bfloat16), None, None,
                                                        torch.empty(3, dtype=torch.int32), torch.empty(5, dtype=torch.int32),
                                                        torch.empty(2, dtype=torch.int32), None, None, None, None,
                                                        0.07, 0.0)
        assert o.shape == (2, 16, 512) and l.shape == (2, 16)


def test_bad_arguments_are_refused():
    q = torch.randn(2, 4, 16, dtype=torch.float16)
    kc = torch.randn(2, 2, 8, 16, dtype=torch.float16)
    lens = torch.tensor([3, 8], dtype=torch.int32)
    with pytest.raises(InvalidInputError, match="seq_lens"):
        wops.attention_decode(q, kc, kc)
    with pytest.raises(InvalidInputError, match="dtype of k_cache"):
        wops.attention_decode(q, kc.float(), kc, lens)
    with pytest.raises(InvalidInputError, match="layout"):
        wops.attention_decode(q, kc, kc, lens, layout="NCHW")
    with pytest.raises(InvalidInputError, match="page size"):
        pages = torch.randn(4, 3, 2, 16, dtype=torch.float16)
        wops.attention_decode(q, pages, pages, lens, block_table=torch.zeros(2, 3, dtype=torch.int32))
    with pytest.raises(InvalidInputError, match="dtype of seq_lens"):
        wops.attention_decode(q, kc, kc, lens.long())
    with pytest.raises(InvalidInputError, match="CSR"):
        pages = torch.randn(4, 4, 2, 16, dtype=torch.float16)
        wops.attention_decode(q, pages, pages, kv_indptr=torch.tensor([0, 1, 2], dtype=torch.int32))
    with pytest.raises(InvalidInputError, match="page tables"):
        wops.mla_decode(q, q[..., :4], kc[0], kc[0, ..., :4], lens)


# ---- space, validity, cost model -------------------------------------------------------------------------
@pytest.mark.parametrize("op, shape, attrs", [
    ("attention_decode", {"B": 1, "Hk": 8, "G": 4, "S": 32768, "D": 128}, {"cache": "paged"}),
    ("attention_decode", {"B": 64, "Hk": 8, "G": 8, "S": 4096, "D": 128}, {"cache": "contiguous"}),
    ("attention_decode", {"B": 1, "Hk": 1, "G": 1, "S": 1, "D": 1}, {"cache": "paged", "page_size": 1}),
    ("attention_decode_mla", {"B": 4, "H": 128, "S": 8192, "Dc": 512, "Dr": 64}, {"page_size": 64}),
    ("attention_decode_mla", {"B": 32, "H": 16, "S": 2048, "Dc": 512, "Dr": 64}, {"page_size": 64, "table": "csr"}),
])
def test_defaults_are_valid_and_in_their_space_and_bytes_cover_the_minimum(op, shape, attrs):
    p = get_op(op).problem(shape, "bfloat16", attrs)
    v = default_variant(p, H200)
    c = v.default_config(p, H200)
    assert v.rejection(p, c, H200) is None and v.space(p, H200).project(c) == c, (shape, c, v.rejection(p, c, H200))
    assert v.work(p, c, H200).bytes_moved >= get_op(op).min_bytes(p) * 0.999


def test_cost_model_ranks_splits_for_a_short_batch_and_rejects_oversized_tiles():
    from warpsmith.cost.cost import predict_ms

    v = get_variant("attention_decode", "split_kv")
    p = get_op("attention_decode").problem({"B": 1, "Hk": 8, "G": 4, "S": 32768, "D": 128}, "bfloat16",
                                           {"cache": "paged"})
    base = {"BLOCK_N": 64, "BLOCK_H": 16, "num_warps": 4, "num_stages": 2}
    one = predict_ms(v, p, {**base, "NUM_SPLITS": 1}, H200)
    many = predict_ms(v, p, {**base, "NUM_SPLITS": 32}, H200)
    assert many < one / 4  # 8 programs cannot stream 64 MB; 256 can
    big = get_op("attention_decode").problem({"B": 64, "Hk": 8, "G": 8, "S": 4096, "D": 128}, "bfloat16", {})
    assert predict_ms(v, big, {**base, "NUM_SPLITS": 1}, H200) < predict_ms(v, big, {**base, "NUM_SPLITS": 64}, H200)
    assert "shared memory" in v.invalid(p, {**base, "NUM_SPLITS": 1, "BLOCK_N": 512, "num_stages": 4}, H200)
    assert "power of two" in v.invalid(p, {**base, "NUM_SPLITS": 1, "BLOCK_N": 8}, H200)
    mla = get_variant("attention_decode_mla", "split_kv")
    pm = get_op("attention_decode_mla").problem({"B": 4, "H": 128, "S": 8192, "Dc": 512, "Dr": 64}, "bfloat16", {})
    assert "shared memory" in mla.invalid(pm, {"BLOCK_N": 128, "BLOCK_H": 64, "NUM_SPLITS": 1, "num_warps": 8,
                                               "num_stages": 4}, H200)
    # fewer head blocks read the latent cache fewer times
    c16 = {"BLOCK_N": 32, "BLOCK_H": 16, "NUM_SPLITS": 4, "num_warps": 8, "num_stages": 2}
    assert mla.work(pm, {**c16, "BLOCK_H": 64}, H200).bytes_moved < mla.work(pm, c16, H200).bytes_moved


def test_several_query_tokens_through_the_public_ops():
    spec = get_op("attention_decode")
    p = spec.problem({"B": 2, "Hk": 1, "G": 4, "S": 24, "D": 16, "T": 3}, "float16", {"cache": "paged", "page_size": 8})
    x = spec.make_inputs(p, torch.Generator().manual_seed(2))
    out, lse = wops.attention_decode(x["q"], x["k_cache"], x["v_cache"], x["seq_lens"], block_table=x["block_table"],
                                     return_lse=True)
    ref, ref_lse = spec.reference(x, {**p.attrs, "scale": 0.25})
    assert out.shape == (2, 3, 4, 16) and lse.shape == (2, 3, 4)
    _close(out, ref, torch.float16)
