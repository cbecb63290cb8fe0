"""The v1 verifier accepts correct configs and rejects planted bugs for the right reason."""
import pytest
import torch

from warpsmith.ops.matmul.variant import SplitKGemm, TiledGemm
from warpsmith.ops.matmul.spec import MATMUL
from warpsmith.targets import get_target
from warpsmith.verify import odd_problems, verify_candidate

H100 = get_target("h100")
CFG = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, num_warps=2, num_stages=2, EVEN_K=False, PRECISION="ieee")


def problem(dtype="float16", **attrs):
    return MATMUL.problem({"M": 24, "N": 24, "K": 40}, dtype, attrs)


def statuses(cert):
    return {c.name: c.status for c in cert.checks}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_correct_config_is_accepted_with_every_check(dtype):
    cert = verify_candidate(MATMUL, problem(dtype, bias=True, activation="silu"), TiledGemm(), CFG, H100)
    st = statuses(cert)
    assert cert.passed, st
    assert st["guards_hold"] == "proved"
    assert st["error_contract"] == "tested(6 trials)" and st["poisoned_outputs"] == "tested(6 trials)"
    assert st["exact_identity"] == "tested(1 trials)" and st["determinism"] == "tested(8 trials)"
    odd = odd_problems(MATMUL, problem(dtype, bias=True, activation="silu"), TiledGemm(), CFG, H100)
    assert len(odd) >= 2 and st["odd_shapes"] == f"tested({len(odd)} trials)"
    assert st["grid_stride"] == "skipped(the launcher does not size its grid for a target)"
    doc = cert.to_json()
    assert doc["verdict"] == "accepted" and doc["symbolic"]["race_free"].startswith("unknown(not attempted")


def test_atomic_splitk_is_accepted_as_declared_nondeterministic():
    cfg = {**CFG, "SPLIT_K": 2, "REDUCE": "atomic"}
    cert = verify_candidate(MATMUL, problem(), SplitKGemm(), cfg, H100)
    assert cert.passed and statuses(cert)["determinism"].startswith("skipped(declared non-deterministic")


class SkipsLastRow(TiledGemm):
    def launch(self, inputs, p, c, out=None):
        out = out if out is not None else torch.empty(p.shape["M"], p.shape["N"], dtype=p.dtype)
        short = MATMUL.problem({**p.shape, "M": p.shape["M"] - 1}, p.dtype, p.attrs) if p.shape["M"] > 1 else p
        super().launch({**inputs, "a": inputs["a"][:-1] if p.shape["M"] > 1 else inputs["a"]}, short, c,
                       out=out[:-1] if p.shape["M"] > 1 else out)
        return out


class DropsKTail(TiledGemm):  # a missing tail tile: only whole BLOCK_K steps are summed
    def launch(self, inputs, p, c, out=None):
        k = p.shape["K"] // c["BLOCK_K"] * c["BLOCK_K"]
        if k == 0:
            return super().launch(inputs, p, c, out)
        cut = MATMUL.problem({**p.shape, "K": k}, p.dtype, p.attrs)
        return super().launch({**inputs, "a": inputs["a"][:, :k], "b": inputs["b"][:k]}, cut, c, out)


class MutatesInput(TiledGemm):
    def launch(self, inputs, p, c, out=None):
        out = super().launch(inputs, p, c, out)
        inputs["a"][0, 0] = 0
        return out


class ReturnsFreshTensor(TiledGemm):
    def launch(self, inputs, p, c, out=None):
        return super().launch(inputs, p, c, None)


class Flaky(TiledGemm):
    calls = 0

    def launch(self, inputs, p, c, out=None):
        out = super().launch(inputs, p, c, out)
        Flaky.calls += 1
        if Flaky.calls % 2 == 0:
            out[0, 0] = torch.nextafter(out[0, 0], torch.tensor(float("inf"), dtype=out.dtype))
        return out


