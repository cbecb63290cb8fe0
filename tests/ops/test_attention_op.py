"""warpsmith.ops.attention / scaled_dot_product_attention / merge_attention_states: forward and
gradients against the specs (and end to end against torch.autograd through the fp64 reference),
torch SDPA compatibility, packed sequences, the custom ops' fake kernels, bad input."""
import pytest
import torch
import torch.nn.functional as F

import warpsmith.ops as wops
from warpsmith.core.error_contract import within_reference
from warpsmith.core.dtypes import UNIT_ROUNDOFF_OF
from warpsmith.errors import InvalidInputError
from warpsmith.ops import get_op
from warpsmith.ops.attention.spec import cu_seqlens

ATTRS = dict(causal=False, align="bottom_right", window_left=-1, window_right=-1, scale=0.0, softcap=0.0,
             varlen=False, bias=False)


def _problem(op, q, k, v, attrs, b=None):
    packed = attrs["varlen"]
    s = {"Sq": q.shape[0 if packed else 2], "Sk": k.shape[0 if packed else 2], "D": q.shape[-1],
         "B": b if packed else q.shape[0], "H": k.shape[-2 if packed else 1],
         "G": q.shape[-2 if packed else 1] // k.shape[-2 if packed else 1]}
    if v.shape[-1] != q.shape[-1]:
        s["Dv"] = v.shape[-1]
    return get_op(op).problem(s, q.dtype, attrs)


def check(op, outs, inputs, attrs, b=None):
    spec = get_op(op)
    p = _problem(op, inputs["q"], inputs["k"], inputs["v"], attrs, b)
    ref64, scale = spec.oracle(inputs, p.attrs)
    for c, o, r, s, rd in zip(spec.contract(p), outs, ref64, scale, spec.reference(inputs, p.attrs)):
        ok, msg = c.check(o, r, s, rd)
        assert ok, msg


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True, "top_left"])
def test_forward_and_gradients(dtype, causal):
    q = torch.randn(1, 6, 23, 40, dtype=dtype, requires_grad=True)
    k = torch.randn(1, 2, 31, 40, dtype=dtype, requires_grad=True)
    v = torch.randn(1, 2, 31, 24, dtype=dtype, requires_grad=True)
    out, lse = wops.attention(q, k, v, causal=causal, window=(9, None), softcap=5.0, return_lse=True)
    assert out.shape == (1, 6, 23, 24) and out.dtype == dtype and lse.dtype == torch.float32 and not lse.requires_grad
    attrs = {**ATTRS, "causal": bool(causal), "align": causal if isinstance(causal, str) else "bottom_right",
             "window_left": 9, "softcap": 5.0}
    x = {"q": q.detach(), "k": k.detach(), "v": v.detach()}
    check("attention", (out, lse), x, attrs)
    do = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), do)
    check("attention_backward", (dq, dk, dv), {**x, "out": out.detach(), "lse": lse, "dout": do}, attrs)
    # end to end: within 4x a naive attention's own gradient error (autograd through the reference in
    # the dtype) plus one ulp, against autograd through the float64 reference
    spec = get_op("attention")
    x64 = {n: t.double().requires_grad_() for n, t in x.items()}
    g64 = torch.autograd.grad(spec.reference(x64, attrs)[0], tuple(x64.values()), do.double())
    xd = {n: t.clone().requires_grad_() for n, t in x.items()}
    gd = torch.autograd.grad(spec.reference(xd, attrs)[0], tuple(xd.values()), do)
    for ours, naive, exact in zip((dq, dk, dv), gd, g64):
        err = float((ours.double() - exact).abs().max())
        ref_err = float((naive.double() - exact).abs().max())
        ok, allowed = within_reference(err, ref_err, float(exact.abs().max()), UNIT_ROUNDOFF_OF[dtype])
        assert ok, (err, allowed)


