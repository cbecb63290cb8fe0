"""The public decode ops and their custom ops: every cache form through ``warpsmith.ops``, plans, fake
kernels, argument checks; the variant's space, validity and cost model."""
import pytest
import torch

import warpsmith.ops as wops
from warpsmith.errors import InvalidInputError
from warpsmith.ops import default_variant, get_op, get_variant
from warpsmith.ops.attention.decode.plan import plan_balanced, plan_static
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


# ---- index arguments checked on the host (issue 27, item 2) -----------------------------------------------
def _paged(op="attention_decode", table="block_table", lens=(3, 9), T=None, P=4, S=12):
    spec = get_op(op)
    shape = ({"B": len(lens), "Hk": 1, "G": 2, "S": S, "D": 16} if op == "attention_decode"
             else {"B": len(lens), "H": 2, "S": S, "Dc": 16, "Dr": 16})
    if T:
        shape["T"] = T
    attrs = {"page_size": P, "table": table, **({"cache": "paged"} if op == "attention_decode" else {})}
    p = spec.problem(shape, "float16", attrs)
    return spec, p, spec.inputs_for_lens(p, list(lens), torch.Generator().manual_seed(3))


def _call(op, x, **kw):
    tabs = {k: x[k] for k in ("block_table", "kv_indptr", "kv_indices", "kv_last_page_len") if k in x}
    if op == "attention_decode":
        return wops.attention_decode(x["q"], x["k_cache"], x["v_cache"], x.get("seq_lens"), **tabs, **kw)
    return wops.mla_decode(x["q_nope"], x["q_pe"], x["ckv_cache"], x["kpe_cache"], x.get("seq_lens"), **tabs, **kw)


def _refused(op, x, what, value, limit, **kw):
    with pytest.raises(InvalidInputError) as e:
        _call(op, x, **kw)
    msg = str(e.value)
    assert e.value.what.startswith(what) and str(value) in msg and str(limit) in msg, msg


def test_contiguous_lengths_past_the_cache_or_negative_are_refused():
    q = torch.randn(2, 2, 16, dtype=torch.float16)
    kc = torch.randn(2, 1, 8, 16, dtype=torch.float16)
    for lens, at, value in (([3, 9], "seq_lens[1]", 9), ([-1, 3], "seq_lens[0]", -1)):
        with pytest.raises(InvalidInputError) as e:
            wops.attention_decode(q, kc, kc, torch.tensor(lens, dtype=torch.int32))
        assert e.value.what == at and e.value.given == value and "[0, 8]" in str(e.value), str(e.value)
    wops.attention_decode(q, kc, kc, torch.tensor([0, 8], dtype=torch.int32))  # the bounds themselves are fine


@pytest.mark.parametrize("op", ["attention_decode", "attention_decode_mla"])
def test_block_table_indices_and_lengths_out_of_range_are_refused(op):
    spec, p, x = _paged(op)
    nb = (x["k_cache"] if op == "attention_decode" else x["ckv_cache"]).shape[0]
    ok = _call(op, x)  # valid tables run
    ref = spec.reference(x, p.attrs)[0]
    _close(ok, ref, torch.float16)
    # a sequence longer than its block table (3 entries of 4 tokens)
    _refused(op, {**x, "seq_lens": torch.tensor([3, 13], dtype=torch.int32)}, "seq_lens[1]", 13, 12)
    _refused(op, {**x, "seq_lens": torch.tensor([-2, 9], dtype=torch.int32)}, "seq_lens[0]", -2, 12)
    # a page index past the pool, or negative, in an entry the sequence reads
    for bad in (nb, -1):
        bt = x["block_table"].clone()
        bt[1, 2] = bad
        _refused(op, {**x, "block_table": bt}, "block_table[1, 2]", bad, nb)
    # an entry past the sequence's pages is never read: anything goes (vLLM pads rows)
    bt = x["block_table"].clone()
    bt[0, 1:] = -7
    _close(_call(op, {**x, "block_table": bt}), ref, torch.float16)


