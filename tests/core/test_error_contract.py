"""The error contract's criteria, each on its own, and each NaN-safe."""
import torch

from warpsmith.core.error_contract import ErrorContract
from warpsmith.ops.activation.spec import GEGLU
from warpsmith.ops.softmax.spec import SOFTMAX

INF = float("inf")


def fp32_contract(n: int = 8) -> ErrorContract:
    return ErrorContract("float32", 2.0**-24, 2.0**-24, n)


def test_only_the_reference_factor_criterion_fails():
    """An error well inside the worst-case bound, but far worse than the working-dtype reference's."""
    c = fp32_contract(64)
    ref64 = torch.linspace(1.0, 2.0, 64, dtype=torch.float64)
    scale = torch.full_like(ref64, 64.0)  # a large error scale: the worst-case bound is loose
    ref = ref64.float()  # the reference: correctly rounded, error <= half an ulp
    out = (ref64 + 64 * 2.0**-24 * ref64.abs()).float()  # 64 ulps off everywhere
    bound = c.allowed(ref64, scale)
    assert bool(((out.double() - ref64).abs() <= bound).all())  # the first criterion alone passes
    assert c.check(out, ref64, scale)[0]
    ok, msg = c.check(out, ref64, scale, ref)
    assert not ok and "4x the reference's own error" in msg, msg
    assert c.check(ref, ref64, scale, ref)[0]


def test_only_the_worst_case_criterion_fails():
    """The reference is as wrong as the candidate (so the factor criterion passes), the bound is not."""
    c = fp32_contract(8)
    ref64 = torch.linspace(1.0, 2.0, 16, dtype=torch.float64)
    scale = ref64.abs()
    out = (ref64 * 1.01).float()
    ok, msg = c.check(out, ref64, scale, out)
    assert not ok and "exceeds contract" in msg, msg


def test_a_stray_inf_where_the_reference_is_finite_is_rejected():
    c = fp32_contract()
    ref64 = torch.linspace(-3.0, 3.0, 12, dtype=torch.float64)
    out = ref64.float()
    out[5] = INF
    ok, msg = c.check(out, ref64, ref64.abs(), ref64.float())
    assert not ok and "infinities differ" in msg and "(5,)" in msg, msg
    out[5] = -INF
    assert "infinities differ" in c.check(out, ref64, ref64.abs())[1]


def test_an_overflow_the_reference_shares_is_allowed_only_with_its_sign():
    c = fp32_contract()
    ref64 = torch.tensor([1.0, 3.0e38, 2.0], dtype=torch.float64)  # finite and representable
    ref = torch.tensor([1.0, INF, 2.0])  # the working-dtype reference overflowed
    assert c.check(ref.clone(), ref64, ref64.abs(), ref)[0]
    wrong_sign = torch.tensor([1.0, -INF, 2.0])
    assert "infinities differ" in c.check(wrong_sign, ref64, ref64.abs(), ref)[1]


def test_a_nan_scale_beside_a_wrong_element_is_rejected():
    """Softmax of a row half -inf: the error scale is NaN there (0 * inf); the bound must still hold
    on the finite half, and the -inf half must be exactly 0."""
    p = SOFTMAX.problem({"M": 1, "N": 8}, "float32")
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0] + [-INF] * 4])
    ref64, scale = SOFTMAX.oracle({"x": x}, {})
    assert bool(scale.isnan().any())  # the case this test is about
    good = ref64.float()
    assert SOFTMAX.contract(p).check(good, ref64, scale)[0]
    wrong = good.clone()
    wrong[0, :4] = wrong[0, :4].flip(-1)  # 50% of the row wrong
    ok, msg = SOFTMAX.contract(p).check(wrong, ref64, scale)
    assert not ok and "exceeds contract" in msg, msg
    leaked = good.clone()
    leaked[0, 6] = 1e-3  # a -inf entry given a probability
    ok, msg = SOFTMAX.contract(p).check(leaked, ref64, scale)
    assert not ok and "(0, 6)" in msg, msg


def test_a_nan_scale_everywhere_still_bounds_every_element():
    c = fp32_contract()
    ref64 = torch.ones(6, dtype=torch.float64)
    scale = torch.full_like(ref64, float("nan"))
    assert c.check(ref64.float(), ref64, scale)[0]
    out = ref64.float()
    out[3] = 1.5
    ok, msg = c.check(out, ref64, scale)
    assert not ok and "exceeds contract" in msg and "(3,)" in msg, msg


