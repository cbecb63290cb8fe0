"""Softmax / log-softmax variants (forward and backward) under the interpreter, against the spec's
reference under its error contract; the verifier on each variant; planted bugs it must reject."""
from dataclasses import replace

import pytest
import torch

from warpsmith.core._triton import tl, triton
from warpsmith.errors import InvalidInputError
from warpsmith.ops.shared.kernel import to_output
from warpsmith.ops import default_variant, get_variant, variants
from warpsmith.ops.softmax.variant import Online, SinglePass
from warpsmith.cost.cost import predict_ms
from warpsmith.ops import get_op
from warpsmith.targets import get_target
from warpsmith.verify import odd_problems, verify_candidate

H100 = get_target("h100")
OPS = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")
DTYPES = ("float32", "float16", "bfloat16")


def cfg_for(name, problem, **over):
    v = get_variant(problem.op, name)
    return v, {**v.default_config(problem, H100), **over}


def run(variant, problem, cfg, seed=0, dist="normal", inputs=None):
    spec = get_op(problem.op)
    inputs = inputs if inputs is not None else spec.make_inputs(problem, torch.Generator().manual_seed(seed), dist)
    out = variant.launch(inputs, problem, cfg)
    ref64, scale = spec.oracle(inputs, problem.attrs)
    return out, spec.contract(problem).check(out, ref64, scale, spec.reference(inputs, problem.attrs))


# ---- correctness ----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_single_pass_odd_rows_every_dtype(op, dtype):
    for shape in ({"M": 3, "N": 1}, {"M": 5, "N": 37}, {"M": 2, "N": 300}):
        p = get_op(op).problem(shape, dtype)
        v, cfg = cfg_for("single_pass", p)
        out, (ok, msg) = run(v, p, cfg, dist="outliers")
        assert out.shape == (shape["M"], shape["N"]) and out.dtype == p.dtype
        assert ok, (shape, msg)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_online_row_spanning_several_blocks(op, dtype):
    # 131 = 8 blocks of 16 and a tail of 3: the running max grows across blocks (rescaling)
    p = get_op(op).problem({"M": 2, "N": 131}, dtype)
    v, cfg = cfg_for("online", p, BLOCK_N=16, num_warps=1)
    _, (ok, msg) = run(v, p, cfg, seed=1)
    assert ok, msg


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_long_row_through_the_online_variant_and_both_variants_agree(op):
    """N=1000 in 64-element blocks (16 blocks, tail of 40) and in one single-pass block, same rows."""
    spec = get_op(op)
    p = spec.problem({"M": 2, "N": 1000}, "float32")
    x = spec.make_inputs(p, torch.Generator().manual_seed(2))["x"]
    x[0, 900:] += 6.0  # the maximum sits in a late block: every earlier partial sum must be rescaled
    online, cfg_o = cfg_for("online", p, BLOCK_N=64, num_warps=2)
    single, cfg_s = cfg_for("single_pass", p)
    assert cfg_s["BLOCK_N"] == 1024
    out_o, (ok_o, msg_o) = run(online, p, cfg_o, inputs={"x": x})
    out_s, (ok_s, msg_s) = run(single, p, cfg_s, inputs={"x": x})
    assert ok_o, msg_o
    assert ok_s, msg_s
    torch.testing.assert_close(out_o, out_s, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["single_pass", "online"])
@pytest.mark.parametrize("op", OPS)
def test_nan_and_inf_follow_torch(name, op):
    """Rows holding +inf, NaN, a -inf among finite values, only -inf; the contract demands NaN
    exactly where torch has NaN and -inf where it has -inf."""
    spec = get_op(op)
    p = spec.problem({"M": 5, "N": 20}, "float16")
    inf, nan = float("inf"), float("nan")
    x = torch.randn(5, 20).half()
    x[0, 3], x[1, 17], x[2, 0], x[3] = inf, nan, -inf, -inf
    if spec.name.endswith("_backward"):
        inputs = {"y": get_op(op.replace("_backward", "")).reference({"x": x}, {}), "dy": torch.randn(5, 20).half()}
        inputs["dy"][4, 2] = inf  # a finite row whose upstream gradient holds +inf
    else:
        inputs = {"x": x}
    v, cfg = cfg_for(name, p, **({"BLOCK_N": 16, "num_warps": 1} if name == "online" else {}))
    out, (ok, msg) = run(v, p, cfg, inputs=inputs)
    assert ok, msg
    if not spec.name.endswith("_backward"):
        assert out[[0, 1, 3]].isnan().all() and not out[[2, 4]].isnan().any()
        assert out[2, 0] == (-inf if spec.name == "log_softmax" else 0)


