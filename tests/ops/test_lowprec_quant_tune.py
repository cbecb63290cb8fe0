"""The quantization ops on the pipeline (ops/lowprec/quant/spec.py, variant.py, contract.py):
`tune` searches and verifies, dispatch uses the record, the launch contracts prove, validity refuses bad
configs, and planted bugs are rejected by the verifier's exact criterion (quant/judge.py) or the prover."""
import json
import os

import fresh_interpreter
import pytest
import torch

from warpsmith import dispatch
from warpsmith.core._triton import tl, triton
from warpsmith.core.errors import InvalidInputError
from warpsmith.db import TuningDB
from warpsmith.ops import OPS
from warpsmith.ops.lowprec.quant import kernel as K
from warpsmith.ops.lowprec.quant.judge import judge_quantize, judge_stochastic, neighbours
from warpsmith.ops.lowprec.quant.op import quantize, stochastic_round
from warpsmith.ops.lowprec.quant.reference import quantize_blocks, quantize_rows, quantize_tensor
from warpsmith.ops.lowprec.quant.spec import DEQUANTIZE, QUANTIZE, QUANTIZE_STATIC, STOCHASTIC_ROUND
from warpsmith.ops.lowprec.quant.variant import VARIANTS, QuantizeRows, StochasticRoundElementwise
from warpsmith.targets import get_target
from warpsmith.tune import tune
from warpsmith.verify.verifier import verify_candidate

H100 = get_target("h100")
ROWS, SR = VARIANTS[:2]


def bits(q):
    return q.view(torch.uint8) if q.element_size() == 1 and q.dtype != torch.int8 else q


def _failed(cert):
    return [(c.name, c.status) for c in cert.checks if c.status.startswith("failed")]


def _planted(monkeypatch, spec, p, variant, cfg, name, bug):
    """The verifier passes ``variant`` at ``cfg``, then, with quant/kernel.py's ``name`` replaced by ``bug``,
    fails exactly one check: its (name, status)."""
    assert not _failed(verify_candidate(spec, p, variant, cfg, H100))
    monkeypatch.setattr(K, name, bug)
    (failure,) = _failed(verify_candidate(spec, p, variant, cfg, H100))
    return failure


def test_the_ops_are_registered():
    assert {"quantize", "stochastic_round", "quantize_static", "dequantize"} <= set(OPS)
    assert QUANTIZE.problem("M=2,N=3", "bfloat16").attrs == {"format": "e4m3", "granularity": "row", "norm": False,
                                                              "eps": 1e-6}


# the quick tier tunes one granularity (the tune -> verify -> record -> dispatch path is the same); each
# granularity's kernel is checked bitwise against the reference in test_lowprec_quant.py
@pytest.mark.parametrize("gran", ["block", pytest.param("row", marks=pytest.mark.slow),
                                  pytest.param("tensor", marks=pytest.mark.slow)])
def test_tune_quantize_explores_verifies_and_dispatch_uses_the_record(tmp_path, monkeypatch, gran):
    db_path = tmp_path / "q.db"
    monkeypatch.setenv("WARPSMITH_DB", str(db_path))
    p = QUANTIZE.problem({"M": 3, "N": 300}, "bfloat16", {"format": "e4m3", "granularity": gran})
    r = tune(p, budget=6, finalists=1, db=TuningDB(db_path))
    assert r.evaluations > 1 and len({json.dumps(s.config, sort_keys=True) for s in r.leaderboard}) > 1
    assert r.winner is not None and r.record_id is not None and not _failed(r.certificate)
    dispatch.clear_cache()
    choice = dispatch.select(p, VARIANTS)
    assert choice.source == "db" and choice.config == r.winner.config
    x = QUANTIZE.make_inputs(p, torch.Generator().manual_seed(3))["x"]
    q, s = quantize(x, "e4m3", gran)  # the public function, through the record
    qr, sr = {"row": quantize_rows(x, "e4m3"), "block": quantize_blocks(x, "e4m3", 1, 128),
              "tensor": quantize_tensor(x, "e4m3")}[gran]
    assert torch.equal(s, sr) and torch.equal(bits(q), bits(qr))  # bf16 x: the interpreter's division is IEEE


