"""Judging (issue 26, parts 4 and 5): inputs the checker never drew, and precision cut to the floor.

- Structured inputs (``warpsmith.core.opspec.STRUCTURED``): exact zeros, all-zero (padding) rows,
  repeated rows, powers of two and subnormals of the dtype, drawn for every floating input of both
  formats, integer inputs left alone. A kernel wrong only on them was accepted before.
- The error contract element by element (``warpsmith.check.compare``, rule 2): an allowance that
  grew with the largest input let operands rounded to 13 mantissa bits through on inputs with
  outliers.

The planted candidates live in ``tests/verify/zoo/``; the correct ones stay accepted
(``tests/check/test_check.py``).
"""
import json
import math
from pathlib import Path

import pytest
import torch

import warpsmith.core.opspec as opspec
from warpsmith.check import check, load_problem
from warpsmith.check.compare import judge, probe_oracle
from warpsmith.check.formats import DISTRIBUTIONS
from warpsmith.core.error_contract import perturb
from warpsmith.core.opspec import STRUCTURED, draw, rows_of

ZOO = Path(__file__).parents[1] / "verify" / "zoo"
RMSNORM = ZOO / "rmsnorm"
MATMUL = (ZOO / "matmul_relu.py", ["M=9", "N=12", "K=20"])
LAYERNORM = (ZOO / "layernorm.py", ["batch_size=5", "features=48"])
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
U32 = 2.0**-24


def failure(report):
    return report.first_failure.message if report.first_failure else None


# ---- the structured distributions contain what they promise ------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_structured_draws_contain_what_they_promise(dtype):
    g = torch.Generator().manual_seed(0)
    shape = (12, 16)
    sparse = draw(shape, "sparse", g, dtype)
    assert sparse.dtype == dtype and sparse.shape == shape
    assert 0.3 < float((sparse == 0).float().mean()) < 0.7  # many exact zeros, not all

    padded = draw(shape, "padded", g, dtype)
    zero_rows = (padded == 0).all(-1)
    assert zero_rows[-3:].all() and zero_rows[0] and not zero_rows.all()  # padding at both ends of the batch
    assert (padded[~zero_rows] != 0).all()  # the other rows are ordinary

    repeated = draw(shape, "repeated", g, dtype)
    distinct = {tuple(row.float().tolist()) for row in repeated}
    assert len(distinct) <= math.ceil(12 / 4) < 12

    pow2 = draw(shape, "pow2", g, dtype).to(torch.float64)
    exponents = pow2.abs().log2()
    assert torch.equal(exponents, exponents.round()) and exponents.min() >= -4 and exponents.max() <= 4
    assert (pow2 < 0).any() and (pow2 > 0).any()

    sub = draw(shape, "subnormal", g, dtype)
    fi = torch.finfo(dtype)
    is_sub = (sub != 0) & (sub.abs() < fi.tiny)
    assert is_sub.any() and is_sub.all(-1).any() and not is_sub.all(-1).all()  # elements, and whole rows
    assert torch.isfinite(sub).all() and (sub.abs() >= fi.tiny * fi.eps).all()  # nonzero, the dtype's own


def test_a_vector_has_its_elements_as_rows_and_fp8_gets_its_own_subnormals():
    assert rows_of((64,)) == (64, 1) and rows_of((1, 8)) == (8, 1) and rows_of((3, 2, 8)) == (6, 8)
    g = torch.Generator().manual_seed(1)
    weight = draw((64,), "padded", g, torch.float32)
    assert (weight[-16:] == 0).all() and weight[0] == 0 and (weight[1:-16] != 0).all()
    assert len(set(draw((64,), "repeated", g, torch.float32).tolist())) <= 16
    fp8 = draw((8, 16), "subnormal", g, torch.float8_e4m3fn).to(torch.float32)
    assert ((fp8 != 0) & (fp8.abs() < 2.0**-6)).any()  # e4m3's subnormals, not float32's (which round to 0)


