"""Channel normalization variants: the verifier accepts them and rejects planted bugs for a named
reason; the launch contracts prove in-bounds access and int32 safety; running statistics."""
import pytest
import torch

import warpsmith.ops as wops
from warpsmith.ops import get_op, get_variant
from warpsmith.ops.norm.channel.variant import Planar
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
CFG = {"BLOCK_S": 32, "BLOCK": 32, "num_warps": 1}


@pytest.mark.parametrize("op, dtype, attrs", [
    ("group_norm_backward", "float16", {"groups": 2, "channels_last": True}),
])
def test_verify_candidate_passes(op, dtype, attrs):
    """(batch_norm's verification takes minutes in the interpreter here; its kernels are the same.)"""
    p = get_op(op).problem({"N": 2, "C": 4, "S": 5}, dtype, attrs)
    cert = verify_candidate(get_op(op), p, get_variant(op, "planar"), CFG, H100, prove=False)
    assert cert.passed, cert.to_json()["checks"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_large_draws_stay_inside_the_fp32_statistics_range(dtype):
    """The verifier's ``large`` inputs keep the fp32 sum of squared deviations over one group finite
    (the statistics are fp32, as torch's for 16-bit inputs): with sqrt(max)/8 draws, 98 squares
    overflowed fp32, rstd became 0, and every bf16 group_norm config was rejected."""
    spec = get_op("group_norm")
    p = spec.problem({"N": 2, "C": 8, "S": 49}, dtype, {"groups": 4})
    x = spec.make_inputs(p, torch.Generator().manual_seed(0), "large")["x"].to(torch.float32)
    dev = x.reshape(2, 4, -1) - x.reshape(2, 4, -1).mean(-1, keepdim=True)
    assert torch.isfinite((dev * dev).sum(-1)).all()
    assert float(x.abs().max()) > 1e15  # still near the limits of what the fp32 statistics hold
    cert = verify_candidate(spec, p, get_variant("group_norm", "planar"), CFG, H100, prove=False)
    assert cert.passed, cert.to_json()["checks"]


class UnbiasedVarianceNormalizes(Planar):
    """Batch norm normalizing with the unbiased variance (n / (n - 1)), as the running update uses."""

    def _plane_stats(self, p, inputs, x, c, eps):
        mean_p, rstd_p, mean, var = super()._plane_stats(p, inputs, x, c, eps)
        n = p.shape["N"] * p.shape["S"]
        return mean_p, rstd_p * ((var + eps) / (var * n / (n - 1) + eps)).sqrt(), mean, var


class DropsTheMeanTerm(Planar):
    """Backward without the mean(g) term (k1 = 0): as if the mean were a constant."""

    def launch(self, inputs, problem, config, out=None, target=None):
        import warpsmith.ops.norm.channel.variant as V

        real = V.K.channel_grad_apply_kernel

        class Patched:
            def __getitem__(self, grid):
                def run(dy, x, dx, mean, rstd, w, k1, k2, *rest, **kw):
                    return real[grid](dy, x, dx, mean, rstd, w, torch.zeros_like(k1), k2, *rest, **kw)
                return run
        V.K.channel_grad_apply_kernel = Patched()
        try:
            return super().launch(inputs, problem, config, out, target)
        finally:
            V.K.channel_grad_apply_kernel = real


@pytest.mark.parametrize("bug, op", [(UnbiasedVarianceNormalizes, "batch_norm"), (DropsTheMeanTerm, "batch_norm_backward")])
def test_planted_bugs_are_rejected(bug, op):
    p = get_op(op).problem({"N": 2, "C": 3, "S": 3}, "float32", {})
    cert = verify_candidate(get_op(op), p, bug(op), CFG, H100, prove=False)
    failure = cert.first_failure()
    assert failure is not None and failure.name == "error_contract" and "exceeds contract" in failure.status, \
        cert.to_json()["checks"]


def test_running_stats_not_updated_is_caught(monkeypatch):
    """A batch_norm that skips the running-statistic update differs from torch's module state."""
    import warpsmith.ops.norm.channel.op as O

    x = torch.randn(4, 3, 5)
    rm, rv = torch.zeros(3), torch.ones(3)
    wops.batch_norm(x, rm, rv, training=True)
    rm_t, rv_t = torch.zeros(3), torch.ones(3)
    torch.nn.functional.batch_norm(x, rm_t, rv_t, training=True)
    torch.testing.assert_close(rm, rm_t)
    torch.testing.assert_close(rv, rv_t)  # the unbiased variance
    monkeypatch.setattr(O, "_update", lambda running, stat, momentum: None)
    rm2 = torch.zeros(3)
    wops.batch_norm(x, rm2, torch.ones(3), training=True)
    assert not torch.allclose(rm2, rm_t)


def test_launch_contracts_prove_memory_safety():
    from warpsmith.ops.norm.channel.contract import CONTRACTS
    from warpsmith.verify.symbolic import prove

    for c in CONTRACTS:
        (r,) = prove(c, timeout_ms=30_000)
        st = {(o.name, o.status.split("(")[0]) for o in r.obligations}
        assert ("in_bounds", "proved") in st and ("int32_no_overflow", "proved") in st, (c.name, st)
        assert not any(s in ("failed", "unknown") for _, s in st) and ("in_bounds", "bounded") not in st, st