@pytest.mark.parametrize("dist", ["large", "specials", "tiny"])
def test_distributions_both_variants(dist):
    for op in ("softmax", "log_softmax"):
        p = get_op(op).problem({"M": 4, "N": 70}, "bfloat16")
        for name, over in (("single_pass", {}), ("online", {"BLOCK_N": 32, "num_warps": 1})):
            v, cfg = cfg_for(name, p, **over)
            _, (ok, msg) = run(v, p, cfg, dist=dist, seed=3)
            assert ok, (op, name, msg)


def test_strided_input_without_copy():
    p = get_op("softmax").problem({"M": 6, "N": 40}, "float32")
    x = torch.randn(40, 6).T  # column stride 6
    assert x.stride() == (1, 6)
    for name, over in (("single_pass", {}), ("online", {"BLOCK_N": 16, "num_warps": 1})):
        v, cfg = cfg_for(name, p, **over)
        _, (ok, msg) = run(v, p, cfg, inputs={"x": x})
        assert ok, (name, msg)


def test_persistent_grid_strides_over_row_blocks():
    tiny_gpu = replace(H100, sms=2)  # 2 x 2 programs for 9 blocks of 2 rows: each program loops
    for op in ("softmax", "softmax_backward"):
        spec = get_op(op)
        p = spec.problem({"M": 17, "N": 24}, "float16")
        v, cfg = cfg_for("single_pass", p, ROWS=2, num_warps=1, PROGRAMS_PER_SM=2)
        assert v.programs(p, cfg, tiny_gpu) == 4 and v.programs(p, {**cfg, "PROGRAMS_PER_SM": 0}, tiny_gpu) == 9
        inputs = spec.make_inputs(p, torch.Generator().manual_seed(4))
        out = v.launch(inputs, p, cfg, target=tiny_gpu)
        ref64, scale = spec.oracle(inputs, {})
        ok, msg = spec.contract(p).check(out, ref64, scale, spec.reference(inputs, {}))
        assert ok, msg


def test_bf16_output_is_rounded_to_nearest_under_the_interpreter():
    """The interpreter truncates fp32 -> bf16; without the rounding shim the contract fails."""

    class Truncating(SinglePass):
        def _emulate(self, p):
            return False

    p = get_op("softmax").problem({"M": 8, "N": 64}, "bfloat16")
    cfg = SinglePass("softmax").default_config(p, H100)
    assert run(SinglePass("softmax"), p, cfg)[1][0]
    ok, msg = run(Truncating("softmax"), p, cfg)[1]
    assert not ok and "exceeds" in msg


# ---- validity, defaults, cost model ----------------------------------------------------------------
def test_default_variant_single_pass_when_the_row_fits_else_online():
    for op in OPS:
        spec = get_op(op)
        assert list(variants(op)) == ["single_pass", "online"]
        short = spec.problem({"M": 4096, "N": 1024}, "bfloat16")
        long = spec.problem({"M": 8, "N": 262144}, "bfloat16")
        assert default_variant(short, H100).name == "single_pass"
        assert default_variant(long, H100).name == "online"
        sp = get_variant(op, "single_pass")
        assert "register budget" in sp.invalid(long, {**sp.default_config(long, H100), "num_warps": 32}, H100)
        on = get_variant(op, "online")
        assert on.rejection(long, on.default_config(long, H100), H100) is None
        for p in (short, long, spec.problem({"M": 1, "N": 1}, "float32")):  # space defaults run
            for v in variants(op).values():
                space_default = v.space(p, H100).default()
                if v.name == "online" or p is not long:
                    assert v.rejection(p, space_default, H100) is None, (v.name, p.describe())


def test_single_pass_validity():
    v = get_variant("softmax", "single_pass")
    p = get_op("softmax").problem({"M": 64, "N": 300}, "float16")
    cfg = v.default_config(p, H100)
    assert v.invalid(p, cfg, H100) is None
    assert "does not fit" in v.invalid(get_op("softmax").problem({"M": 64, "N": 600}, "float16"), cfg, H100)
    assert "idle" in v.invalid(p, {**cfg, "ROWS": 1, "BLOCK_N": 512, "num_warps": 32}, H100)
    # 65536 elements per program is the budget: fits with 32 warps, not with 16
    big = get_op("softmax").problem({"M": 4, "N": 65536}, "float32")
    bcfg = v.default_config(big, H100)
    assert bcfg["num_warps"] == 32 and v.invalid(big, bcfg, H100) is None
    assert "register budget" in v.invalid(big, {**bcfg, "num_warps": 16}, H100)