class FlakyAtOneCall(TiledGemm):  # off by an ulp at the 11th call only: the re-run of the "outliers" inputs
    def __init__(self):
        super().__init__()
        self.calls = 0

    def launch(self, inputs, p, c, out=None):
        out = super().launch(inputs, p, c, out)
        self.calls += 1
        if self.calls == 11:
            out[1, 2] = torch.nextafter(out[1, 2], torch.tensor(float("inf"), dtype=out.dtype))
        return out


class FlakyOnThirdRun(TiledGemm):  # right twice on the same inputs, then off by one ulp
    def __init__(self):
        super().__init__()
        self.seen = {}

    def launch(self, inputs, p, c, out=None):
        out = super().launch(inputs, p, c, out)
        key = float(inputs["a"].double().sum())
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.seen[key] == 3:
            out[0, 1] = torch.nextafter(out[0, 1], torch.tensor(float("inf"), dtype=out.dtype))
        return out


class TransposesB(TiledGemm):
    def launch(self, inputs, p, c, out=None):
        return super().launch({**inputs, "b": inputs["b"].T}, p, c, out)


class UninitialisedAccumulator(TiledGemm):  # reads the output before writing it: adds whatever it held
    def launch(self, inputs, p, c, out=None):
        before = out.clone() if out is not None else None
        out = super().launch(inputs, p, c, out)
        if before is not None:
            out += before
        return out


class DropsNaN(TiledGemm):  # a "safe" epilogue that hides the NaN of a NaN input
    def launch(self, inputs, p, c, out=None):
        return super().launch(inputs, p, c, out).nan_to_num_(nan=0.0, posinf=float("inf"), neginf=float("-inf"))


class OverflowsEarly(TiledGemm):  # accumulates in the output dtype's range: large inputs overflow
    def launch(self, inputs, p, c, out=None):
        out = super().launch(inputs, p, c, out)
        big = out.abs() > 1000
        return out.masked_fill_(big, float("inf"))


class ScratchAccumulator(TiledGemm):  # starts from a fresh uninitialised buffer instead of zeros
    def launch(self, inputs, p, c, out=None):
        from warpsmith.core.variant import scratch

        out = super().launch(inputs, p, c, out)
        return out.add_(scratch(tuple(out.shape), out.dtype, out.device))