@pytest.mark.parametrize("op", ["attention_decode", "attention_decode_mla"])
def test_csr_offsets_page_indices_and_last_page_lengths_out_of_range_are_refused(op):
    spec, p, x = _paged(op, table="csr")
    nb = (x["k_cache"] if op == "attention_decode" else x["ckv_cache"]).shape[0]
    nnz = x["kv_indices"].numel()
    _close(_call(op, x), spec.reference(x, p.attrs)[0], torch.float16)
    i32 = dict(dtype=torch.int32)
    _refused(op, {**x, "kv_indptr": torch.tensor([0, 1, nnz + 2], **i32)}, "kv_indptr[2]", nnz + 2, nnz)
    _refused(op, {**x, "kv_indptr": torch.tensor([-1, 1, nnz], **i32)}, "kv_indptr[0]", -1, nnz)
    _refused(op, {**x, "kv_indptr": torch.tensor([0, 3, 2], **i32)}, "kv_indptr[2]", 2, 3)  # decreasing
    for bad in (nb, -3):
        ix = x["kv_indices"].clone()
        ix[-1] = bad
        _refused(op, {**x, "kv_indices": ix}, f"kv_indices[{nnz - 1}]", bad, nb)
    for bad in (0, 5):  # pages of 4 tokens: the last page holds 1..4
        last = x["kv_last_page_len"].clone()
        last[1] = bad
        _refused(op, {**x, "kv_last_page_len": last}, "kv_last_page_len[1]", bad, 4)


@pytest.mark.parametrize("op", ["attention_decode", "attention_decode_mla"])
def test_a_plan_out_of_bounds_or_not_covering_its_sequences_is_refused(op):
    from warpsmith.ops.attention.decode.plan import DecodePlan

    spec, p, x = _paged(op, lens=(3, 9), T=2)
    good = plan_balanced([3, 9], 16, max_items=4)
    _close(_call(op, x, plan=good), spec.reference(x, p.attrs)[0], torch.float16)

    def with_(**over):
        t = {**good.tensors(), **{k: torch.tensor(v, dtype=torch.int32) for k, v in over.items()}}
        return DecodePlan(t["work_batch"], t["work_start"], t["work_end"], t["batch_indptr"], direct=False)

    wb, we = good.work_batch.tolist(), good.work_end.tolist()
    _refused(op, x, "plan work_batch[3]", 2, "[0, 2)", plan=with_(work_batch=wb[:3] + [2]))
    _refused(op, x, "plan item 1", 12, 9, plan=with_(work_end=[3, 12] + we[2:]))  # past the sequence's 9 tokens
    _refused(op, x, "plan batch_indptr[2]", 5, 4, plan=with_(batch_indptr=[0, 1, 5]))
    _refused(op, x, "plan items of sequence 1", "(0, 8)", 9, plan=with_(work_end=[3, 8] + we[2:]))  # a token missed
    split = dict(work_start=[0, 0, 3, 0], work_end=[3, 3, 9, 0], batch_indptr=[0, 1, 3])  # sequence 1 in two items
    _close(_call(op, x, plan=with_(work_batch=[0, 1, 1, 0], **split)), spec.reference(x, p.attrs)[0], torch.float16)
    _refused(op, x, "plan work_batch[1]", 0, "sequence 1", plan=with_(work_batch=[0, 0, 1, 0], **split))
    _refused(op, x, "plan items of sequence 1", "(0, 3), (0, 9)", 9,  # token 0..2 twice
             plan=with_(work_batch=[0, 1, 1, 0], **{**split, "work_start": [0, 0, 0, 0]}))
    with pytest.raises(InvalidInputError, match="shape of plan work_end"):
        _call(op, x, plan=with_(work_end=we[:3]))
    with pytest.raises(InvalidInputError, match="shape of work_end"):  # unchecked values: the shapes still are
        _call(op, x, plan=with_(work_end=we[:3]), check_bounds=False)


def test_check_bounds_modes():
    from warpsmith.ops.attention.decode.check import wanted

    cpu = {"seq_lens": torch.zeros(2, dtype=torch.int32)}
    assert wanted(None, cpu) and wanted(True, cpu) and not wanted(False, cpu)
    with pytest.raises(InvalidInputError, match="check_bounds"):
        wanted("yes", cpu)
    meta = {"seq_lens": torch.zeros(2, dtype=torch.int32, device="meta")}  # values not on the host: opt in
    assert not wanted(None, meta) and wanted(True, meta)
    _, _, x = _paged()
    bt = x["block_table"].clone()
    bt[1, 2] = 10**6
    with pytest.raises(InvalidInputError, match=r"block_table\[1, 2\]"):  # the custom op checks as well
        torch.ops.warpsmith.attention_decode(x["q"], x["k_cache"], x["v_cache"], x["seq_lens"], bt, None, None, None,
                                             None, None, None, None, "NHD", 0.25, 0.0)


