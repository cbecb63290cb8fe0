"""Cross-entropy specs: torch's semantics, the statistics, the contracts (a correct implementation, torch's
own path in the working dtype, passes them; a wrong one does not), inputs for every distribution."""
import math

import pytest
import torch
import torch.nn.functional as F

from warpsmith.errors import InvalidInputError, WarpsmithError
from warpsmith.core.opspec import DISTRIBUTIONS, INTEGERS, as_tuple
from warpsmith.ops import get_op
from warpsmith.ops.cross_entropy.spec import (CROSS_ENTROPY, CROSS_ENTROPY_BACKWARD, FUSED_LINEAR_CROSS_ENTROPY,
    FUSED_LINEAR_CROSS_ENTROPY_BACKWARD, row_stats)

GEN = torch.Generator


def test_problems_attributes_and_scalars_outside_the_key():
    p = CROSS_ENTROPY.problem("M=5,V=300", "bf16", {"label_smoothing": 0.1, "ignore_index": 3})
    assert dict(p.shape) == {"M": 5, "V": 300} and p.attrs["reduction"] == "mean"
    assert p.key_attrs == {"reduction": "mean"}  # ignore_index and label_smoothing are runtime scalars
    assert CROSS_ENTROPY.parse_attrs(["reduction=none", "label_smoothing=0.25", "ignore_index=-1"]) == \
        {"reduction": "none", "label_smoothing": 0.25, "ignore_index": -1}
    with pytest.raises(InvalidInputError, match=r"label_smoothing of cross_entropy: expected number in \[0, 1\]"):
        CROSS_ENTROPY.problem("M=1,V=2", "float32", {"label_smoothing": 1.5})
    with pytest.raises(InvalidInputError, match="ignore_index of cross_entropy: expected integer"):
        CROSS_ENTROPY.problem("M=1,V=2", "float32", {"ignore_index": 0.5})
    with pytest.raises(InvalidInputError, match="reduction"):
        CROSS_ENTROPY.problem("M=1,V=2", "float32", {"reduction": "avg"})
    f = FUSED_LINEAR_CROSS_ENTROPY.problem("M=4,H=8,V=16", "float16", {"bias": True, "grads": "hidden"})
    assert f.key_attrs == {"reduction": "mean", "bias": True, "grads": "hidden"}
    assert "none" not in FUSED_LINEAR_CROSS_ENTROPY_BACKWARD.attr_choices["grads"]
    for name in ("cross_entropy", "cross_entropy_backward", "fused_linear_cross_entropy",
                 "fused_linear_cross_entropy_backward"):
        assert get_op(name).name == name


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_outputs_follow_the_reduction(reduction):
    p = CROSS_ENTROPY.problem({"M": 6, "V": 9}, "float16", {"reduction": reduction})
    (loss_shape, loss_dt), (st_shape, st_dt) = CROSS_ENTROPY.outputs(p)
    assert loss_shape == (() if reduction != "none" else (6,)) and loss_dt == torch.float16
    assert st_shape == (6, 2) and st_dt == torch.float32
    f = FUSED_LINEAR_CROSS_ENTROPY.problem({"M": 6, "H": 4, "V": 9}, "bfloat16", {"reduction": reduction, "bias": True})
    assert [s for s, _ in FUSED_LINEAR_CROSS_ENTROPY.outputs(f)] == [loss_shape, (6, 4), (9, 4), (9,)]
    assert [d for _, d in FUSED_LINEAR_CROSS_ENTROPY.outputs(f)] == [torch.bfloat16] * 4
    none = FUSED_LINEAR_CROSS_ENTROPY.problem({"M": 6, "H": 4, "V": 9}, "bfloat16", {"grads": "none"})
    assert len(FUSED_LINEAR_CROSS_ENTROPY.outputs(none)) == 1
    b = FUSED_LINEAR_CROSS_ENTROPY_BACKWARD.problem({"M": 6, "H": 4, "V": 9}, "bfloat16", {"grads": "hidden"})
    assert FUSED_LINEAR_CROSS_ENTROPY_BACKWARD.outputs(b) == (((6, 4), torch.bfloat16),)