def test_the_check_cycles_through_the_structured_distributions():
    assert DISTRIBUTIONS[-len(STRUCTURED):] == STRUCTURED and {"large", "specials"}.isdisjoint(DISTRIBUTIONS)
    assert opspec.DISTRIBUTIONS == ("normal", "uniform", "outliers", "tiny", "large", "specials")  # the verifier's


def test_integer_inputs_are_left_alone(tmp_path):
    """KernelBench: an index tensor from get_inputs() is what get_inputs() made, under every
    distribution; FlashInfer: random integer inputs keep their own range."""
    (tmp_path / "gather.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x, idx):\n        return x[idx]\n\n\n"
        "def get_inputs():\n    return [torch.randn(6, 16), torch.randint(0, 6, (9,))]\n")
    problem = load_problem(tmp_path / "gather.py")
    w = problem.workloads[0]
    native = problem.draw_inputs(w, torch.Generator().manual_seed(5), "native", torch.device("cpu"))
    for dist in STRUCTURED:
        x, idx = problem.draw_inputs(w, torch.Generator().manual_seed(5), dist, torch.device("cpu"))
        assert torch.equal(idx, native[1]) and idx.dtype == torch.int64, dist
        assert x.dtype == torch.float32 and not torch.equal(x, native[0]), dist

    folder = tmp_path / "gather_fi"
    folder.mkdir()
    (folder / "definition.json").write_text(json.dumps({
        "name": "gather", "axes": {"rows": {"type": "const", "value": 8}, "n": {"type": "var"},
                                   "h": {"type": "const", "value": 16}},
        "inputs": {"x": {"shape": ["rows", "h"], "dtype": "float16"}, "idx": {"shape": ["n"], "dtype": "int32"}},
        "outputs": {"y": {"shape": ["n", "h"], "dtype": "float16"}},
        "reference": "def run(x, idx):\n    return x[idx.long()]\n"}))
    (folder / "workload.jsonl").write_text(json.dumps({"uuid": "g", "axes": {"n": 40}, "inputs": {}}) + "\n")
    problem = load_problem(folder)
    assert problem.distributions == DISTRIBUTIONS
    for dist in STRUCTURED:
        x, idx = problem.draw_inputs(problem.workloads[0], torch.Generator().manual_seed(5), dist, torch.device("cpu"))
        assert idx.dtype == torch.int32 and 0 <= int(idx.min()) and int(idx.max()) < 8 and idx.any(), dist
        assert x.dtype == torch.float16 and x.shape == (8, 16)
    x, _ = problem.draw_inputs(problem.workloads[0], torch.Generator().manual_seed(5), "padded", torch.device("cpu"))
    assert (x == 0).all(-1).any()


# ---- inputs the checker never drew, end to end (both formats) -----------------------------------
def _check(*args, **kw):
    """``check(*args, **kw)``, and the structured distributions it drew inputs from."""
    seen = set()
    real = opspec.structured

    def recording(shape, dist, kw_, dtype):
        seen.add(dist)
        return real(shape, dist, kw_, dtype)

    opspec.structured = recording
    try:
        return check(*args, **kw), seen
    finally:
        opspec.structured = real


def test_a_matmul_wrong_only_on_exact_zeros_is_rejected():
    """Random normal inputs never hold an exact 0; ReLU activations and padding do."""
    ref, sets = MATMUL
    report, seen = _check(ref, ZOO / "matmul_relu_zero_guard.py", overrides=sets)
    assert report.verdict == "rejected" and report.reason == "wrong_result", failure(report)
    assert "sparse inputs" in failure(report)  # the first distribution with a zero in A
    assert report.problem["distributions"] == ["native", *DISTRIBUTIONS]
    assert "sparse" in seen


def _nan_on_padding(report):
    """Rejected with the error contract failed on NaN where the reference has a number, at the padding.
    The verdict's reason is ``unwritten_output``: a NaN the candidate computed cannot be told from the
    NaN poison of an unwritten element, and ``fully_written`` comes first in priority; the error
    contract fails as well, with the NaN pattern."""
    assert report.verdict == "rejected", failure(report)
    assert set(report.failed_codes()) >= {"wrong_result"} and report.reason in ("unwritten_output", "wrong_result")
    contract = report.check("error_contract")
    assert "NaN pattern differs" in contract.message and "padded inputs" in contract.message, contract.message