def test_tune_stochastic_round_explores_verifies_and_dispatch_uses_the_record(tmp_path, monkeypatch):
    db_path = tmp_path / "sr.db"
    monkeypatch.setenv("WARPSMITH_DB", str(db_path))
    p = STOCHASTIC_ROUND.problem({"N": 3000}, "float32", {"target": "e4m3", "seed": 11})
    r = tune(p, budget=6, finalists=1, db=TuningDB(db_path))
    assert r.evaluations > 1 and len({json.dumps(s.config, sort_keys=True) for s in r.leaderboard}) > 1
    assert r.winner is not None and not _failed(r.certificate)
    dispatch.clear_cache()
    choice = dispatch.select(p, VARIANTS)
    assert choice.source == "db" and choice.config == r.winner.config
    assert STOCHASTIC_ROUND.problem({"N": 3000}, "float32", {"target": "e4m3", "seed": 5}).key_attrs == p.key_attrs
    x = torch.randn(3000, generator=torch.Generator().manual_seed(0)) * 100
    y = stochastic_round(x, torch.float8_e4m3fn, 11)
    lo, hi, _ = neighbours(x, "e4m3")
    assert bool(((y.float() == lo) | (y.float() == hi)).all())
    default = SR.launch({"x": x}, p, SR.default_config(p, H100))  # Philox(seed, i): the same bits at any BLOCK
    assert torch.equal(bits(y), bits(default))


def test_heuristic_defaults_are_todays_launch():
    p = QUANTIZE.problem({"M": 2, "N": 300}, "float16", {"granularity": "row"})
    assert ROWS.default_config(p, H100) == {"BLOCK": 512, "num_warps": 4}
    big = QUANTIZE.problem({"M": 2, "N": 10000}, "float16", {"granularity": "row"})
    assert ROWS.default_config(big, H100) == {"BLOCK": 4096, "num_warps": 4}
    blk = QUANTIZE.problem({"M": 2, "N": 10000}, "float16", {"granularity": "block", "norm": True})
    assert ROWS.default_config(blk, H100) == {"BLOCK": 128, "num_warps": 4}
    for prob in (p, big, blk):
        assert ROWS.rejection(prob, ROWS.default_config(prob, H100), H100) is None
    sr = STOCHASTIC_ROUND.problem({"N": 2**20}, "float32", {"target": "bf16"})
    assert SR.rejection(sr, SR.default_config(sr, H100), H100) is None
    assert SR.GPU_DEFAULT == {"BLOCK": 1024, "num_warps": 4}


def test_validity_rejects_bad_configs_naming_why():
    blk = QUANTIZE.problem({"M": 2, "N": 1000}, "bfloat16", {"granularity": "block"})
    assert "multiple of 128" in ROWS.rejection(blk, {"BLOCK": 64, "num_warps": 4}, H100)
    assert ROWS.rejection(blk, {"BLOCK": 256, "num_warps": 4}, H100) is None
    row = QUANTIZE.problem({"M": 2, "N": 1000}, "bfloat16", {"granularity": "row"})
    assert ROWS.rejection(row, {"BLOCK": 64, "num_warps": 4}, H100) is None
    assert "registers" in ROWS.rejection(row, {"BLOCK": 65536, "num_warps": 1}, H100)
    assert "threads" in ROWS.rejection(row, {"BLOCK": 1024, "num_warps": 64}, H100)
    huge = QUANTIZE.problem({"M": 1, "N": 2**31 - 100}, "bfloat16", {"granularity": "row"})
    assert "2^31" in ROWS.invalid(huge, {"BLOCK": 128, "num_warps": 4}, H100)
    x = torch.zeros(2, 1000, dtype=torch.bfloat16)
    with pytest.raises(InvalidInputError, match="multiple of 128"):
        ROWS.launch({"x": x}, blk, {"BLOCK": 192, "num_warps": 4})
    with pytest.raises(InvalidInputError, match=r"\(2, 1000\)"):
        ROWS.launch({"x": x[:, :999]}, blk, {"BLOCK": 128, "num_warps": 4})
    sr = STOCHASTIC_ROUND.problem({"N": 2**32 + 1}, "float32", {"target": "bf16"})
    assert "2^32" in SR.invalid(sr, {"BLOCK": 1024, "num_warps": 4}, H100)


