"""int4_matmul: the packed formats (hand-built bit patterns, round trips, the independent reference), both
variants of the kernel against the spec's reference under its error contract, the public op."""
import pytest
import torch

from warpsmith.errors import InvalidInputError
from warpsmith.ops import get_op, get_variant, int4_matmul
from warpsmith.ops.lowprec.int4.formats import (act_order_g_idx, dequantize, pack_awq, pack_gptq,
                                                quantize_int4, unpack)
from warpsmith.ops.lowprec.int4.spec import dequantize_reference
from warpsmith.targets import get_target

H100 = get_target("h100")
SPEC = get_op("int4_matmul")


# ---- formats: known nibbles at known positions ---------------------------------------------------
def test_awq_nibble_positions_by_hand():
    """AutoAWQ packs word j of a row as nibble i = column 8j + [0, 2, 4, 6, 1, 3, 5, 7][i]."""
    K, N, G = 32, 16, 32
    word = 0
    for i, v in enumerate([1, 2, 3, 4, 5, 6, 7, 8]):  # nibble i holds value i + 1
        word |= v << (4 * i)
    qweight = torch.zeros((K, N // 8), dtype=torch.int32)
    qweight[5, 1] = word - 2**32 if word >= 2**31 else word
    qzeros = torch.zeros((1, N // 8), dtype=torch.int32)
    scales = torch.ones((1, N), dtype=torch.float16)
    w = dequantize_reference("awq", qweight, qzeros, scales, G)
    # column 8 + c holds the value of nibble AWQ_ORDER.index(c), i.e. nibble i -> column 8 + AWQ_ORDER[i]
    expect = {8 + 0: 1, 8 + 2: 2, 8 + 4: 3, 8 + 6: 4, 8 + 1: 5, 8 + 3: 6, 8 + 5: 7, 8 + 7: 8}
    for col, v in expect.items():
        assert w[5, col] == v, (col, w[5, col])
    assert w.abs().sum() == sum(expect.values())  # nothing else set
    q, z = unpack(pack_awq(w.to(torch.int64), torch.zeros((1, N), dtype=torch.int64), scales, G))
    assert torch.equal(q, w.to(torch.int64))


def test_awq_zero_and_scale_groups_by_hand():
    K, N, G = 64, 8, 32
    qzeros = torch.zeros((2, 1), dtype=torch.int32)
    qzeros[1, 0] = 3 << (4 * 4)  # nibble 4 of group 1 -> column 1
    scales = torch.ones((2, N), dtype=torch.float16)
    scales[1, 1] = 0.5
    w = dequantize_reference("awq", torch.zeros((K, 1), dtype=torch.int32), qzeros, scales, G)
    assert torch.all(w[32:, 1] == -1.5) and torch.all(w[:32, 1] == 0) and w[:, [0, 2, 3, 4, 5, 6, 7]].abs().sum() == 0


def test_gptq_nibble_positions_and_zero_offset_by_hand():
    """GPTQ v1 packs 8 rows of K per word (row 8r + i in nibble i); qzeros pack N in plain order, storing z - 1."""
    K, N, G = 32, 8, 32
    qweight = torch.zeros((K // 8, N), dtype=torch.int32)
    qweight[2, 3] = (9 << (4 * 6))  # row 8*2 + 6 = 22, column 3
    qzeros = torch.zeros((1, 1), dtype=torch.int32)
    qzeros[0, 0] = 4 << (4 * 3)  # column 3 stores 4: z = 5; every other column stores 0: z = 1
    scales = torch.full((1, N), 2.0, dtype=torch.float16)
    w = dequantize_reference("gptq", qweight, qzeros, scales, G)
    assert w[22, 3] == (9 - 5) * 2
    assert torch.all(w[torch.arange(K) != 22, 3] == -10)  # q = 0, z = 5
    assert torch.all(w[:, [0, 1, 2, 4, 5, 6, 7]] == -2)  # q = 0, z = 1


def test_gptq_g_idx_selects_each_rows_group():
    K, N, G = 64, 8, 32
    qweight = torch.zeros((K // 8, N), dtype=torch.int32)
    qzeros = torch.zeros((2, 1), dtype=torch.int32)  # z = 1 everywhere
    scales = torch.stack([torch.full((N,), 1.0), torch.full((N,), 4.0)]).half()
    g_idx = torch.zeros(K, dtype=torch.int32)
    g_idx[[3, 40]] = 1
    w = dequantize_reference("gptq", qweight, qzeros, scales, G, g_idx)
    assert torch.all(w[[3, 40]] == -4) and torch.all(w[[0, 1, 2, 4, 32, 63]] == -1)


@pytest.mark.parametrize("fmt", ["awq", "gptq"])
@pytest.mark.parametrize("G", [32, 64, 128])
def test_pack_unpack_round_trip_and_reference_agree(fmt, G):
    gen = torch.Generator().manual_seed(G)
    K, N = 2 * G, 24
    q = torch.randint(0, 16, (K, N), generator=gen)
    z = torch.randint(1 if fmt == "gptq" else 0, 16, (K // G, N), generator=gen)
    s = (torch.rand((K // G, N), generator=gen) + 0.1).half()
    g_idx = act_order_g_idx(torch.randperm(K, generator=gen), G) if fmt == "gptq" else None
    packed = pack_awq(q, z, s, G) if fmt == "awq" else pack_gptq(q, z, s, G, g_idx)
    assert packed.qweight.dtype == torch.int32 and packed.qzeros.dtype == torch.int32
    assert tuple(packed.qweight.shape) == ((K, N // 8) if fmt == "awq" else (K // 8, N))
    q2, z2 = unpack(packed)
    assert torch.equal(q2, q) and torch.equal(z2, z)
    ref = dequantize_reference(fmt, packed.qweight, packed.qzeros, s.double(), G, packed.g_idx)
    assert torch.equal(dequantize(packed, torch.float64), ref)
    g = packed.g_idx.long() if g_idx is not None else torch.arange(K) // G
    assert torch.equal(ref, (q - z[g]).double() * s.double()[g])


@pytest.mark.parametrize("fmt", ["awq", "gptq"])
def test_rtn_quantization_error_is_within_half_a_step(fmt):
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(128, 16, generator=gen)
    packed = quantize_int4(w, 64, fmt)
    err = (dequantize(packed, torch.float64) - w.double()).abs()
    step = packed.scales.double().repeat_interleave(64, 0)
    assert torch.all(err <= 0.5 * step * (1 + 1e-3) + 1e-6) or fmt == "gptq"  # symmetric GPTQ clips at +8s
    assert float(err.max()) < 0.6 * float(step.max())


def test_format_constraints_and_bad_values_are_refused():
    with pytest.raises(InvalidInputError, match="multiple of 8"):
        quantize_int4(torch.randn(64, 12), 32, "awq")
    with pytest.raises(InvalidInputError, match="multiple of the group size"):
        quantize_int4(torch.randn(48, 16), 32, "awq")
    with pytest.raises(InvalidInputError, match=r"\[1, 16\]"):
        pack_gptq(torch.zeros(32, 8, dtype=torch.int64), torch.zeros(1, 8, dtype=torch.int64),
                  torch.ones(1, 8).half(), 32)
    with pytest.raises(InvalidInputError, match="g_idx"):
        pack_gptq(torch.zeros(32, 8, dtype=torch.int64), torch.ones(1, 8, dtype=torch.int64),
                  torch.ones(1, 8).half(), 32, torch.full((32,), 1))


# ---- kernels against the spec under its contract -------------------------------------------------
def _check(p, variant, cfg, seed=0, dist="normal"):
    inputs = SPEC.make_inputs(p, torch.Generator().manual_seed(seed), dist)
    out = variant.launch(inputs, p, cfg)
    ref64, scale = SPEC.oracle(inputs, p.attrs)
    ok, msg = SPEC.contract(p).check(out, ref64, scale, SPEC.reference(inputs, p.attrs))
    assert ok, (p.describe(), cfg, msg)


CASES = [("awq", False), ("gptq", False), ("gptq", True)]


@pytest.mark.parametrize("fmt, act_order", CASES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemv_odd_shapes_split_k(fmt, act_order, dtype):
    v = get_variant("int4_matmul", "gemv")
    p = SPEC.problem({"M": 3, "N": 40, "K": 96}, dtype, {"format": fmt, "group_size": 32, "act_order": act_order,
                                                        "bias": True})
    for split, bk in ((1, 32), (2, 64)):  # 96 = one slice; two slices of 64, the second with a tail
        _check(p, v, {**v.default_config(p, H100), "SPLIT_K": split, "BLOCK_K": bk, "BLOCK_N": 16})


@pytest.mark.parametrize("fmt, act_order", CASES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_odd_shapes(fmt, act_order, dtype):
    v = get_variant("int4_matmul", "gemm")
    p = SPEC.problem({"M": 21, "N": 24, "K": 64}, dtype, {"format": fmt, "group_size": 64, "act_order": act_order,
                                                         "bias": fmt == "awq"})
    _check(p, v, {**v.default_config(p, H100), "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32})


def test_group_128_and_block_k_across_groups():
    v = get_variant("int4_matmul", "gemm")
    p = SPEC.problem({"M": 17, "N": 16, "K": 256}, "float16", {"format": "awq", "group_size": 128})
    _check(p, v, {**v.default_config(p, H100), "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 128}, dist="outliers")


def test_dispatch_picks_gemv_for_small_m_and_gemm_for_large():
    from warpsmith.core.registry import default_variant
    from warpsmith.ops import REGISTRY

    vs = REGISTRY.variants("int4_matmul")
    small = SPEC.problem({"M": 1, "N": 4096, "K": 4096}, "float16")
    large = SPEC.problem({"M": 4096, "N": 4096, "K": 4096}, "float16")
    assert default_variant(small, vs, H100).name == "gemv"
    assert default_variant(large, vs, H100).name == "gemm"
    assert "M=4096 > 16" in get_variant("int4_matmul", "gemv").invalid(large, {"SPLIT_K": 1}, H100)


# ---- the public op -------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["awq", "gptq"])
def test_op_matches_dequantized_product(fmt):
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(64, 24, generator=gen) * 0.1
    g_idx = act_order_g_idx(torch.randperm(64, generator=gen), 32) if fmt == "gptq" else None
    pk = quantize_int4(w, 32, fmt, g_idx=g_idx)
    x = torch.randn(2, 3, 64, generator=gen).half()
    bias = torch.randn(24, generator=gen).half()
    y = int4_matmul(x, pk.qweight, pk.scales, pk.qzeros, 32, format=fmt, g_idx=pk.g_idx if g_idx is not None else None,
                    bias=bias)
    assert y.shape == (2, 3, 24) and y.dtype == torch.float16
    ref = x.double() @ dequantize(pk, torch.float64) + bias.double()
    scale = x.double().abs() @ dequantize(pk, torch.float64).abs() + bias.double().abs()
    assert torch.all((y.double() - ref).abs() <= 2**-11 * (ref.abs() + 2 * scale) + 1e-6)


def test_op_refuses_bad_arguments():
    pk = quantize_int4(torch.randn(64, 16), 32, "awq")
    x = torch.randn(3, 64).half()
    with pytest.raises(InvalidInputError, match="format"):
        int4_matmul(x, pk.qweight, pk.scales, pk.qzeros, 32, format="exl2")
    with pytest.raises(InvalidInputError, match="qweight"):
        int4_matmul(x, pk.qweight.t().contiguous(), pk.scales, pk.qzeros, 32)
    with pytest.raises(InvalidInputError, match="group_size"):
        int4_matmul(x, pk.qweight, pk.scales, pk.qzeros, 48)
    with pytest.raises(InvalidInputError, match="dtype of x"):
        int4_matmul(x.float(), pk.qweight, pk.scales, pk.qzeros, 32)
    with pytest.raises(InvalidInputError, match="g_idx"):
        int4_matmul(x, pk.qweight, pk.scales, pk.qzeros, 32, g_idx=torch.zeros(64, dtype=torch.int32))
    g = quantize_int4(torch.randn(64, 16), 32, "gptq")
    with pytest.raises(InvalidInputError, match="values of g_idx"):
        int4_matmul(x, g.qweight, g.scales, g.qzeros, 32, format="gptq", g_idx=torch.full((64,), 2, dtype=torch.int32))