def test_a_layernorm_giving_nan_on_a_padding_row_is_rejected():
    ref, sets = LAYERNORM
    _nan_on_padding(check(ref, ZOO / "layernorm_zero_row_nan.py", overrides=sets))


def test_an_rmsnorm_giving_nan_on_a_padding_row_is_rejected():
    """FlashInfer-Bench / SOL-ExecBench format: the definition folder's random inputs get the
    structured draws too (the reference's 0 * rsqrt(eps) = 0 on a padding row)."""
    report = check(RMSNORM, RMSNORM / "solutions" / "dps_zero_row_nan.json")
    _nan_on_padding(report)
    assert report.problem["distributions"] == list(DISTRIBUTIONS)


def test_every_structured_distribution_is_drawn_in_both_formats():
    """A correct candidate of each format goes through every distribution (one trial each by default)."""
    ref, sets = MATMUL
    report, seen = _check(ref, ZOO / "matmul_relu_ok.py", overrides=sets)
    assert report.verdict == "accepted", failure(report)
    assert seen == set(STRUCTURED)
    report, seen = _check(RMSNORM, RMSNORM / "solutions" / "dps_torch.json", workloads=["1"])
    assert report.verdict == "accepted", failure(report)
    assert seen == set(STRUCTURED)


# ---- precision cut to the floor ----------------------------------------------------------------
def _truncate(x, bits=13):
    """``x`` (float32) with the low ``23 - bits`` bits of its mantissa zeroed: ``bits`` mantissa bits."""
    drop = 23 - bits
    return ((x.view(torch.int32) >> drop) << drop).view(torch.float32)


def _tensor_wide_bound(out, ref, oracle, moved):
    """The contract before: the largest error against 4x the larger of the reference's largest error
    and the oracle's largest change when every input moves by about u max|input|
    (:func:`~warpsmith.core.error_contract.perturb`), + 2u max|y|."""
    err = float((out.double() - oracle).abs().max())
    allowed = 4 * max(float((ref.double() - oracle).abs().max()), float((moved - oracle).abs().max()))
    return err <= allowed + 2 * U32 * float(oracle.abs().max()) + 2.0**-149


def test_judge_rejects_operands_rounded_to_13_mantissa_bits_on_outliers():
    """Layer norm on a draw with outliers, its input rounded to 13 mantissa bits: about 1000x the
    reference's own error at the typical elements, and yet inside the old tensor-wide bound, whose
    allowance grew with the largest input."""
    g = torch.Generator().manual_seed(0)
    x = draw((5, 48), "outliers", g, torch.float32)
    w, b = torch.randn(48, generator=g), torch.randn(48, generator=g)

    def layernorm(t):
        return torch.nn.functional.layer_norm(t, (48,), w.to(t.dtype), b.to(t.dtype), 1e-5)

    ref, oracle = layernorm(x), layernorm(x.double())
    cut = layernorm(_truncate(x))
    moved = perturb({"x": x.double()}, U32)["x"]  # the old harness's probe
    assert _tensor_wide_bound(cut, ref, oracle, layernorm(moved))  # what let it through
    probes = probe_oracle(lambda a: (layernorm(a[0]),), [x], U32)[0]
    ok, msg = judge(cut, ref, oracle, perturbed=probes)
    assert not ok and "vs the fp64 oracle" in msg, msg
    assert judge(ref, ref, oracle, perturbed=probes)[0]
    manual = (x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5) * w + b
    assert judge(manual, ref, oracle, perturbed=probes)[0]


def _block(t, bits=23):
    step = torch.exp2(torch.ceil(torch.log2(t.abs().amax())) - bits)
    return torch.round(t / step) * step


