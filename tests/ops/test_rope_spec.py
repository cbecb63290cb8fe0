"""RoPE specs: the reference against Hugging Face's and a hand-written GPT-J rotation, problems,
inputs, contracts."""
import pytest
import torch

from warpsmith.errors import InvalidInputError
from warpsmith.core.opspec import DISTRIBUTIONS, as_tuple
from warpsmith.ops import get_op
from warpsmith.ops.rope.spec import ROPE, ROPE_BACKWARD, head_dim

GEN = lambda seed=0: torch.Generator().manual_seed(seed)  # noqa: E731


def test_problems_axes_and_validation():
    p = ROPE.problem("B=2,S=5,Hq=4,Hk=2,R2=8,E=4", "bf16")
    assert head_dim(p) == 20 and p.attrs == {"layout": "neox", "positions": "implied", "cos_sin": "table",
                                             "table_dtype": "input"}
    assert [s for s, _ in ROPE.outputs(p)] == [(2, 4, 5, 20), (2, 2, 5, 20)]
    assert get_op("rope_backward") is ROPE_BACKWARD
    with pytest.raises(InvalidInputError, match="P >= S"):
        ROPE.problem("B=1,S=5,Hq=1,Hk=1,R2=2,P=4", "float16")
    ROPE.problem("B=1,S=5,Hq=1,Hk=1,R2=2,P=4", "float16", {"positions": "given"})  # any rows with positions
    with pytest.raises(InvalidInputError, match="per-token"):
        ROPE.problem("B=1,S=5,Hq=1,Hk=1,R2=2", "float16", {"cos_sin": "per_token", "positions": "given"})
    with pytest.raises(InvalidInputError, match="attribute layout"):
        ROPE.problem("B=1,S=5,Hq=1,Hk=1,R2=2", "float16", {"layout": "halves"})


def _rotate_half(x):  # Hugging Face's formulation (tests/ops/test_rope_op.py compares with transformers itself)
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def test_neox_reference_equals_hugging_face():
    p = ROPE.problem("B=2,S=6,Hq=4,Hk=2,R2=8", "float32", {"cos_sin": "per_token"})
    x = ROPE.make_inputs(p, GEN(1))
    assert x["q"].stride(1) == 16 and not x["q"].is_contiguous()  # (B, S, H, D) viewed as (B, H, S, D)
    cos, sin = (torch.cat([t, t], -1) for t in (x["cos"], x["sin"]))
    q_hf, k_hf = apply_rotary_pos_emb(x["q"], x["k"], cos, sin)
    q, k = ROPE.reference(x, p.attrs)
    assert torch.equal(q, q_hf) and torch.equal(k, k_hf)


def test_gptj_pairs_partial_rotary_and_positions():
    p = ROPE.problem("B=1,S=3,Hq=1,Hk=1,R2=2,E=3,P=9", "float32", {"layout": "gptj", "positions": "given"})
    x = {k: (v.double() if v.is_floating_point() else v) for k, v in ROPE.make_inputs(p, GEN(2)).items()}
    q, _ = ROPE.reference(x, p.attrs)
    pos = x["positions"][0]
    for s in range(3):
        c, sn, xin = x["cos"][pos[s]], x["sin"][pos[s]], x["q"][0, 0, s]
        for i in range(2):  # interleaved pairs (2i, 2i + 1)
            assert q[0, 0, s, 2 * i] == pytest.approx((xin[2 * i] * c[i] - xin[2 * i + 1] * sn[i]).item())
            assert q[0, 0, s, 2 * i + 1] == pytest.approx((xin[2 * i + 1] * c[i] + xin[2 * i] * sn[i]).item())
        assert torch.equal(q[0, 0, s, 4:], xin[4:])  # dims past the rotary part: copied


def test_backward_reference_is_the_inverse_rotation_and_rotations_keep_norms():
    p = ROPE.problem("B=2,S=4,Hq=2,Hk=1,R2=3,E=2", "float32", {"layout": "gptj"})
    x = {k: v.double() for k, v in ROPE.make_inputs(p, GEN(3)).items()}
    q, k = ROPE.reference(x, p.attrs)
    assert torch.allclose(q.norm(dim=-1), x["q"].norm(dim=-1))  # real angles: a rotation
    back = ROPE_BACKWARD.reference({"dq_out": q, "dk_out": k, "cos": x["cos"], "sin": x["sin"]}, p.attrs)
    torch.testing.assert_close(back[0], x["q"])
    torch.testing.assert_close(back[1], x["k"])


def test_contract_scale_and_inputs():
    p = ROPE.problem("B=1,S=2,Hq=1,Hk=1,R2=1,E=1", "float16")
    x = {"q": torch.tensor([[[[3.0, 4.0, 5.0]] * 2]]).double(), "k": torch.zeros(1, 1, 2, 3).double(),
         "cos": torch.tensor([[0.5], [-1.0]]).double(), "sin": torch.tensor([[2.0], [0.25]]).double()}
    sq, sk = ROPE.error_scale(x, p.attrs)
    assert sq[0, 0, 0].tolist() == [3 * 0.5 + 4 * 2, 4 * 0.5 + 3 * 2, 0.0]  # |x1 c| + |x2 s|; copies exact
    assert sq[0, 0, 1].tolist() == [3 + 1, 4 + 0.75, 0.0] and not sk.any()
    c = ROPE.contract(p)
    assert len(c) == 2 and c[0].reduction_len == 2 and c[0].u_acc == 2**-24 and c[0].u_out == 2**-11
    for attrs in ({}, {"positions": "given", "table_dtype": "float32"}, {"cos_sin": "per_token"}):
        q = ROPE_BACKWARD.problem("B=2,S=3,Hq=2,Hk=1,R2=2", "bfloat16", attrs)
        for dist in DISTRIBUTIONS:
            x = ROPE_BACKWARD.make_inputs(q, GEN(), dist)
            assert x["dq_out"].shape == (2, 2, 3, 4) and x["dk_out"].shape == (2, 1, 3, 4)
            assert x["cos"].dtype == (torch.float32 if attrs.get("table_dtype") else torch.bfloat16)
            if "positions" in x:
                assert 0 <= int(x["positions"].min()) and int(x["positions"].max()) < 3
        assert ROPE.min_bytes(q) > 2 * 2 * 3 * 3 * 4 * 2 and ROPE.flops(q) == 6 * 2 * 3 * 3 * 2


@pytest.mark.parametrize("spec", [ROPE, ROPE_BACKWARD])
def test_the_fp32_reference_meets_its_contract_and_a_flipped_sin_does_not(spec):
    p = spec.problem("B=2,S=5,Hq=3,Hk=2,R2=4,E=2", "float32", {"positions": "given"})
    for dist in DISTRIBUTIONS:
        x = spec.make_inputs(p, GEN(5), dist)
        ref64, scale = (as_tuple(t) for t in spec.oracle(x, p.attrs))
        for c, r, r64, s in zip(spec.contract(p), spec.reference(x, p.attrs), ref64, scale):
            assert c.check(r, r64, s)[0], dist
    x = spec.make_inputs(p, GEN(6))
    ref64, scale = spec.oracle(x, p.attrs)
    flipped = spec.reference({**x, "sin": -x["sin"]}, p.attrs)  # the other direction of rotation
    assert not spec.contract(p)[0].check(flipped[0], ref64[0], scale[0])[0]