# ---- every supported MLA shape has a valid default (issue 27, item 3) --------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("T, H", [(1, 1), (1, 16), (4, 4), (1, 64), (4, 16), (2, 32), (1, 128), (2, 64), (16, 8)])
@pytest.mark.parametrize("target", ["h100", "h200", "a100", "b200"])
def test_mla_defaults_are_valid_for_every_dtype_and_query_rows(dtype, T, H, target):
    tg = get_target(target)
    shape = {"B": 4, "H": H, "S": 4096, "Dc": 512, "Dr": 64, **({"T": T} if T > 1 else {})}
    for attrs in ({"page_size": 64}, {"page_size": 1, "table": "csr"}):
        p = get_op("attention_decode_mla").problem(shape, dtype, attrs)
        v = default_variant(p, tg)  # raised "no variant ... runs" for fp32, and fp16/bf16 at T x H = 64
        c = v.default_config(p, tg)
        assert v.rejection(p, c, tg) is None and v.space(p, tg).project(c) == c, (c, v.rejection(p, c, tg))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("D, G, T", [(128, 64, 1), (256, 64, 1), (256, 16, 4), (512, 8, 1), (64, 4, 16)])
def test_gqa_defaults_are_valid_for_large_head_dims_and_many_query_rows(dtype, D, G, T):
    shape = {"B": 8, "Hk": 8, "G": G, "S": 4096, "D": D, **({"T": T} if T > 1 else {})}
    p = get_op("attention_decode").problem(shape, dtype, {"cache": "paged"})
    v = default_variant(p, H100)
    c = v.default_config(p, H100)
    assert v.rejection(p, c, H100) is None and v.space(p, H100).project(c) == c, (c, v.rejection(p, c, H100))


def test_fp32_score_tiles_over_two_per_thread_are_refused():
    v = get_variant("attention_decode_mla", "split_kv")
    p = get_op("attention_decode_mla").problem({"B": 2, "H": 64, "S": 512, "Dc": 512, "Dr": 64}, "float32", {})
    base = {"NUM_SPLITS": 2, "num_stages": 2}
    # measured on sm_90: 32 x 32 over 8 warps spills 1380 B a thread; 32 x 16 runs in 174 registers
    assert "would spill" in v.rejection(p, {**base, "BLOCK_N": 32, "BLOCK_H": 32, "num_warps": 8}, H100)
    assert v.rejection(p, {**base, "BLOCK_N": 32, "BLOCK_H": 16, "num_warps": 8}, H100) is None
    assert "score tile" in v.invalid(p, {**base, "BLOCK_N": 32, "BLOCK_H": 16, "num_warps": 4}, H100)


def test_mla_decode_runs_in_fp32_with_the_deepseek_latent():
    """fp32 MLA at Dc = 512 had no valid default: every call raised before launching."""
    spec = get_op("attention_decode_mla")
    p = spec.problem({"B": 1, "H": 2, "S": 8, "Dc": 512, "Dr": 64}, "float32", {"page_size": 8})
    x = spec.inputs_for_lens(p, [5], torch.Generator().manual_seed(4))
    out = wops.mla_decode(x["q_nope"], x["q_pe"], x["ckv_cache"], x["kpe_cache"], x["seq_lens"],
                          block_table=x["block_table"])
    _close(out, spec.reference(x, p.attrs)[0], torch.float32)


@pytest.mark.parametrize("dtype, shape", [("float32", {"B": 2, "Hk": 2, "G": 32, "S": 40, "D": 16}),
                                          ("float16", {"B": 2, "Hk": 1, "G": 8, "S": 40, "D": 16, "T": 3})])
def test_head_blocks_below_the_rows_of_a_kv_head_are_exact(dtype, shape):
    """BLOCK_H below a KV head's T x G rows (now in the space; fp32's default at G = 32): each block
    re-reads the KV and computes its own rows, the result the reference's."""
    spec, v = get_op("attention_decode"), get_variant("attention_decode", "split_kv")
    p = spec.problem(shape, dtype, {"cache": "paged", "page_size": 8})
    c = {**v.default_config(p, H100), "BLOCK_H": 16}
    assert v.rejection(p, c, H100) is None and v.head_blocks(p, c) >= 2
    x = spec.inputs_for_lens(p, [40, 17], torch.Generator().manual_seed(0))
    out, lse = v.launch(x, p, c)
    ref, ref_lse = spec.reference(x, p.attrs)
    _close(out, ref, getattr(torch, dtype))
    assert torch.allclose(lse, ref_lse, atol=1e-5)
