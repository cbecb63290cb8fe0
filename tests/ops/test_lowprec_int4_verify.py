"""int4_matmul under the verifier: both variants accepted whole; planted bugs (zero point not subtracted,
AWQ nibble order swapped, scale group off by one) rejected for their reasons; launch contracts proved."""
import pytest

from warpsmith.core._triton import tl, triton
from warpsmith.ops import get_op, get_variant
from warpsmith.ops.lowprec.int4 import kernel as K
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
SPEC = get_op("int4_matmul")
SMALL = {"gemv": {"BLOCK_N": 16, "BLOCK_K": 32, "SPLIT_K": 2, "num_warps": 2, "GROUP": 32, "PACKED": True},
         "gemm": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 2, "num_stages": 1, "GROUP": 32,
                  "PACKED": True}}


def _problem(variant, fmt, act_order=False, dtype="float16"):
    M = 3 if variant == "gemv" else 17
    return SPEC.problem({"M": M, "N": 16, "K": 64}, dtype, {"format": fmt, "group_size": 32, "act_order": act_order,
                                                         "bias": True})


@pytest.mark.parametrize("variant, fmt, act_order", [("gemv", "awq", False), ("gemm", "gptq", True)])
def test_verifier_accepts_both_variants(variant, fmt, act_order):
    p = _problem(variant, fmt, act_order, "bfloat16" if variant == "gemm" else "float16")
    cert = verify_candidate(SPEC, p, get_variant("int4_matmul", variant), SMALL[variant], H100)
    assert cert.passed, [(c.name, c.status) for c in cert.checks]
    assert any(c.name == "exact_identity" and c.status.startswith("tested") for c in cert.checks)


@triton.jit
def zero_not_subtracted(q, z, s):
    return q.to(tl.float32) * s.to(tl.float32)


@triton.jit
def plain_nibble_order(col):
    return col  # AWQ's interleaved order read as sequential


@triton.jit
def group_off_by_one(offs_k, gidx_ptr, mask_k, num_groups, GROUP: tl.constexpr, ACT_ORDER: tl.constexpr):
    return tl.minimum(offs_k // GROUP + 1, num_groups - 1)  # the next group's zero and scale


@pytest.mark.parametrize("helper, bug, fmt", [
    ("dequantize", zero_not_subtracted, "gptq"),
    ("awq_nibble", plain_nibble_order, "awq"),
    ("group_of", group_off_by_one, "awq"),
])
@pytest.mark.parametrize("variant", ["gemv", "gemm"])
def test_planted_bugs_are_rejected(monkeypatch, helper, bug, fmt, variant):
    monkeypatch.setattr(K, helper, bug)
    cert = verify_candidate(SPEC, _problem(variant, fmt), get_variant("int4_matmul", variant), SMALL[variant], H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "exceeds" in failure.status, failure


def test_launch_contracts_are_proved():
    from warpsmith.ops.lowprec.int4.contract import CONTRACTS
    from warpsmith.verify.symbolic import prove

    statuses = {}
    # the GEMM kernel on AWQ, the GEMV kernel on GPTQ act-order with split-K, the reduction (CONTRACTS[1], the
    # GEMM kernel on GPTQ, is left to `warpsmith prove`: its K-packed qweight load stays bounded in a short budget)
    for c in (CONTRACTS[0], CONTRACTS[3], CONTRACTS[4]):
        for rep in prove(c, timeout_ms=20_000):
            for o in rep.obligations:
                statuses[(c.name, o.name, o.subject)] = o.status
    assert not [k for k, s in statuses.items() if s in ("failed", "unknown")], statuses
    # the unpacking addresses and the g_idx gather: in bounds for every size in the domain
    assert all(s == "proved" for (n, o, _), s in statuses.items() if n == "int4_matmul_gemm_kernel[awq,G=32]")
    gemv = {subj: s for (n, o, subj), s in statuses.items() if "gemv" in n and o == "in_bounds"}
    assert all(s == "proved" for subj, s in gemv.items() if "qw_ptr" not in subj), gemv  # x, zeros, scales, g_idx
    gathered = [s for (n, o, subj), s in statuses.items() if "act_order" in n and o == "in_bounds" and "s_ptr" in subj]
    assert gathered and all(s == "proved" for s in gathered)
    ints = [s for (n, o, _), s in statuses.items() if o == "int32_no_overflow"]
    assert ints and all(s == "proved" for s in ints)