def test_reference_is_torch_semantics_written_out():
    """mean divides by the non-ignored rows; smoothing is (1 - eps) nll + eps mean(-log p)."""
    x = torch.randn(7, 11, dtype=torch.float64)
    t = torch.tensor([0, 3, -100, 10, -100, 5, 5])
    keep = t != -100
    logp = x.log_softmax(-1)
    nll = -logp[keep].gather(1, t[keep][:, None])[:, 0]
    eps = 0.2
    rows = (1 - eps) * nll + eps * (-logp[keep].mean(-1))
    attrs = {"reduction": "mean", "ignore_index": -100, "label_smoothing": eps}
    loss, stats = CROSS_ENTROPY.reference({"logits": x, "target": t}, attrs)
    assert math.isclose(loss.item(), rows.sum().item() / keep.sum().item(), rel_tol=1e-12)
    none = CROSS_ENTROPY.reference({"logits": x, "target": t}, {**attrs, "reduction": "none"})[0]
    assert torch.equal(none[~keep], torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(stats[:, 0] + stats[:, 1], torch.logsumexp(x, -1))
    # ignore_index inside [0, V) ignores that class' rows; all rows ignored: mean is NaN, as torch
    assert torch.isnan(CROSS_ENTROPY.reference({"logits": x, "target": torch.full((7,), 4)},
                                               {**attrs, "ignore_index": 4})[0])
    # half-precision logits: math in fp32, loss returned in the logits' dtype (as torch)
    h = x.to(torch.bfloat16)
    out = CROSS_ENTROPY.reference({"logits": h, "target": t}, attrs)
    assert out[0].dtype == torch.bfloat16 and out[1].dtype == torch.float32


def test_row_statistics_of_special_rows():
    x = torch.tensor([[1.0, 2.0], [float("-inf"), float("-inf")], [float("inf"), 0.0], [float("nan"), 1.0],
                      [float("-inf"), 3.0]])
    m, ls = row_stats(x)
    assert m[0] == 2 and math.isclose(ls[0].item(), math.log(1 + math.exp(-1)), rel_tol=1e-6)
    assert m[1] == -torch.finfo(torch.float32).max and ls[1] == float("-inf")  # same in fp64 (the oracle)
    assert row_stats(x.double())[0][1] == m[1].double()
    assert torch.isnan(m[2]) and torch.isnan(ls[2]) and torch.isnan(m[3]) and torch.isnan(ls[3])
    assert m[4] == 3 and ls[4] == 0


@pytest.mark.parametrize("op", ["cross_entropy", "cross_entropy_backward"])
@pytest.mark.parametrize("dist", DISTRIBUTIONS + (INTEGERS,))
def test_inputs_for_every_distribution(op, dist):
    spec = get_op(op)
    p = spec.problem({"M": 64, "V": 10}, "float16", {"reduction": "none", "ignore_index": -7})
    x = spec.make_inputs(p, GEN().manual_seed(1), dist)
    assert x["logits"].shape == (64, 10) and x["logits"].dtype == torch.float16
    t = x["target"]
    assert t.dtype == torch.int64 and ((t == -7) | ((t >= 0) & (t < 10))).all()
    assert 0 < int((t == -7).sum()) < 64  # about a quarter ignored
    if op == "cross_entropy_backward":
        assert x["stats"].shape == (64, 2) and x["grad"].shape == (64,)
    if dist == "large":
        assert x["logits"].float().abs().max() > 2 * spec.large_scale(p)
        assert torch.isfinite(CROSS_ENTROPY.reference(x, {**p.attrs, "reduction": "sum"})[0]).all()


def _torch_passes(spec, p, seeds=2, dists=DISTRIBUTIONS):
    """torch's own path in the working dtype is a correct implementation: it must pass every contract."""
    for seed in range(seeds):
        for dist in dists:
            inputs = spec.make_inputs(p, GEN().manual_seed(seed), dist)
            ref64, scale = spec.oracle(inputs, p.attrs)
            for i, (out, r, s, c) in enumerate(zip(as_tuple(spec.reference(inputs, p.attrs)), as_tuple(ref64),
                                                   as_tuple(scale), as_tuple(spec.contract(p)))):
                ok, msg = c.check(out, r, s)
                assert ok, (dist, seed, i, msg)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_contracts_admit_a_correct_implementation(dtype, reduction):
    attrs = {"reduction": reduction, "label_smoothing": 0.1}
    _torch_passes(CROSS_ENTROPY, CROSS_ENTROPY.problem({"M": 9, "V": 37}, dtype, attrs))
    _torch_passes(CROSS_ENTROPY_BACKWARD, CROSS_ENTROPY_BACKWARD.problem({"M": 9, "V": 37}, dtype, attrs))
    fa = {**attrs, "bias": True}
    _torch_passes(FUSED_LINEAR_CROSS_ENTROPY, FUSED_LINEAR_CROSS_ENTROPY.problem({"M": 9, "H": 12, "V": 20}, dtype, fa),
                  seeds=1)
    _torch_passes(FUSED_LINEAR_CROSS_ENTROPY_BACKWARD,
                  FUSED_LINEAR_CROSS_ENTROPY_BACKWARD.problem({"M": 9, "H": 12, "V": 20}, dtype, fa), seeds=1)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_contracts_reject_the_planted_semantic_bugs(dtype):
    """ignore_index rows in the mean's denominator, and smoothing without the (1 - eps) factor."""
    p = CROSS_ENTROPY.problem({"M": 16, "V": 50}, dtype, {"label_smoothing": 0.1})
    inputs = CROSS_ENTROPY.make_inputs(p, GEN().manual_seed(0))
    inputs["target"][::3] = -100
    x, t = inputs["logits"].float(), inputs["target"]
    ref64, scale = CROSS_ENTROPY.oracle(inputs, p.attrs)
    rows = F.cross_entropy(x, t, label_smoothing=0.1, reduction="none")
    wrong_denominator = (rows.sum() / t.numel()).to(p.dtype)
    keep = t != -100
    nll = F.cross_entropy(x, t, reduction="none")
    no_factor = ((rows + 0.1 * nll)[keep].mean()).to(p.dtype)  # nll + eps * smooth
    c = CROSS_ENTROPY.contract(p)[0]
    assert c.check(as_tuple(CROSS_ENTROPY.reference(inputs, p.attrs))[0], ref64[0], scale[0])[0]
    for bad in (wrong_denominator, no_factor):
        ok, msg = c.check(bad, ref64[0], scale[0])
        assert not ok and "exceeds contract" in msg


def test_contract_rates_and_reference_factor():
    small = CROSS_ENTROPY.contract(CROSS_ENTROPY.problem("M=4,V=16", "float32", {"reduction": "none"}))[0]
    big = CROSS_ENTROPY.contract(CROSS_ENTROPY.problem("M=4,V=65536", "float32", {"reduction": "none"}))[0]
    one = torch.ones(1, dtype=torch.float64)
    assert big.allowed(one, one) > small.allowed(one, one)
    assert small.ref_factor == 4.0
    # a reduced fp32 loss is one sample: no reference-factor statistic; kept for fp16/bf16 and per-row losses
    assert CROSS_ENTROPY.contract(CROSS_ENTROPY.problem("M=4,V=16", "float32"))[0].ref_factor is None
    assert CROSS_ENTROPY.contract(CROSS_ENTROPY.problem("M=4,V=16", "bfloat16"))[0].ref_factor == 4.0
    assert CROSS_ENTROPY_BACKWARD.contract(CROSS_ENTROPY_BACKWARD.problem("M=4,V=16", "float32")).ref_factor == 4.0


def test_fused_reference_is_the_unfused_torch_path_and_the_oracle_needs_the_dtype():
    p = FUSED_LINEAR_CROSS_ENTROPY.problem({"M": 6, "H": 8, "V": 12}, "float32", {"bias": True, "reduction": "sum"})
    x = FUSED_LINEAR_CROSS_ENTROPY.make_inputs(p, GEN().manual_seed(2))
    h, w, b = (x[k].clone().requires_grad_() for k in ("hidden", "weight", "bias"))
    loss = F.cross_entropy(F.linear(h, w, b), x["target"], reduction="sum")
    loss.backward()
    out = FUSED_LINEAR_CROSS_ENTROPY.reference(x, p.attrs)
    for mine, ref in zip(out, (loss, h.grad, w.grad, b.grad)):
        torch.testing.assert_close(mine, ref.detach())
    with pytest.raises(WarpsmithError, match="working dtype"):
        FUSED_LINEAR_CROSS_ENTROPY.error_scale({k: v.double() if v.is_floating_point() else v for k, v in x.items()},
                                               p.attrs)
    # the contract is the working dtype's: bf16 logits are rounded, so its budget is wider
    lo = FUSED_LINEAR_CROSS_ENTROPY.oracle(x, p.attrs)[1][0]
    hi = FUSED_LINEAR_CROSS_ENTROPY.oracle({k: v.bfloat16() if v.is_floating_point() else v for k, v in x.items()},
                                           p.attrs)[1][0]
    assert hi > 100 * lo


def test_flops_and_bytes():
    p = CROSS_ENTROPY.problem("M=8,V=100", "bfloat16", {"reduction": "none"})
    assert CROSS_ENTROPY.min_bytes(p) == 8 * 100 * 2 + 8 * 8 + 8 * 8 + 2 * 8
    f = FUSED_LINEAR_CROSS_ENTROPY.problem("M=8,H=16,V=100", "bfloat16")
    assert FUSED_LINEAR_CROSS_ENTROPY.flops(f) == 2.0 * 8 * 100 * 16 * 3 + 5.0 * 8 * 100
    loss_only = FUSED_LINEAR_CROSS_ENTROPY.problem("M=8,H=16,V=100", "bfloat16", {"grads": "none"})
    assert FUSED_LINEAR_CROSS_ENTROPY.flops(loss_only) == 2.0 * 8 * 100 * 16 + 4000