def test_special_values_follow_the_oracle_not_the_working_dtype_reference():
    """torch's fp32 gelu(+inf) is NaN on AVX-512 (fp64 gives +inf): a working-dtype reference with
    that NaN must neither reject the correct +inf nor excuse a NaN there."""
    p = GEGLU.problem({"M": 1, "H": 4}, "float32", {"approximate": "none"})
    inputs = {"gate": torch.tensor([[INF, 1.0, -2.0, 0.5]]), "up": torch.tensor([[2.0, 1.0, 3.0, 1.0]])}
    ref64, scale = GEGLU.oracle(inputs, p.attrs)
    assert ref64[0, 0] == INF
    avx512_ref = GEGLU.reference(inputs, p.attrs).clone()
    avx512_ref[0, 0] = float("nan")  # what the AVX-512 path of torch returns
    correct = ref64.float()
    assert GEGLU.contract(p).check(correct, ref64, scale, avx512_ref)[0]
    ok, msg = GEGLU.contract(p).check(avx512_ref, ref64, scale, avx512_ref)
    assert not ok and "NaN where the reference has none" in msg, msg


def _softmax_by_logsumexp(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))


def test_a_backward_stable_algorithm_is_not_rejected_for_the_references_luck():
    """exp(x - logsumexp(x)) in fp32 is a standard softmax; on inputs with a large logsumexp its error
    is many times torch's (which subtracts the exact row maximum), but within the op's sensitivity to one
    rounding of its inputs, the reference criterion's floor."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 300, generator=gen) * 30  # |logsumexp| in the hundreds
    p = SOFTMAX.problem({"M": 16, "N": 300}, "float32")
    c = SOFTMAX.contract(p)
    ref64, scale = SOFTMAX.oracle({"x": x}, {})
    ref, out = SOFTMAX.reference({"x": x}, {}), _softmax_by_logsumexp(x)
    perturbed = SOFTMAX.perturbed_oracle({"x": x}, {}, c.u_acc)
    ok, msg = c.check(out, ref64, scale, ref)
    assert not ok and "4x the reference's own error" in msg, msg  # without the floor: rejected
    ok, msg = c.check(out, ref64, scale, ref, perturbed)
    assert ok, msg


def test_the_floor_still_rejects_tf32_passed_off_as_fp32():
    """Operands rounded to tf32 (10 mantissa bits): far over the sensitivity to one fp32 rounding."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(16, 300, generator=gen) * 30
    p = SOFTMAX.problem({"M": 16, "N": 300}, "float32")
    c = SOFTMAX.contract(p)
    ref64, scale = SOFTMAX.oracle({"x": x}, {})
    tf32 = (x.view(torch.int32) & ~0x1FFF).view(torch.float32)  # 13 low mantissa bits dropped
    out = torch.softmax(tf32, dim=-1)
    perturbed = SOFTMAX.perturbed_oracle({"x": x}, {}, c.u_acc)
    ok, msg = c.check(out, ref64, scale, SOFTMAX.reference({"x": x}, {}), perturbed)
    assert not ok, msg
    # and the reference criterion on its own, floor included, rejects it by a wide margin
    from warpsmith.core.error_contract import sensitivity_of, within_reference
    err = float((out.double() - ref64).abs().max())
    ref_err = float((SOFTMAX.reference({"x": x}, {}).double() - ref64).abs().max())
    sens = sensitivity_of(ref64, perturbed)
    ok, allowed = within_reference(err, ref_err, float(ref64.abs().max()), c.u_out, sensitivity=sens)
    assert not ok and err > 10 * allowed, (err, allowed)


def test_the_sensitivity_is_measured_on_perturbed_inputs():
    from warpsmith.core.error_contract import perturb, sensitivity_of
    x = torch.linspace(-3, 3, 101, dtype=torch.float64)
    r = perturb({"x": x, "n": 3}, 2.0**-24)
    moved = (r["x"] - x).abs().max()
    assert 0 < float(moved) <= 2 * 2.0**-24 * 3 and r["n"] == 3  # normwise: up to 2u times the largest |x|
    assert sensitivity_of(x.exp(), r["x"].exp()) > 0
    assert sensitivity_of(x, None) == 0.0