def test_packed_sequences_match_the_padded_ones():
    lens_q, lens_k = [5, 0, 17, 9], [8, 3, 17, 12]
    h, g, d = 2, 2, 32
    qs = [torch.randn(1, h * g, n, d) for n in lens_q]
    ks = [torch.randn(1, h, n, d) for n in lens_k]
    vs = [torch.randn(1, h, n, d) for n in lens_k]
    q = torch.cat([t[0].transpose(0, 1) for t in qs]).requires_grad_()
    k = torch.cat([t[0].transpose(0, 1) for t in ks]).requires_grad_()
    v = torch.cat([t[0].transpose(0, 1) for t in vs]).requires_grad_()
    cq, ck = cu_seqlens(lens_q), cu_seqlens(lens_k)
    out, lse = wops.attention(q, k, v, causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck, return_lse=True)
    assert out.shape == (sum(lens_q), h * g, d) and lse.shape == (h * g, sum(lens_q))
    for i in range(4):
        if lens_q[i] == 0:
            continue
        ref = wops.attention(qs[i], ks[i], vs[i], causal=True)[0].transpose(0, 1)
        torch.testing.assert_close(out[int(cq[i]):int(cq[i + 1])], ref, rtol=1e-5, atol=1e-5)
    attrs = {**ATTRS, "causal": True, "varlen": True}
    x = {"q": q.detach(), "k": k.detach(), "v": v.detach(), "cu_seqlens_q": cq, "cu_seqlens_k": ck}
    check("attention", (out, lse), x, attrs, b=4)
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), do)
    check("attention_backward", grads, {**x, "out": out.detach(), "lse": lse, "dout": do}, attrs, b=4)


def test_sdpa_compatibility():
    q = torch.randn(2, 4, 19, 32, dtype=torch.float16)
    k = torch.randn(2, 2, 25, 32, dtype=torch.float16)
    v = torch.randn(2, 2, 25, 32, dtype=torch.float16)
    def ref(attn_mask=None, **kw):
        if attn_mask is not None and attn_mask.is_floating_point():
            attn_mask = attn_mask.float()
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=attn_mask, **kw)

    kq = dict(enable_gqa=True)
    m = torch.rand(19, 25) > 0.4
    m[3] = False  # a fully masked row: 0, as torch
    add = torch.randn(2, 1, 19, 25, dtype=torch.float16)
    for kw in (dict(is_causal=True), dict(attn_mask=m), dict(attn_mask=add), dict(scale=0.3)):
        ours = wops.scaled_dot_product_attention(q, k, v, **kw, **kq)
        theirs = ref(**kw, **kq)
        assert ours.shape == theirs.shape and ours.dtype == q.dtype
        torch.testing.assert_close(ours.float(), theirs, rtol=0, atol=4e-3)
    assert torch.equal(wops.scaled_dot_product_attention(q, k, v, attn_mask=m, **kq)[:, :, 3],
                       torch.zeros_like(q[:, :, 3]))
    # unbatched (H, L, E), and gradients through an SDPA call
    q1 = q[0].float().requires_grad_()
    out = wops.scaled_dot_product_attention(q1, k[0].float(), v[0].float(), is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q1, k[0].float(), v[0].float(), is_causal=True,
                                                                   enable_gqa=True), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert q1.grad is not None and torch.isfinite(q1.grad).all()


def test_sdpa_rejects_what_it_does_not_support():
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(InvalidInputError, match="dropout_p"):
        wops.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(InvalidInputError, match="heads"):
        wops.scaled_dot_product_attention(q, q[:, :1], q[:, :1])
    with pytest.raises(InvalidInputError, match="attn_mask"):
        wops.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool), is_causal=True)


def test_merge_attention_states_public():
    q, k, v = torch.randn(2, 3, 11, 64), torch.randn(2, 3, 40, 64), torch.randn(2, 3, 40, 64)
    full, lf = wops.attention(q, k, v, return_lse=True)
    oa, la = wops.attention(q, k[:, :, :13], v[:, :, :13], return_lse=True)
    ob, lb = wops.attention(q, k[:, :, 13:], v[:, :, 13:], return_lse=True)
    om, lm = wops.merge_attention_states(oa, la, ob, lb)
    torch.testing.assert_close(om, full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lm, lf, rtol=1e-5, atol=1e-5)
    with pytest.raises(InvalidInputError, match="lse_b"):
        wops.merge_attention_states(oa, la, ob, lb.double())


