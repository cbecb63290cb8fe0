"""warpsmith.ops.rope / rope_hf: correctness under the contract, Hugging Face's layout without a
copy, GQA, partial rotary, positions, gradients, torch.compile, errors."""
import pytest
import torch

import warpsmith.ops as wops
from warpsmith.errors import InvalidInputError
from warpsmith.ops.rope.variant import Tiled
from warpsmith.ops.rope.op import problem_of
from warpsmith.ops import get_op


def check(op, q, k, cos, sin, positions, layout, rotary_dim, outs):
    spec = get_op(op)
    p = problem_of(op, q, k, cos, positions, layout, rotary_dim)
    names = ("dq_out", "dk_out") if op.endswith("backward") else ("q", "k")
    inputs = {names[0]: q, names[1]: k, "cos": cos, "sin": sin}
    if positions is not None:
        inputs["positions"] = positions if positions.dim() == 2 else positions[None]
    ref64, scale = spec.oracle(inputs, p.attrs)
    for o, c, r64, s, r in zip(outs, spec.contract(p), ref64, scale, spec.reference(inputs, p.attrs)):
        assert o.shape == r64.shape and o.dtype == q.dtype
        ok, msg = c.check(o, r64, s, r)
        assert ok, msg


def hf_qk(B, S, hq, hk, D, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, S, hq, D, generator=g).to(dtype).transpose(1, 2)  # as q_proj(x).view(...).transpose(1, 2)
    k = torch.randn(B, S, hk, D, generator=g).to(dtype).transpose(1, 2)
    return q, k


def freqs(P, R, dtype=torch.float32):
    theta = torch.arange(P, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, R, 2) / R)
    return theta.cos().to(dtype), theta.sin().to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rope_gqa_partial_rotary_positions_and_layouts(dtype):
    q, k = hf_qk(2, 5, 4, 2, 12, dtype)
    cos, sin = freqs(9, 8)  # fp32 table, R = 8 < D = 12
    pos = torch.tensor([[3, 0, 8, 8, 1], [2, 2, 5, 7, 0]])
    layout = "gptj" if dtype == torch.float16 else "neox"
    outs = wops.rope(q, k, cos, sin, positions=pos, layout=layout, rotary_dim=8)
    assert [o.shape for o in outs] == [q.shape, k.shape] and all(o.is_contiguous() for o in outs)
    check("rope", q, k, cos, sin, pos, layout, 8, outs)
    c2, s2 = cos.to(dtype), sin.to(dtype)  # a table in the input dtype, token s at row s, shared positions (S,)
    check("rope", q, k, c2, s2, None, "neox", 8, wops.rope(q, k, c2, s2, rotary_dim=8))
    check("rope", q, k, c2, s2, pos[0], "neox", 8, wops.rope(q, k, c2, s2, positions=pos[0], rotary_dim=8))


def test_hugging_face_layout_is_read_without_a_copy(monkeypatch):
    seen = []
    real = Tiled.launch

    def spy(self, inputs, problem, config, out=None):
        seen.append(inputs["q"].stride())
        return real(self, inputs, problem, config, out)

    monkeypatch.setattr(Tiled, "launch", spy)
    q, k = hf_qk(1, 3, 2, 1, 8, torch.float16)
    cos, sin = freqs(3, 8, torch.float16)
    wops.rope(q, k, cos, sin)
    assert seen == [q.stride()] and not q.is_contiguous()


def test_rope_hf_matches_transformers_and_checks_the_duplicated_halves():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q, k = hf_qk(2, 6, 4, 2, 16, torch.bfloat16, seed=3)
    c, s = freqs(6, 16)
    cos = torch.cat([c, c], -1)[None].expand(2, -1, -1).to(torch.bfloat16)  # (B, S, D), halves duplicated
    sin = torch.cat([s, s], -1)[None].expand(2, -1, -1).to(torch.bfloat16)
    ours = wops.rope_hf(q, k, cos, sin, check=True)
    theirs = apply_rotary_pos_emb(q.float(), k.float(), cos.float(), sin.float())  # HF's formula in fp32
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b.to(torch.bfloat16))  # one rounding of the same fp32 computation
    with pytest.raises(InvalidInputError, match="halves of cos"):
        wops.rope_hf(q, k, torch.rand_like(cos), sin, check=True)
    partial = wops.rope_hf(q, k, cos[..., :8].contiguous(), sin[..., :8].contiguous())  # R = 8 < D: dims 8.. copied
    assert torch.equal(partial[0][..., 8:], q[..., 8:])
    bshd = wops.rope_hf(q.transpose(1, 2), k.transpose(1, 2), cos, sin, unsqueeze_dim=2)  # (B, S, H, D) inputs
    assert all(torch.equal(a.transpose(1, 2), b) for a, b in zip(bshd, ours))