def test_cost_model_prefers_one_pass_where_it_fits_and_counts_rereads():
    short = get_op("softmax").problem({"M": 4096, "N": 4096}, "bfloat16")
    sp, on = get_variant("softmax", "single_pass"), get_variant("softmax", "online")
    cs, co = sp.default_config(short, H100), on.default_config(short, H100)
    assert sp.work(short, cs, H100).bytes_moved == 2 * 4096 * 4096 * 2
    assert on.work(short, co, H100).bytes_moved == 3 * 4096 * 4096 * 2  # x read twice
    assert predict_ms(sp, short, cs, H100) < predict_ms(on, short, co, H100)
    bwd = get_op("log_softmax_backward").problem({"M": 64, "N": 8192}, "float16")
    lb = get_variant("log_softmax_backward", "online")
    assert lb.work(bwd, lb.default_config(bwd, H100), H100).bytes_moved == 4 * 64 * 8192 * 2
    long = get_op("softmax").problem({"M": 8, "N": 262144}, "float32")
    assert predict_ms(on, long, on.default_config(long, H100), H100) < float("inf")
    assert predict_ms(sp, long, sp.default_config(long, H100), H100) == float("inf")


def test_launcher_refuses_bad_operands():
    v = get_variant("softmax", "single_pass")
    p = get_op("softmax").problem({"M": 4, "N": 8}, "float16")
    cfg = v.default_config(p, H100)
    with pytest.raises(InvalidInputError, match="shape of x"):
        v.launch({"x": torch.randn(4, 9).half()}, p, cfg)
    with pytest.raises(InvalidInputError, match="dtype of x"):
        v.launch({"x": torch.randn(4, 8)}, p, cfg)
    with pytest.raises(InvalidInputError, match="32 bits"):  # meta device: no memory, refused before launch
        v.launch({"x": torch.empty_strided((4, 8), (1, 2**29), dtype=torch.float16, device="meta")}, p, cfg)
    with pytest.raises(InvalidInputError, match="out"):
        v.launch({"x": torch.randn(4, 8).half()}, p, cfg, out=torch.empty(8, 4).half().T)


# ---- verification ---------------------------------------------------------------------------------
SMALL_CFG = {"single_pass": {}, "online": {"BLOCK_N": 16, "num_warps": 1}}


@pytest.mark.parametrize("name", ["single_pass", "online"])
@pytest.mark.parametrize("op, dtype", [("softmax", "float16"), ("log_softmax", "bfloat16"),
                                       ("softmax_backward", "float32"), ("log_softmax_backward", "float16")])
def test_verifier_accepts_every_variant(op, dtype, name):
    p = get_op(op).problem({"M": 3, "N": 40}, dtype)
    v, cfg = cfg_for(name, p, **SMALL_CFG[name])
    cert = verify_candidate(get_op(op), p, v, cfg, H100)
    st = {c.name: c.status for c in cert.checks}
    assert cert.passed, st
    assert st["error_contract"] == "tested(6 trials)" and st["odd_shapes"] == f"tested({len(odd_problems(get_op(op), p, v, cfg, H100))} trials)" != "tested(0 trials)"
    if op == "softmax_backward":  # polynomial in (y, dy): the bitwise identity test runs
        assert st["exact_identity"] == "tested(1 trials)"


@triton.jit
def _naive_softmax_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym,
                          BLOCK_N: tl.constexpr, ROWS: tl.constexpr, LOG: tl.constexpr, EMULATE: tl.constexpr):
    """BUG: exp(x) / sum(exp(x)) without subtracting the row maximum."""
    cols = tl.arange(0, BLOCK_N)
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask,
                other=float("-inf")).to(tl.float32)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :], to_output(y, y_ptr, EMULATE), mask=mask)


@triton.jit
def _online_no_rescale_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym,
                              BLOCK_N: tl.constexpr, LOG: tl.constexpr, EMULATE: tl.constexpr):
    """BUG: the running sum is not rescaled by exp(m_old - m_new) when the maximum grows."""
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK_N)
    m = float("-inf")
    s = 0.0
    for start in range(0, N, BLOCK_N):
        cols = start + cols0
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < N, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
        s = s + tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, N, BLOCK_N):
        cols = start + cols0
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_ym + cols, to_output(tl.exp(x - m) / s, y_ptr, EMULATE), mask=cols < N)


class NoMaxSubtraction(SinglePass):
    def launch(self, inputs, problem, config, out=None, target=None):
        (x,), out = self._operands(inputs, problem, out, config["BLOCK_N"])
        M, N = problem.shape["M"], problem.shape["N"]
        _naive_softmax_kernel[(triton.cdiv(M, config["ROWS"]),)](
            x, out, M, N, **self._strides([x], out), BLOCK_N=config["BLOCK_N"], ROWS=config["ROWS"], LOG=False,
            EMULATE=self._emulate(problem))
        return out


class NoRescaling(Online):
    def launch(self, inputs, problem, config, out=None):
        (x,), out = self._operands(inputs, problem, out, config["BLOCK_N"])
        _online_no_rescale_kernel[(problem.shape["M"],)](
            x, out, problem.shape["M"], problem.shape["N"], **self._strides([x], out), BLOCK_N=config["BLOCK_N"],
            LOG=False, EMULATE=self._emulate(problem))
        return out


