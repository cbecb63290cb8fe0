"""warpsmith.ops.matmul: correctness, dispatch from the DB, guards, torch.compile, autograd, errors."""
import pytest
import torch

import warpsmith.ops as wops
from warpsmith.db import TuningDB, TuningRecord
from warpsmith.errors import InvalidInputError
from warpsmith.ops import get_variant, variants
from warpsmith.dispatch import clear_cache, select
from warpsmith.ops.matmul import VARIANTS
from warpsmith.ops.matmul.op import problem_of
from warpsmith.core.settings import settings
from warpsmith.ops.matmul.spec import MATMUL
from warpsmith.targets import fingerprint, get_target

H100 = get_target("h100")


def check(out, a, b, bias=None, activation=None):
    p = problem_of(a, b, bias, activation or "none")
    inputs = {"a": a, "b": b} if bias is None else {"a": a, "b": b, "bias": bias}
    ref64, scale = MATMUL.oracle(inputs, p.attrs)
    ok, msg = MATMUL.contract(p).check(out, ref64, scale, MATMUL.reference(inputs, p.attrs))
    assert ok, msg


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_matmul_matches_reference(dtype):
    a, b, bias = torch.randn(19, 45, dtype=dtype), torch.randn(45, 23, dtype=dtype), torch.randn(23, dtype=dtype)
    out = wops.matmul(a, b, bias, "gelu")
    assert out.shape == (19, 23) and out.dtype == dtype
    check(out, a, b, bias, "gelu")


def test_transposed_and_batched_inputs_without_copies():
    a = torch.randn(3, 40, 12).half().transpose(1, 2)  # (3, 12, 40), K-major
    b = torch.randn(40, 9).half()
    check(wops.matmul(a, b), a, b)
    b3 = torch.randn(3, 9, 40).half().transpose(1, 2)
    check(wops.matmul(a, b3, activation="relu"), a, b3, None, "relu")


def _record(problem, variant, config, time_ms=0.01):
    return TuningRecord(op="matmul", variant=variant, shape=dict(problem.shape), dtype=problem.dtype_name,
                        attrs=dict(problem.attrs), target=settings().target, config=config,
                        fingerprint=fingerprint(get_variant("matmul", variant).source_hash()),
                        timing_kind="predicted", time_ms=time_ms, baseline_ms=None, verified=True,
                        certificate={"verdict": "accepted"})


