import math

import pytest
import torch

from warpsmith.errors import InvalidInputError, UnknownNameError
from warpsmith.ops.matmul.spec import MATMUL
from warpsmith.ops import get_op
from warpsmith.core.dtypes import parse_dtype
from warpsmith.core.opspec import parse_shape
from warpsmith.core.error_contract import ErrorContract, gamma


def test_parse_shape_and_problem():
    p = MATMUL.problem("M=257,N=129,K=300", "fp16")
    assert dict(p.shape) == {"M": 257, "N": 129, "K": 300}
    assert p.dtype == torch.float16
    assert p.attrs == {"bias": False, "activation": "none", "layout": "nn", "allow_tf32": False}
    assert MATMUL.flops(p) == 2 * 257 * 129 * 300
    assert MATMUL.min_bytes(p) == 2 * (257 * 300 + 300 * 129 + 257 * 129)


@pytest.mark.parametrize("text, fragment", [
    ("", "NAME=SIZE"), ("M=1,N", "NAME=SIZE"), ("M=1,M=2,K=3,N=4", "twice"), ("M=x,N=1,K=1", "NAME=SIZE"),
])
def test_malformed_shapes(text, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        parse_shape(text)


@pytest.mark.parametrize("shape, fragment", [
    ("M=0,N=1,K=1", r"size of axis M: expected an integer in \[1"),
    ("M=4,N=-3,K=1", "size of axis N"),
    ("M=4,N=3", "sizes for axes K"),
    ("M=4,N=3,K=2,Q=1", "unknown axis of matmul"),
])
def test_bad_problems_name_what_was_expected(shape, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        MATMUL.problem(shape, "float16")


def test_unknown_names():
    with pytest.raises(UnknownNameError, match="expected one of bfloat16, float16, float32, got 'int8'"):
        MATMUL.problem("M=1,N=1,K=1", "int8")
    with pytest.raises(UnknownNameError, match="unknown op"):
        get_op("conv9d")
    with pytest.raises(InvalidInputError, match="attribute activation"):
        MATMUL.problem("M=1,N=1,K=1", "float16", {"activation": "tanh"})
    with pytest.raises(UnknownNameError):
        parse_dtype("float64", MATMUL.dtypes)


def test_contract_depends_on_dtype_and_reduction_length():
    short = MATMUL.contract(MATMUL.problem("M=1,N=1,K=16", "float32"))
    long = MATMUL.contract(MATMUL.problem("M=1,N=1,K=4096", "float32"))
    half = MATMUL.contract(MATMUL.problem("M=1,N=1,K=16", "float16"))
    one, s = torch.ones(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    assert long.allowed(one, s) > short.allowed(one, s)
    assert half.allowed(one, s) > short.allowed(one, s)
    assert math.isclose(gamma(10, 2**-24), 10 * 2**-24 / (1 - 10 * 2**-24))
    tf32 = MATMUL.contract(MATMUL.problem("M=1,N=1,K=16", "float32", {"allow_tf32": True}))
    assert tf32.u_operand == 2**-11 and tf32.ref_factor is None


def test_contract_check_catches_errors_and_nonfinite():
    c = ErrorContract("float32", 2**-24, 2**-24, 8)
    ref = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    assert c.check(ref.float(), ref, ref.abs())[0]
    bad = ref.clone()
    bad[1] += 1e-3
    ok, msg = c.check(bad.float(), ref, ref.abs())
    assert not ok and "exceeds contract" in msg and "(1,)" in msg
    nan = ref.clone()
    nan[2] = float("nan")
    assert not c.check(nan.float(), ref, ref.abs())[0]
    # NaN where the oracle has NaN is correct
    assert c.check(nan.float(), nan, ref.abs())[0]


def test_exact_inputs_are_small_integers():
    p = MATMUL.problem("M=5,N=7,K=300", "bfloat16", {"bias": True})
    x = MATMUL.exact_inputs(p, torch.Generator().manual_seed(0))
    for t in x.values():
        assert torch.equal(t, t.round()) and t.abs().max() <= 2