class DropsTheSumTerm(SinglePass):
    """BUG in the softmax backward: dx = y * dy (the - sum(dy * y) term forgotten)."""

    def launch(self, inputs, problem, config, out=None, target=None):
        out = out if out is not None else torch.empty_like(inputs["y"])
        return out.copy_(inputs["y"].float() * inputs["dy"].float())


class SkipsTailChunk(Online):
    """BUG: only whole BLOCK_N chunks are written; the poisoned tail of each row survives."""

    def launch(self, inputs, problem, config, out=None):
        out = super().launch(inputs, problem, config, out)
        cut = problem.shape["N"] // config["BLOCK_N"] * config["BLOCK_N"]
        if cut:  # what the kernel would leave there: the launcher's (poisoned) allocation
            out[:, cut:] = float("nan")
        return out


def _first_failure(cert):
    f = cert.first_failure()
    return f.name, f.status


def test_verifier_rejects_missing_max_subtraction_on_large_inputs():
    p = get_op("softmax").problem({"M": 3, "N": 40}, "float16")
    bug = NoMaxSubtraction("softmax")
    cfg = bug.default_config(p, H100)
    # on normal inputs exp(x) does not overflow: the bug only shows on large ones
    assert run(bug, p, cfg)[1][0]
    name, status = _first_failure(verify_candidate(get_op("softmax"), p, bug, cfg, H100))
    # exp(x) overflows to inf, inf / inf = NaN where the oracle has numbers (reported as poison
    # surviving, since the outputs were NaN-poisoned before the run)
    assert name == "error_contract" and "large inputs" in status and ("NaN" in status or "unwritten" in status)


def test_verifier_rejects_online_sum_without_rescaling():
    p = get_op("softmax").problem({"M": 3, "N": 40}, "float32")
    bug = NoRescaling("softmax")
    name, status = _first_failure(verify_candidate(get_op("softmax"), p, bug, {"BLOCK_N": 16, "num_warps": 1}, H100))
    assert name == "error_contract" and "normal inputs" in status and "exceeds" in status
    # where one block holds the row there is nothing to rescale: the bug hides, which is why the
    # verifier's odd shapes and the tests use rows longer than a block
    one_block = get_op("softmax").problem({"M": 3, "N": 16}, "float32")
    assert run(bug, one_block, {"BLOCK_N": 16, "num_warps": 1})[1][0]


def test_verifier_rejects_a_wrong_gradient_term_and_an_unwritten_tail():
    spec = get_op("softmax_backward")
    p = spec.problem({"M": 3, "N": 40}, "float16")
    bug = DropsTheSumTerm("softmax_backward")
    name, status = _first_failure(verify_candidate(spec, p, bug, bug.default_config(p, H100), H100))
    assert name == "error_contract" and "exceeds" in status
    tail = SkipsTailChunk("log_softmax")
    name, status = _first_failure(verify_candidate(get_op("log_softmax"), get_op("log_softmax").problem(
        {"M": 3, "N": 40}, "float16"), tail, {"BLOCK_N": 16, "num_warps": 1}, H100))
    assert name == "error_contract" and "unwritten" in status


# ---- symbolic launch contracts ------------------------------------------------------------------------
def test_launch_contracts_prove_or_bound_everything():
    from warpsmith.ops.softmax.contract import CONTRACTS, for_config
    from warpsmith.verify.symbolic import prove

    assert len(for_config(get_variant("softmax", "online"), {"BLOCK_N": 64, "num_warps": 2})) == 1
    for c in CONTRACTS:
        for r in prove(c):
            for o in r.obligations:
                assert o.status == "proved" or o.status.startswith("bounded("), (c.name, o.to_json())
                if o.name in ("in_bounds", "int32_no_overflow", "race_free", "coverage"):  # the last two by
                    assert o.status == "proved", (c.name, o.to_json())  # the contracts' writer witnesses


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_online_softmax_whose_first_chunk_is_all_minus_inf(op):
    """The running max starts at -inf and stays there for the whole first chunk: exp(-inf - -inf)
    must not poison the running sum with NaN; the rest of the row is ordinary."""
    p = get_op(op).problem({"M": 3, "N": 100}, "float32")
    v, cfg = cfg_for("online", p, BLOCK_N=32)
    x = torch.randn(3, 100, generator=torch.Generator().manual_seed(1))
    x[:, :32] = float("-inf")  # the first chunk of every row
    x[1, :64] = float("-inf")  # two chunks
    out, (ok, msg) = run(v, p, cfg, inputs={"x": x})
    assert ok, msg
    masked = x == float("-inf")
    assert bool(torch.isfinite(out[~masked]).all()) and bool((out[~masked] != 0).all())
    assert bool((out[masked] == (float("-inf") if op == "log_softmax" else 0.0)).all())