def test_gradients_are_the_inverse_rotation():
    q, k = hf_qk(2, 4, 3, 1, 10, torch.float32, seed=4)
    q.requires_grad_(), k.requires_grad_()
    cos, sin = freqs(6, 6)
    pos = torch.tensor([[5, 1, 0, 2], [3, 3, 4, 0]])
    qo, ko = wops.rope(q, k, cos, sin, positions=pos, layout="gptj", rotary_dim=6)
    g = torch.Generator().manual_seed(5)
    gq, gk = torch.randn(qo.shape, generator=g), torch.randn(ko.shape, generator=g)
    (qo * gq).sum().add((ko * gk).sum()).backward()
    check("rope_backward", gq, gk, cos, sin, pos, "gptj", 6, (q.grad, k.grad))
    q2 = q.detach().requires_grad_()
    wops.rope(q2, k.detach(), cos, sin, positions=pos, layout="gptj", rotary_dim=6)[0].mul(gq).sum().backward()
    torch.testing.assert_close(q2.grad, q.grad)  # k_out unused: its gradient is taken as zero


def test_custom_op_under_torch_compile_without_graph_break():
    def f(q, k, cos, sin):
        qo, ko = wops.rope_hf(q, k, cos, sin)
        return qo.sum() + ko.sum()

    q, k = hf_qk(1, 4, 2, 2, 8, torch.float16)
    c, s = freqs(4, 8, torch.float16)
    cos, sin = torch.cat([c, c], -1)[None], torch.cat([s, s], -1)[None]
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(q, k, cos, sin), f(q, k, cos, sin))
    assert hasattr(torch.ops.warpsmith, "rope") and hasattr(torch.ops.warpsmith, "rope_backward")


Q, K = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8)
C, S = torch.randn(3, 4), torch.randn(3, 4)


@pytest.mark.parametrize("call, fragment", [
    (lambda: wops.rope(Q[0], K, C, S), "4-D"),
    (lambda: wops.rope(Q, K.half(), C, S), "dtype of k"),
    (lambda: wops.rope(Q, torch.randn(1, 1, 4, 8), C, S), "shape of k"),
    (lambda: wops.rope(Q, K, C, S, layout="halves"), "layout"),
    (lambda: wops.rope(Q, K, C, S, rotary_dim=5), "rotary_dim"),
    (lambda: wops.rope(Q, K, C, S, rotary_dim=10), "rotary_dim"),
    (lambda: wops.rope(Q, K, C[:, :3], S[:, :3]), "shape of the cos table"),
    (lambda: wops.rope(Q, K, C[:2], S[:2]), "P >= S"),
    (lambda: wops.rope(Q, K, C, S[:, :2]), "shape of sin"),
    (lambda: wops.rope(Q, K, C.double(), S.double()), "dtype of cos"),
    (lambda: wops.rope(Q, K, C.clone().requires_grad_(), S), "require grad"),
    (lambda: wops.rope(Q, K, C, S, positions=torch.zeros(1, 3)), "dtype of positions"),
    (lambda: wops.rope(Q, K, C, S, positions=torch.zeros(2, 3, dtype=torch.long)), "shape of positions"),
    (lambda: wops.rope(Q, K, torch.randn(1, 3, 4), torch.randn(1, 3, 4), positions=torch.zeros(3, dtype=torch.long)),
     "per-token"),
    (lambda: wops.rope_hf(Q, K, torch.randn(3, 5), torch.randn(3, 5)), "even R"),
    (lambda: wops.rope_hf(Q, K, torch.randn(3, 8), torch.randn(3, 8), unsqueeze_dim=0), "unsqueeze_dim"),
])
def test_bad_input_is_refused_with_a_clear_message(call, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        call()