@pytest.mark.parametrize("fmt, gran, norm, dtype", [("e4m3", "block", True, "bfloat16"), ("int8", "row", True, "float16"),
                                                    ("e5m2", "row", False, "float32"), ("e4m3", "tensor", True, "bfloat16"),
                                                    ("int8", "tensor", False, "float32")])
def test_verifier_accepts_every_distribution(fmt, gran, norm, dtype):
    p = QUANTIZE.problem({"M": 3, "N": 260}, dtype, {"format": fmt, "granularity": gran, "norm": norm})
    cfg = {"BLOCK": 256 if gran == "block" else 64, "num_warps": 2}
    cert = verify_candidate(QUANTIZE, p, ROWS, cfg, H100)
    assert not _failed(cert) and any(c.name == "odd_shapes" for c in cert.checks)


def test_judge_is_exact_one_quantization_step_is_rejected():
    p = QUANTIZE.problem({"M": 2, "N": 200}, "float32", {"format": "e4m3", "granularity": "block"})
    x = QUANTIZE.make_inputs(p, torch.Generator().manual_seed(1))
    q, s = ROWS.launch(x, p, ROWS.default_config(p, H100))
    assert judge_quantize(p, x, (q, s)) is None
    q2 = q.clone()
    q2.view(torch.uint8)[1, 7] += 1  # one step away from the correct rounding
    assert "output 0 (q)" in judge_quantize(p, x, (q2, s))
    s2 = s.clone()
    s2[0, 1] *= 1 + 2**-20  # a scale off by 16 ulps (the bound is 4 ulps: 2^-22 relative)
    assert "output 1 (scale)" in judge_quantize(p, x, (q, s2))


def test_judge_stochastic_rejects_a_biased_rounding():
    p = STOCHASTIC_ROUND.problem({"N": 4000}, "float32", {"target": "bf16"})
    x = torch.randn(4000, generator=torch.Generator().manual_seed(2))
    assert judge_stochastic(p, {"x": x}, (SR.launch({"x": x}, p, SR.default_config(p, H100)),)) is None
    down = neighbours(x, "bf16")[0].to(torch.bfloat16)  # always toward zero: neighbours, but biased
    assert "biased" in judge_stochastic(p, {"x": x}, (down,))
    nearest = x.to(torch.bfloat16)  # round to nearest: neighbours, and biased too
    assert "biased" in judge_stochastic(p, {"x": x}, (nearest,))


# ---- planted bugs ---------------------------------------------------------------------------------------
@triton.jit
def group_index_one_block_behind(c, N, GROUP: tl.constexpr, BLOCK: tl.constexpr):
    g = c // GROUP - 1 + tl.arange(0, BLOCK // GROUP)  # the block-scale index one block behind
    return g, g * GROUP < N


@triton.jit
def group_index_one_block_ahead(c, N, GROUP: tl.constexpr, BLOCK: tl.constexpr):
    g = c // GROUP + 1 + tl.arange(0, BLOCK // GROUP)  # the block-scale index one block ahead (masked at the end)
    return g, g * GROUP < N


def test_block_scale_index_one_block_ahead_is_rejected_by_the_verifier(monkeypatch):
    """In bounds (the mask drops the store past the end), so only the verifier can see it: every scale sits
    one group late and the first is never written. (One block *behind* stores before the tensor: the
    interpreter would corrupt memory, so that one is left to the prover, below.)"""
    p = QUANTIZE.problem({"M": 3, "N": 300}, "bfloat16", {"format": "e4m3", "granularity": "block"})
    name, status = _planted(monkeypatch, QUANTIZE, p, ROWS, ROWS.default_config(p, H100), "group_index",
                            group_index_one_block_ahead)
    assert name == "error_contract" and "output 1 (scale)" in status, status