def test_dispatch_uses_the_best_verified_record_and_checks_guards():
    a, b = torch.randn(20, 64).half(), torch.randn(64, 24).half()
    p = problem_of(a, b, None, "none")
    assert select(p, VARIANTS).source == "default"
    cfg = {**variants("matmul")["splitk"].default_config(p, H100),
           "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 2, "EVEN_K": True, "num_stages": 2, "num_warps": 2}
    assert get_variant("matmul", "splitk").rejection(p, cfg, H100) is None
    rid = TuningDB().put(_record(p, "splitk", cfg))
    clear_cache()
    choice = select(p, VARIANTS)
    assert (choice.source, choice.record_id, choice.variant.name) == ("db", rid, "splitk")
    check(wops.matmul(a, b), a, b)
    # same bucket, K=60: the record's EVEN_K guard fails there, so dispatch refuses it
    a2, b2 = torch.randn(20, 60).half(), torch.randn(60, 24).half()
    assert select(problem_of(a2, b2, None, "none"), VARIANTS).source == "default"
    check(wops.matmul(a2, b2), a2, b2)


def test_stale_records_are_ignored():
    a, b = torch.randn(8, 32).half(), torch.randn(32, 8).half()
    p = problem_of(a, b, None, "none")
    rec = _record(p, "tiled", variants("matmul")["tiled"].default_config(p, H100))
    rec.fingerprint = {**rec.fingerprint, "source_hash": "0" * 16}
    TuningDB().put(rec)
    clear_cache()
    assert select(p, VARIANTS).source == "default"


def test_custom_op_under_torch_compile_without_graph_break():
    def f(a, b, bias):
        return wops.matmul(a, b, bias, "silu") * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    a, b, bias = torch.randn(17, 32).half(), torch.randn(32, 16).half(), torch.randn(16).half()
    torch.testing.assert_close(compiled(a, b, bias), f(a, b, bias))
    assert hasattr(torch.ops.warpsmith, "matmul")


def test_gradients_match_the_reference():
    a = torch.randn(2, 9, 24, dtype=torch.float32, requires_grad=True)
    b = torch.randn(24, 11, dtype=torch.float32, requires_grad=True)
    bias = torch.randn(11, dtype=torch.float32, requires_grad=True)
    out = wops.matmul(a, b, bias, "gelu")
    g = torch.randn_like(out)
    out.backward(g)
    a64, b64, bias64 = (t.detach().double().requires_grad_() for t in (a, b, bias))
    torch.nn.functional.gelu(a64 @ b64 + bias64).backward(g.double())
    for mine, ref in ((a.grad, a64.grad), (b.grad, b64.grad), (bias.grad, bias64.grad)):
        torch.testing.assert_close(mine.double(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("args, fragment", [
    ((torch.randn(4, 5), torch.randn(6, 3)), "inner dimensions"),
    ((torch.randn(4, 5).half(), torch.randn(5, 3)), "dtype of b"),
    ((torch.randn(4, 5, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)), "dtype of a"),
    ((torch.randn(0, 5), torch.randn(5, 3)), "every dimension >= 1"),
    ((torch.randn(5), torch.randn(5, 3)), "2-D"),
    ((torch.randn(4, 5), torch.randn(2, 5, 3)), r"3-D \(B, K, N\) when a is 3-D"),
    ((torch.randn(2, 4, 5), torch.randn(3, 5, 3)), "batch size of b"),
    (([[1.0]], torch.randn(1, 1)), "torch.Tensor"),
    ((torch.randn(4, 5), torch.randn(5, 3), torch.randn(4)), r"bias: expected a 1-D tensor of shape \(3,\)"),
    ((torch.randn(4, 5), torch.randn(5, 3), None, "tanh"), "activation"),
    ((torch.randn(4, 5), torch.randn(5, 3, device="meta")), "device of b"),
])
def test_bad_input_is_refused_with_a_clear_message(args, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        wops.matmul(*args)


def test_dispatch_takes_the_next_record_whose_guard_holds_and_skips_other_triton_versions():
    a, b = torch.randn(20, 60).half(), torch.randn(60, 24).half()  # K=60: EVEN_K with BLOCK_K=16 cannot hold
    p = problem_of(a, b, None, "none")
    near = problem_of(torch.randn(20, 64).half(), torch.randn(64, 24).half(), None, "none")  # same bucket
    base = {**variants("matmul")["tiled"].default_config(p, H100), "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16,
            "num_warps": 2, "num_stages": 2}
    db = TuningDB()
    db.put(_record(near, "tiled", {**base, "EVEN_K": True}, time_ms=0.001))  # fastest, guard fails for K=60
    other = _record(near, "tiled", {**base, "EVEN_K": False, "GROUP_M": 4}, time_ms=0.002)
    other.fingerprint = {**other.fingerprint, "triton": "0.0.1"}  # compiled by another Triton: stale
    db.put(other)
    usable = db.put(_record(near, "tiled", {**base, "EVEN_K": False}, time_ms=0.003))
    clear_cache()
    choice = select(p, VARIANTS)
    assert (choice.source, choice.record_id) == ("db", usable)
    check(wops.matmul(a, b), a, b)


def test_dispatch_refuses_a_record_invalid_for_the_call_while_its_guards_hold():
    """Split-K with 4 slices of 16, recorded at K=64, leaves an empty slice at K=40 in the same
    bucket: no guard is active, but the config is invalid there, so dispatch must not use it."""
    a, b = torch.randn(20, 40).half(), torch.randn(40, 24).half()
    p = problem_of(a, b, None, "none")
    near = problem_of(torch.randn(20, 64).half(), torch.randn(64, 24).half(), None, "none")
    v = get_variant("matmul", "splitk")
    cfg = {**v.default_config(near, H100), "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 4,
           "EVEN_K": False, "num_stages": 2, "num_warps": 2}
    assert v.rejection(near, cfg, H100) is None and not v.failed_guards(p, cfg)
    assert "empty slices" in v.rejection(p, cfg, H100)
    db = TuningDB()
    rid = db.put(_record(near, "splitk", cfg))
    ranked = db.ranked("matmul", dict(p.shape), p.dtype_name, p.key_attrs, settings().target,
                       {n: x.source_hash() for n, x in variants("matmul").items()})
    assert [r.id for r in ranked] == [rid]  # the record is a candidate for this call
    clear_cache()
    assert select(p, VARIANTS).source == "default"
    check(wops.matmul(a, b), a, b)
