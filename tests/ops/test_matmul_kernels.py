"""GEMM variants under the interpreter against the reference, under the error contract."""
import pytest
import torch

from warpsmith.ops import get_variant, variants
from warpsmith.ops.matmul.spec import MATMUL
from warpsmith.targets import get_target

H100 = get_target("h100")
SMALL = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, num_warps=2, num_stages=2)


def run(variant, problem, cfg, seed=0, dist="normal"):
    inputs = MATMUL.make_inputs(problem, torch.Generator().manual_seed(seed), dist)
    out = variant.launch(inputs, problem, cfg)
    ref64, scale = MATMUL.oracle(inputs, problem.attrs)
    return out, MATMUL.contract(problem).check(out, ref64, scale, MATMUL.reference(inputs, problem.attrs))


def config_for(name, problem, **over):
    v = get_variant("matmul", name)
    cfg = {**v.default_config(problem, H100), **SMALL, "EVEN_K": False, **over}
    if name == "splitk":
        cfg.setdefault("SPLIT_K", 2)
    return v, cfg


@pytest.mark.parametrize("name", ["tiled", "splitk", "persistent"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_variants_odd_shape_every_dtype(name, dtype):
    p = MATMUL.problem({"M": 37, "N": 19, "K": 41}, dtype, {"bias": True, "activation": "gelu"})
    v, cfg = config_for(name, p)
    out, (ok, msg) = run(v, p, cfg)
    assert out.shape == (37, 19) and out.dtype == p.dtype
    assert ok, msg


@pytest.mark.parametrize("layout", ["tn", "nt", "tt"])
@pytest.mark.parametrize("activation", ["relu", "silu"])
def test_transposed_operands_and_epilogues(layout, activation):
    p = MATMUL.problem({"M": 23, "N": 17, "K": 29}, "float16", {"layout": layout, "activation": activation})
    inputs = MATMUL.make_inputs(p, torch.Generator().manual_seed(1))
    assert (inputs["a"].stride(-1) != 1) == (layout[0] == "t")  # no copy: the kernel sees the strides
    v, cfg = config_for("tiled", p)
    _, (ok, msg) = run(v, p, cfg)
    assert ok, msg


@pytest.mark.parametrize("name", ["tiled", "splitk", "persistent"])
def test_batched(name):
    p = MATMUL.problem({"M": 9, "N": 20, "K": 33, "B": 3}, "float16", {"bias": True})
    v, cfg = config_for(name, p)
    out, (ok, msg) = run(v, p, cfg)
    assert out.shape == (3, 9, 20) and ok, msg


def test_broadcast_weight_over_batch():
    a = torch.randn(2, 5, 32).half()
    b = torch.randn(32, 7).half()
    p = MATMUL.problem({"M": 5, "N": 7, "K": 32, "B": 2}, "float16")
    v, cfg = config_for("tiled", p)
    out = v.launch({"a": a, "b": b}, p, cfg)
    torch.testing.assert_close(out.float(), (a.float() @ b.float()), rtol=2e-3, atol=2e-3)


def test_even_k_specialization_and_its_guard():
    v = get_variant("matmul", "tiled")
    p = MATMUL.problem({"M": 20, "N": 18, "K": 64}, "float16")
    cfg = {**v.default_config(p, H100), **SMALL, "EVEN_K": True}
    assert v.rejection(p, cfg, H100) is None
    _, (ok, msg) = run(v, p, cfg)
    assert ok, msg
    odd = MATMUL.problem({"M": 20, "N": 18, "K": 60}, "float16")
    assert "EVEN_K" in v.rejection(odd, cfg, H100)
    # the guard matters: on K=60 the unmasked loads read past K. The operands are views into buffers
    # padded with NaN past K, so what the kernel reads there is known (in bounds, and NaN)
    inputs = MATMUL.make_inputs(odd, torch.Generator().manual_seed(0))
    pad_a = torch.full((20, 64), float("nan"), dtype=torch.float16)
    pad_b = torch.full((64, 18), float("nan"), dtype=torch.float16)
    pad_a[:, :60], pad_b[:60] = inputs["a"], inputs["b"]
    padded = {"a": pad_a[:, :60], "b": pad_b[:60]}
    out = v.launch(padded, odd, cfg)
    ref64, scale = MATMUL.oracle(inputs, odd.attrs)
    ok, msg = MATMUL.contract(odd).check(out, ref64, scale)
    assert not ok and "NaN where the reference has none" in msg, msg
    # and the same kernel with the guard's masks (EVEN_K=False) reads none of the padding
    assert MATMUL.contract(odd).check(v.launch(padded, odd, {**cfg, "EVEN_K": False}), ref64, scale)[0]


def test_splitk_uneven_slices_and_atomic_reduce():
    p = MATMUL.problem({"M": 17, "N": 15, "K": 100}, "float32", {"bias": True})
    for reduce in ("workspace", "atomic"):
        v, cfg = config_for("splitk", p, SPLIT_K=4, REDUCE=reduce)
        _, (ok, msg) = run(v, p, cfg)
        assert ok, (reduce, msg)
    v = get_variant("matmul", "splitk")
    assert v.is_deterministic({"REDUCE": "workspace"}) and not v.is_deterministic({"REDUCE": "atomic"})
    tiny = MATMUL.problem({"M": 4, "N": 4, "K": 16}, "float16")
    assert "empty slices" in v.rejection(tiny, {**cfg, "SPLIT_K": 4}, H100)
    # slices are rounded up to BLOCK_K: K=1154 in 12 slices of 128 leaves the last two empty
    # (found by the prover: their start index overshoots K and its int32 offset wrapped)
    wide = MATMUL.problem({"M": 4, "N": 4, "K": 1154}, "float16")
    assert "empty slices" in v.rejection(wide, {**cfg, "BLOCK_K": 32, "SPLIT_K": 12}, H100)
    assert v.rejection(wide, {**cfg, "BLOCK_K": 32, "SPLIT_K": 10}, H100) is None  # 9 slices of 128, one of 2


def test_tf32_is_emulated_and_rejected_by_the_fp32_contract():
    p = MATMUL.problem({"M": 32, "N": 32, "K": 64}, "float32")
    v, cfg = config_for("tiled", p, PRECISION="tf32")
    _, (ok, msg) = run(v, p, cfg)
    assert not ok and "error" in msg
    allowed = MATMUL.problem({"M": 32, "N": 32, "K": 64}, "float32", {"allow_tf32": True})
    _, (ok, msg) = run(v, allowed, cfg)
    assert ok, msg


def test_bf16_output_rounds_to_nearest():
    # the interpreter truncates fp32->bf16; the shim must round as the GPU does
    p = MATMUL.problem({"M": 64, "N": 64, "K": 32}, "bfloat16")
    v, cfg = config_for("tiled", p)
    inputs = MATMUL.make_inputs(p, torch.Generator().manual_seed(3))
    out = v.launch(inputs, p, cfg)
    exact = MATMUL.oracle(inputs, p.attrs)[0]
    assert (out.double() - exact).abs().max() <= (exact.abs() * 2**-8).max() + 1e-30


def test_validity_predicate_uses_the_target():
    v = get_variant("matmul", "tiled")
    p = MATMUL.problem({"M": 4096, "N": 4096, "K": 4096}, "float32")
    cfg = dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=5, EVEN_K=True,
               PRECISION="ieee")
    assert "shared memory" in v.invalid(p, cfg, H100)
    assert "shared memory" in v.invalid(p, {**cfg, "num_stages": 1, "BLOCK_K": 64}, get_target("mi300x"))
    assert "registers" in v.invalid(p, {**cfg, "BLOCK_K": 16, "num_stages": 1, "num_warps": 2}, H100)
    assert set(variants("matmul")) == {"tiled", "splitk", "persistent"}


@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
def test_nan_and_inf_inputs_propagate_as_in_the_reference(activation):
    p = MATMUL.problem({"M": 20, "N": 18, "K": 24}, "float16", {"bias": True, "activation": activation})
    v, cfg = config_for("tiled", p)
    _, (ok, msg) = run(v, p, cfg, dist="specials")
    assert ok, msg


def test_operands_beyond_32_bit_indexing_are_refused():
    from warpsmith.errors import InvalidInputError

    p = MATMUL.problem({"M": 4, "N": 4, "K": 4}, "float16")
    v, cfg = config_for("tiled", p)
    # a view with a huge row stride (on the meta device: no memory); refused before any launch
    a = torch.empty_strided((4, 4), (2**29, 1), dtype=torch.float16, device="meta")
    b = torch.empty((4, 4), dtype=torch.float16, device="meta")
    with pytest.raises(InvalidInputError, match="32 bits"):
        v.launch({"a": a, "b": b}, p, cfg)