@pytest.mark.parametrize("variant, check, reason", [
    (ScratchAccumulator(), "error_contract", "poison survived"),
    (DropsNaN(), "error_contract", "NaN not propagated"),
    (OverflowsEarly(), "error_contract", "infinities differ"),
    (SkipsLastRow(), "error_contract", "left unwritten (poison survived)"),
    (MutatesInput(), "error_contract", "input 'a' was modified"),
    (ReturnsFreshTensor(), "error_contract", "returned tensors other than the outputs"),
    (Flaky(), "determinism", "two runs on the same inputs differ"),
    (FlakyAtOneCall(), "determinism", "two runs on the same inputs differ (outliers inputs"),
    (FlakyOnThirdRun(), "determinism", "two runs on the same inputs differ (normal inputs"),
    (TransposesB(), "error_contract", "exceeds contract"),
    (UninitialisedAccumulator(), "error_contract", "poison survived"),
])
def test_planted_bugs_are_rejected_for_the_right_reason(variant, check, reason):
    p = MATMUL.problem({"M": 24, "N": 24, "K": 24}, "float16")  # square, so a transposed B has the right shape
    cert = verify_candidate(MATMUL, p, variant, CFG, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == check and reason in failure.status, statuses(cert)


def test_missing_tail_tile_is_caught_by_odd_shapes():
    p = MATMUL.problem({"M": 32, "N": 32, "K": 64}, "float16")  # K a multiple of BLOCK_K: the bug hides here
    cert = verify_candidate(MATMUL, p, DropsKTail(), CFG, H100)
    st = statuses(cert)
    assert st["error_contract"] == "tested(6 trials)" and st["odd_shapes"].startswith("failed(matmul[M=17,N=17,K=17]"), st
    assert "exceeds contract" in st["odd_shapes"], st


def test_exactness_is_detected_not_declared():
    from warpsmith.verify.verifier import exact_on

    g = torch.Generator().manual_seed(0)
    for act, exact in (("none", True), ("relu", True), ("gelu", False), ("silu", False)):
        p = MATMUL.problem({"M": 8, "N": 8, "K": 16}, "float16", {"activation": act})
        assert exact_on(MATMUL, p, MATMUL.exact_inputs(p, g)) is exact, act
    cert = verify_candidate(MATMUL, problem(activation="gelu"), TiledGemm(), CFG, H100)
    st = {c.name: (c.status, c.detail) for c in cert.checks}
    assert st["exact_identity"][0] == "tested(1 trials)" and "exact counterpart" in st["exact_identity"][1]


def test_tf32_is_rejected_unless_allowed():
    cfg = {**CFG, "PRECISION": "tf32"}
    cert = verify_candidate(MATMUL, problem("float32"), TiledGemm(), cfg, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "exceeds" in failure.status, failure
    assert verify_candidate(MATMUL, problem("float32", allow_tf32=True), TiledGemm(), cfg, H100).passed


def test_guard_failure_stops_verification():
    cert = verify_candidate(MATMUL, problem(), TiledGemm(), {**CFG, "EVEN_K": True}, H100)  # K=40, BLOCK_K=16
    assert not cert.passed and [c.name for c in cert.checks] == ["guards_hold"]
    assert "EVEN_K needs K % BLOCK_K == 0" in cert.checks[0].status


def test_odd_problems_are_non_multiples_fitted_to_guards():
    cfg = {**CFG, "EVEN_K": True, "BLOCK_K": 32}
    shapes = [dict(p.shape) for p in odd_problems(MATMUL, problem(), TiledGemm(), cfg, H100)]
    assert shapes and all(s["K"] % 32 == 0 for s in shapes)
    assert any(s["M"] == 1 for s in shapes) and any(s["M"] == 17 for s in shapes)


def test_flakiness_in_a_secondary_output_is_caught():
    """A norm backward whose dx is stable but whose dw differs by an ulp every other call."""
    from warpsmith.ops import get_op, get_variant

    spec = get_op("rms_norm_backward")
    base = type(get_variant("rms_norm_backward", "row"))

    class FlakyDw(base):
        calls = 0

        def launch(self, inputs, p, c, out=None, target=None):
            outs = super().launch(inputs, p, c, out, target)
            FlakyDw.calls += 1
            if FlakyDw.calls % 2 == 0:
                outs[1][3] = torch.nextafter(outs[1][3], torch.tensor(float("inf"), dtype=outs[1].dtype))
            return outs

    p = spec.problem({"M": 6, "N": 24}, "float32")
    good = get_variant("rms_norm_backward", "row")
    cfg = good.default_config(p, H100)
    assert verify_candidate(spec, p, good, cfg, H100).passed
    cert = verify_candidate(spec, p, FlakyDw("rms"), cfg, H100)
    failure = cert.first_failure()
    assert failure.name == "determinism" and "output 1" in failure.status, statuses(cert)


@pytest.mark.parametrize("when", ["always", "on odd shapes", "on small-integer inputs"])
def test_a_launcher_that_raises_is_rejected_not_a_crash(when):
    """A candidate whose launch raises (here: it writes a result of the wrong shape into its output, which
    torch refuses) is rejected with the exception named, at whichever check meets it first."""
    class WrongShape(TiledGemm):
        def launch(self, inputs, p, c, out=None):
            res = super().launch(inputs, p, c, out)
            bad = (when == "always" or when == "on odd shapes" and p.shape["M"] != 24
                   or when == "on small-integer inputs" and bool((inputs["a"] == inputs["a"].round()).all()))
            if bad:
                out.copy_(torch.zeros(out.shape[0] + 1, out.shape[1]))
            return res

    cert = verify_candidate(MATMUL, problem(), WrongShape(), CFG, H100)
    failure = cert.first_failure()
    assert not cert.passed and "the launch raised RuntimeError" in failure.status, statuses(cert)