class AmaxScaleOfScales:
    """amax_scale_kernel launched with QMAX = 1: the workspace read as if it held the rows' scales
    (amax / QMAX), not their amaxes (the division by QMAX forgotten)."""

    def __init__(self, real):
        self.real = real

    def __getitem__(self, grid):
        return lambda a, s, M, qmax, **meta: self.real[grid](a, s, M, 1.0, **meta)


def test_per_tensor_scale_confused_with_the_row_amax_is_rejected_by_the_verifier(monkeypatch):
    p = QUANTIZE.problem({"M": 3, "N": 300}, "bfloat16", {"format": "e4m3", "granularity": "tensor"})
    name, status = _planted(monkeypatch, QUANTIZE, p, ROWS, ROWS.default_config(p, H100), "amax_scale_kernel",
                            AmaxScaleOfScales(K.amax_scale_kernel))
    assert name == "error_contract" and "output 1 (scale)" in status, status


@triton.jit
def stochastic_round_unsaturated(x_ptr, y_ptr, n, seed, FMT: tl.constexpr, BLOCK: tl.constexpr, EMULATE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    a = tl.abs(x)  # no saturation at 448: 500 rounds to 480 or 512, which e4m3 encodes as NaN or not at all
    ulp = K.pow2(tl.maximum(K.exp_of(a), -6) - 3)
    lo = (a / ulp).to(tl.int32).to(tl.float32) * ulp
    v = tl.where(tl.rand(seed, offs.to(tl.uint32)) < (a - lo) / ulp, lo + ulp, lo)
    v = tl.where(x != x, x, tl.where(x < 0, -v, v))
    tl.store(y_ptr + offs, K.fp8_bits(v, 3, -6, 7, 0x7F), mask=mask)


def test_missing_e4m3_saturation_in_stochastic_rounding_is_rejected(monkeypatch):
    p = STOCHASTIC_ROUND.problem({"N": 2000}, "float32", {"target": "e4m3", "seed": 3})
    name, status = _planted(monkeypatch, STOCHASTIC_ROUND, p, SR, {"BLOCK": 1024, "num_warps": 4},
                            "stochastic_round_kernel", stochastic_round_unsaturated)
    assert name == "error_contract" and "large inputs" in status and "NaN where the input has none" in status, status


# ---- proofs, in a fresh interpreter (z3's answers near a budget's edge depend on the process's history) --
def _fresh(code: str):
    return fresh_interpreter.last_json("import json\nfrom warpsmith.verify.symbolic import prove\n" + code)


def test_launch_contracts_prove_in_bounds_and_int32_for_every_shape():
    statuses = _fresh("""
from warpsmith.ops.lowprec.quant import contract as C
out = []
for c in C.CONTRACTS:
    for r in prove(c):
        out += [(r.contract, o.name, o.subject, o.status) for o in r.obligations]
print(json.dumps(out))
""")
    assert {k.split("[")[0] for k, *_ in statuses} == {"quant_rows_kernel", "stochastic_round_kernel",
                                                        "dequant_rows_kernel", "amax_scale_kernel"}
    memory = [(n, s, st) for _, n, s, st in statuses if n in ("in_bounds", "int32_no_overflow")]
    assert len(memory) >= 25 and all(st == "proved" for _, _, st in memory), [m for m in memory if m[2] != "proved"]
    assert not [s for *_, s in statuses if s.startswith("failed")]


def test_block_scale_index_one_block_behind_fails_the_prover():
    here = os.path.dirname(os.path.abspath(__file__))
    status, subject, cex = _fresh(f"""
import sys
sys.path.insert(0, {here!r})
import test_lowprec_quant_tune as T
from warpsmith.ops.lowprec.quant import contract as C, kernel as K
K.group_index = T.group_index_one_block_behind
c = C.rows_contract("block", [C.rows_meta("block", 256, False, "e4m3")])
ob = [o for r in prove(c) for o in r.obligations if o.name == "in_bounds" and "s_ptr" in o.subject][0]
print(json.dumps([ob.status, ob.subject, ob.counterexample], default=str))
""")
    assert status == "failed", (status, subject)
    assert cex["offset"] < 0, cex  # row 0's first chunk stores its first scale before the tensor


# ---- quantize_static and dequantize -----------------------------------------------------------------------
@pytest.mark.parametrize("op, shape, attrs", [("quantize_static", {"M": 3, "N": 300}, {"format": "e4m3"}),
                                              ("dequantize", {"M": 3, "N": 300}, {"format": "e5m2", "scaling": "block"})])
def test_tune_static_and_dequantize_explore_verify_and_dispatch(tmp_path, monkeypatch, op, shape, attrs):
    from warpsmith.ops import get_op

    db_path = tmp_path / "sd.db"
    monkeypatch.setenv("WARPSMITH_DB", str(db_path))
    spec = get_op(op)
    p = spec.problem(shape, "bfloat16", attrs)
    r = tune(p, budget=4, finalists=1, db=TuningDB(db_path))
    assert r.evaluations > 1 and len({json.dumps(s.config, sort_keys=True) for s in r.leaderboard}) > 1
    assert r.winner is not None and not _failed(r.certificate)
    dispatch.clear_cache()
    assert dispatch.select(p, VARIANTS).config == r.winner.config
    inputs = spec.make_inputs(p, torch.Generator().manual_seed(4), "specials")
    if op == "quantize_static":
        from warpsmith.ops.lowprec.quant.op import quantize_static

        q = quantize_static(inputs["x"], inputs["scale"], "e4m3")  # through the record
        got, ref = q.float(), spec.reference(inputs, p.attrs).float()
        assert torch.equal(got.isnan(), ref.isnan()) and torch.equal(got.nan_to_num(), ref.nan_to_num())
        assert got.nan_to_num().abs().max() == 448 and torch.isnan(got).sum() == 1  # saturated (±inf too), NaN kept
    else:
        from warpsmith.ops.lowprec.quant.op import dequantize

        y = dequantize(inputs["q"], inputs["scale"], torch.bfloat16)
        ref = spec.reference(inputs, p.attrs).to(torch.bfloat16)
        assert torch.equal(y.isnan(), ref.isnan()) and torch.equal(y.nan_to_num(), ref.nan_to_num())


def test_dequantize_decodes_every_fp8_byte_under_the_interpreter():
    """The interpreter's own fp8 -> fp32 conversion gives 480 for e4m3 NaN (and 65536 for e5m2 inf): the
    kernel decodes the bytes itself there; all 256 of each format match torch's conversion."""
    from warpsmith.ops.lowprec.quant.op import dequantize

    for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        q = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt).reshape(2, 128)
        d, r = dequantize(q, torch.ones(1), torch.float32), q.float()
        assert torch.equal(d.isnan(), r.isnan()) and torch.equal(d.nan_to_num(), r.nan_to_num())


def test_static_validity_and_preconditions_name_expected_and_given():
    static = VARIANTS[2]
    p = QUANTIZE_STATIC.problem({"M": 2, "N": 100}, "float32", {"format": "int8"})
    x = torch.randn(2, 100)
    with pytest.raises(InvalidInputError, match=r"\(1,\) float32"):
        static.launch({"x": x, "scale": torch.ones(2)}, p, static.default_config(p, H100))
    deq = VARIANTS[3]
    pd = DEQUANTIZE.problem({"M": 2, "N": 300}, "float32", {"format": "int8", "scaling": "block"})
    with pytest.raises(InvalidInputError, match=r"\(2, 3\) float32"):
        deq.launch({"q": torch.zeros(2, 300, dtype=torch.int8), "scale": torch.ones(2, 1)}, pd,
                   deq.default_config(pd, H100))