def test_judge_rejects_a_matmul_on_one_shared_exponent_on_outliers():
    """Matmul with A and B on one shared exponent each (zoo ``matmul_relu_block_fp.py``): with outliers,
    the typical elements keep about 13-15 mantissa bits. A different summation order stays accepted."""
    g = torch.Generator().manual_seed(3)
    a, b = draw((9, 20), "outliers", g, torch.float32), draw((20, 12), "outliers", g, torch.float32)
    ref, oracle = a @ b, a.double() @ b.double()
    moved = perturb({"a": a.double(), "b": b.double()}, U32)
    cut = _block(a) @ _block(b)
    assert _tensor_wide_bound(cut, ref, oracle, moved["a"] @ moved["b"])
    probes = probe_oracle(lambda t: (t[0] @ t[1],), [a, b], U32)[0]
    ok, msg = judge(cut, ref, oracle, perturbed=probes)
    assert not ok, msg
    assert judge(_truncate(a) @ _truncate(b), ref, oracle, perturbed=probes)[0] is False
    split = a[:, :7] @ b[:7] + a[:, 7:] @ b[7:]
    assert judge(split, ref, oracle, perturbed=probes)[0]


def test_a_candidate_on_one_shared_exponent_is_rejected():
    """End to end: accepted before (every error within the tensor-wide bound), now wrong_result."""
    ref, sets = MATMUL
    report = check(ref, ZOO / "matmul_relu_block_fp.py", overrides=sets)
    assert report.verdict == "rejected" and report.reason == "wrong_result", failure(report)


def test_a_small_element_keeps_a_small_allowance():
    """The allowance is per element: 1e-6 off an element of size 1e-3 (about 2^14 of its own
    roundings) fails next to an element of size 1e6, whose allowance would have covered it."""
    oracle = torch.tensor([1e6] + [1e-3 * (1 + k / 16) for k in range(15)], dtype=torch.float64)
    ref = oracle.to(torch.float32)
    out = ref.clone()
    out[5] += 1e-6
    assert judge(ref, ref, oracle)[0]
    assert float((out.double() - oracle).abs().max()) < 2 * U32 * 1e6  # inside "two ulps of the largest value"
    ok, msg = judge(out, ref, oracle)
    assert not ok and "at (5,)" in msg, msg


def test_flush_to_zero_results_and_exact_zeros():
    """Results below float32's smallest normal may be flushed to zero (GPU float32 arithmetic); an
    exact 0 of the oracle must stay (near) 0."""
    oracle = torch.tensor([1.0, 3e-39, 0.0, -2.0], dtype=torch.float64)
    ref = oracle.to(torch.float32)
    assert judge(torch.tensor([1.0, 0.0, 0.0, -2.0]), ref, oracle)[0]
    assert not judge(torch.tensor([1.0, 3e-39, 1e-30, -2.0]), ref, oracle)[0]
    nan = torch.tensor([1.0, 3e-39, float("nan"), -2.0])
    ok, msg = judge(nan, ref, oracle)
    assert not ok and "NaN pattern differs" in msg and "where the reference has a number" in msg


def test_bf16_subnormal_draws_are_left_out_under_the_interpreter_and_said():
    """Triton's CPU interpreter decodes bfloat16 subnormals wrongly on load, so every correct bf16
    Triton kernel would fail them there: the draws are skipped on a CPU, with the reason in the report,
    and kept on a GPU and for other dtypes."""
    import types

    from warpsmith.check.hardened import _interpreter_distributions

    def problem():
        return types.SimpleNamespace(distributions=("normal", "subnormal", "padded"), info={})

    p = problem()
    _interpreter_distributions(p, [torch.zeros(2, dtype=torch.bfloat16), 3], torch.device("cpu"))
    assert p.distributions == ("normal", "padded") and "interpreter" in p.info["skipped_distributions"]["subnormal"]
    for args, dev in (([torch.zeros(2, dtype=torch.float16)], "cpu"), ([torch.zeros(2, dtype=torch.bfloat16)], "cuda")):
        p = problem()
        _interpreter_distributions(p, args, torch.device(dev))
        assert "subnormal" in p.distributions and not p.info
