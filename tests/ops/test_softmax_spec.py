"""Softmax specs: references (forward and backward), inputs, non-finite semantics, error contracts."""
import pytest
import torch

from warpsmith.core.opspec import DISTRIBUTIONS
from warpsmith.ops import OPS, get_op
from warpsmith.core.dtypes import UNIT_ROUNDOFF
from warpsmith.ops.softmax.spec import LOG_SOFTMAX, SOFTMAX, SOFTMAX_BACKWARD, SPECS

NAMES = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")


def test_registered_with_rows_and_row_length():
    for name in NAMES:
        spec = OPS[name]
        assert [a.name for a in spec.axes] == ["M", "N"] and spec.axes[1].reduction
        p = spec.problem("M=3,N=5", "bf16")
        assert spec.outputs(p) == (((3, 5), torch.bfloat16),)
        assert spec.contract(p).reduction_len == 5 and spec.contract(p).u_acc == UNIT_ROUNDOFF["float32"]
        assert spec.min_bytes(p) == (2 if "backward" not in name else 3) * 15 * 2


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_inputs_for_every_distribution(spec):
    p = spec.problem({"M": 4, "N": 50}, "float16")
    for dist in DISTRIBUTIONS:
        inputs = spec.make_inputs(p, torch.Generator().manual_seed(0), dist)
        assert set(inputs) == ({"y", "dy"} if spec.name.endswith("_backward") else {"x"})
        assert all(t.shape == (4, 50) and t.dtype == torch.float16 for t in inputs.values())
        first = next(iter(inputs.values()))
        assert first.isnan().any() == (dist == "specials")
    again = spec.make_inputs(p, torch.Generator().manual_seed(0), "normal")
    assert all(torch.equal(a, b) for a, b in zip(again.values(), spec.make_inputs(
        p, torch.Generator().manual_seed(0), "normal").values()))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_large_inputs_overflow_a_softmax_without_max_subtraction(dtype):
    p = SOFTMAX.problem({"M": 4, "N": 64}, dtype)
    x = SOFTMAX.make_inputs(p, torch.Generator().manual_seed(0), "large")["x"]
    assert torch.isinf(torch.exp(x.float())).any()  # the naive formula overflows fp32
    assert torch.isfinite(x.float() - x.float().amax(-1, keepdim=True)).all()  # the stable one does not
    assert torch.isfinite(SOFTMAX.reference({"x": x}, {})).all()


def test_forward_reference_and_non_finite_semantics():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, inf, 2.0], [1.0, -inf, 2.0], [-inf, -inf, -inf], [nan, 0.0, 1.0]])
    y, ly = SOFTMAX.reference({"x": x}, {}), LOG_SOFTMAX.reference({"x": x}, {})
    torch.testing.assert_close(y[0], torch.softmax(x[0], -1))
    torch.testing.assert_close(ly[0], torch.log_softmax(x[0], -1))
    for out in (y, ly):
        assert out[[1, 3, 4]].isnan().all() and not out[[0, 2]].isnan().any()
    assert y[2, 1] == 0 and ly[2, 1] == -inf
    # half precision: computed in fp32, rounded once
    xh = torch.randn(3, 30).half()
    assert torch.equal(SOFTMAX.reference({"x": xh}, {}), torch.softmax(xh.float(), -1).half())


@pytest.mark.parametrize("log", [False, True])
def test_backward_reference_is_autograd_through_the_forward_reference(log):
    fwd, bwd = (LOG_SOFTMAX, OPS["log_softmax_backward"]) if log else (SOFTMAX, SOFTMAX_BACKWARD)
    x = torch.randn(3, 17, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(3, 17, dtype=torch.float64)
    y = fwd.reference({"x": x}, {})
    (grad,) = torch.autograd.grad(y, x, dy)
    mine = bwd.reference({"y": y.detach(), "dy": dy}, {})
    torch.testing.assert_close(mine, grad, rtol=1e-12, atol=1e-14)
    explicit = dy - torch.exp(y) * dy.sum(-1, keepdim=True) if log else y * (dy - (dy * y).sum(-1, keepdim=True))
    torch.testing.assert_close(mine, explicit.detach(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_reference_in_each_dtype_meets_its_own_contract(spec, dtype):
    """torch (computing in fp32, rounding once) is a correct implementation: the bound must hold for it."""
    p = spec.problem({"M": 8, "N": 700}, dtype)
    for dist in DISTRIBUTIONS:
        inputs = spec.make_inputs(p, torch.Generator().manual_seed(1), dist)
        ref = spec.reference(inputs, {})
        ref64, scale = spec.oracle(inputs, {})
        ok, msg = spec.contract(p).check(ref, ref64, scale, ref)
        assert ok, (dist, msg)


def _half_statistics_softmax(x: torch.Tensor) -> torch.Tensor:
    """A sloppy kernel: exp and the running sum kept in fp16 (rounded at every step)."""
    e = torch.exp(x.float() - x.float().amax(-1, keepdim=True)).half()
    s = torch.zeros(x.shape[0], dtype=torch.float16)
    for j in range(x.shape[1]):
        s = s + e[:, j]
    return (e.float() / s.float()[:, None]).half()


def test_contract_rejects_statistics_in_half_precision():
    p = SOFTMAX.problem({"M": 4, "N": 1000}, "float16")
    inputs = SOFTMAX.make_inputs(p, torch.Generator().manual_seed(0), "normal")
    ref64, scale = SOFTMAX.oracle(inputs, {})
    ok, msg = SOFTMAX.contract(p).check(_half_statistics_softmax(inputs["x"]), ref64, scale,
                                        SOFTMAX.reference(inputs, {}))
    assert not ok and "exceeds" in msg


def test_contract_bound_follows_the_derivation():
    """allowed = u_out |y| + u * B_i (+ the subnormal step): check B_i at a few points."""
    u = 2.0**-24
    x = torch.tensor([[0.0, -10.0, -1000.0, 5.0]], dtype=torch.float64)
    p = SOFTMAX.problem({"M": 1, "N": 4}, "float32")
    c = SOFTMAX.contract(p)
    ref = SOFTMAX.reference({"x": x}, {})
    allowed = c.allowed(ref, SOFTMAX.error_scale({"x": x}, {}))
    g = 4 / (1 - 4 * u)
    d = (x - 5.0).abs()
    bound = u * ref * (1 + 3 * d + 8 * g + 16) + 6 * 2.0**-126 + 2.0**-149
    torch.testing.assert_close(allowed, bound, rtol=1e-9, atol=0)
    # the exp conditioning term makes the bound grow with |x_i - m|
    assert allowed[0, 1] / ref[0, 1] > allowed[0, 0] / ref[0, 0]
    # log-softmax: absolute, grows with |y_i|
    lc = LOG_SOFTMAX.contract(p)
    la = lc.allowed(LOG_SOFTMAX.reference({"x": x}, {}), LOG_SOFTMAX.error_scale({"x": x}, {}))
    assert la[0, 2] > 1000 * u and la[0, 3] < 100 * u


def test_backward_exact_inputs():
    p = SOFTMAX_BACKWARD.problem({"M": 2, "N": 9}, "float16")
    ex = SOFTMAX_BACKWARD.exact_inputs(p, torch.Generator().manual_seed(0))
    assert set(ex) == {"y", "dy"} and all(((t == t.round()) & (t.abs() <= 2)).all() for t in ex.values())
    assert OPS["log_softmax_backward"].exact_inputs(p, torch.Generator()) is None
    assert get_op("softmax").name == "softmax"