def test_bad_input_is_refused_before_any_launch():
    q = torch.randn(1, 3, 8, 16)
    k = torch.randn(1, 2, 8, 16)
    with pytest.raises(InvalidInputError, match="multiple"):
        wops.attention(q, k, k)  # 3 query heads over 2 key/value heads
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(InvalidInputError, match="head dim"):
        wops.attention(q, torch.randn(1, 2, 8, 300), torch.randn(1, 2, 8, 300))
    with pytest.raises(InvalidInputError, match="causal"):
        wops.attention(q, q, q, causal="diagonal")
    with pytest.raises(InvalidInputError, match="window"):
        wops.attention(q, q, q, window=(-3, 2))
    with pytest.raises(InvalidInputError, match="dtype"):
        wops.attention(q, q.half(), q)
    with pytest.raises(InvalidInputError, match="cu_seqlens_q"):
        wops.attention(q[0].transpose(0, 1), q[0].transpose(0, 1), q[0].transpose(0, 1),
                       cu_seqlens_q=torch.tensor([0, 9], dtype=torch.int32), cu_seqlens_k=torch.tensor([0, 8], dtype=torch.int32))


def test_fake_kernels_and_strided_inputs():
    q = torch.randn(1, 9, 4, 16).transpose(1, 2)  # (B, H, S, D) view of a (B, S, H, D) tensor: no copy needed
    out = wops.attention(q, q, q, causal=True)
    ref = wops.attention(q.contiguous(), q.contiguous(), q.contiguous(), causal=True)
    assert torch.equal(out, ref)
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fq = torch.empty(2, 4, 8, 32)
        o, lse = torch.ops.warpsmith.attention(fq, fq[:, :2], fq[:, :2], None, None, None, True, "bottom_right", -1, -1,
                                               0.0, 0.0)
        assert o.shape == (2, 4, 8, 32) and lse.shape == (2, 4, 8)


def test_nn_attention_module():
    import warpsmith.nn as wnn

    m = wnn.Attention(causal=True, window=5, softcap=3.0)
    q, k = torch.randn(1, 4, 12, 16), torch.randn(1, 2, 12, 16)
    assert torch.equal(m(q, k, k), wops.attention(q, k, k, causal=True, window=5, softcap=3.0))
    assert "causal=True" in repr(m)


def test_torch_compile_traces_the_custom_ops():
    """fullgraph capture through the fake kernels, forward and backward (aot_eager: no inductor codegen)."""
    q = torch.randn(1, 4, 20, 32, requires_grad=True)
    k = torch.randn(1, 2, 20, 32, requires_grad=True)

    def f(q, k):
        return wops.attention(q, k, k, causal=True, softcap=4.0).sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    g = torch.autograd.grad(compiled(q, k), (q, k))
    g_ref = torch.autograd.grad(f(q, k), (q, k))
    for a, b in zip(g, g_ref):
        assert torch.equal(a, b)


# ---- empty batches and sequences (issue 27, item 4) ---------------------------------------------------------
@pytest.mark.parametrize("qs, ks", [((0, 2, 3, 8), (0, 2, 5, 8)), ((1, 2, 0, 8), (1, 2, 5, 8)),
                                    ((2, 4, 3, 8), (2, 2, 0, 8))])
def test_empty_batch_or_sequence_gives_torch_s_result_and_gradients_without_a_launch(monkeypatch, qs, ks):
    """B = 0 (and an empty query or key sequence) was refused ("non-empty tensors"); torch's SDPA returns the
    empty (or, with no key, all-zero) output and zero gradients. Nothing is launched."""
    import importlib

    attn_op = importlib.import_module("warpsmith.ops.attention.op")

    monkeypatch.setattr(attn_op, "launch", lambda *a, **k: pytest.fail("a kernel was launched"))
    gqa = qs[1] != ks[1]
    q, k, v = (torch.randn(*s, requires_grad=True) for s in (qs, ks, ks))
    out = wops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    assert out.shape == ref.shape and torch.equal(out, ref)
    got = torch.autograd.grad(out.sum(), (q, k, v))
    want = torch.autograd.grad(ref.sum(), (q, k, v))
    assert all(g.shape == w.shape and torch.equal(g, w) for g, w in zip(got, want))
    out2, lse = wops.attention(q, k, v, return_lse=True)
    assert out2.shape == qs and lse.shape == qs[:-1] and bool((lse == float("-inf")).all())
    mask = torch.ones(qs[0], 1, qs[2], ks[2], dtype=torch.bool)
    assert wops.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa).shape == qs
