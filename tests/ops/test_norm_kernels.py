"""Normalization variants under the interpreter: every op, variant and dtype against the spec's
reference under its error contract; the verifier accepts each variant and rejects planted bugs."""
import pytest
import torch

from warpsmith.core._triton import tl, triton
from warpsmith.errors import InvalidInputError
from warpsmith.ops.norm import kernel as K
from warpsmith.ops.norm.variant import LoopedNorm, PersistentNormBackward, RowNorm
from warpsmith.ops import default_variant, get_variant, variants
from warpsmith.cost.memory_model import predict_ms
from warpsmith.core.opspec import as_tuple
from warpsmith.ops import get_op
from warpsmith.targets import get_target
from warpsmith.verify import odd_problems, verify_candidate

H100 = get_target("h100")
FWD = ("rms_norm", "layer_norm")
BWD = ("rms_norm_backward", "layer_norm_backward")
NAMES = ("row", "persistent", "looped")


def config(op, name, problem, block=16, **over):
    v = get_variant(op, name)
    cfg = v.default_config(problem, H100)
    if name == "looped":
        cfg["BLOCK_N"] = block
    return v, {**cfg, **over}


def check(op, problem, v, cfg, seed=0, dist="normal", inputs=None):
    spec = get_op(op)
    inputs = inputs or spec.make_inputs(problem, torch.Generator().manual_seed(seed), dist)
    outs = as_tuple(v.launch(inputs, problem, cfg))
    ref64, scale = spec.oracle(inputs, problem.attrs)
    refs = spec.reference(inputs, problem.attrs)
    assert len(outs) == len(spec.outputs(problem))
    for i, (o, (shape, dt)) in enumerate(zip(outs, spec.outputs(problem))):
        assert tuple(o.shape) == shape and o.dtype == dt, (i, o.shape, o.dtype)
        ok, msg = spec.contract(problem)[i].check(o, ref64[i], scale[i], refs[i])
        assert ok, f"output {i}: {msg}"
    return outs


def attrs_for(op, **over):
    a = {"weight": True, "residual": True}
    if op.startswith("layer"):
        a["bias"] = True
    return {**a, **over}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("op", FWD + BWD)
def test_every_variant_every_dtype_odd_shape(op, dtype, name):
    p = get_op(op).problem({"M": 3, "N": 37}, dtype, attrs_for(op))
    v, cfg = config(op, name, p)
    check(op, p, v, cfg)


@pytest.mark.parametrize("op", FWD + BWD)
@pytest.mark.parametrize("name, N, block", [("row", 1, 16), ("row", 131, 16), ("persistent", 2, 16),
                                            ("looped", 1, 16), ("looped", 131, 32), ("looped", 64, 16)])
def test_row_lengths_one_primes_and_rows_longer_than_a_block(op, name, N, block):
    p = get_op(op).problem({"M": 5, "N": N}, "float16", attrs_for(op, residual=False))
    v, cfg = config(op, name, p, block=block, ROWS_PER_PROGRAM=2)
    check(op, p, v, cfg, seed=N)


@pytest.mark.parametrize("op", FWD + BWD)
def test_optional_parameters_and_fp32_weights(op):
    combos = [dict(weight=False), dict(weight_dtype="float32")]
    if op.startswith("layer"):
        combos += [dict(weight=False, bias=True), dict(bias=False, weight_dtype="float32")]
    for i, over in enumerate(combos):
        p = get_op(op).problem({"M": 4, "N": 29}, "bfloat16", attrs_for(op, residual=i % 2 == 1, **over))
        v, cfg = config(op, "row", p)
        check(op, p, v, cfg, seed=i)


@pytest.mark.parametrize("op", BWD)
@pytest.mark.parametrize("name", NAMES)
def test_atomic_reduction_is_correct_and_declared_nondeterministic(op, name):
    p = get_op(op).problem({"M": 7, "N": 24}, "float32", attrs_for(op, residual=False))
    v, cfg = config(op, name, p, REDUCE="atomic", ROWS_PER_PROGRAM=2)
    check(op, p, v, cfg)
    assert not v.is_deterministic(cfg) and v.is_deterministic({**cfg, "REDUCE": "workspace"})


def test_strided_rows_are_read_in_place_and_column_strides_refused():
    op = "rms_norm"
    p = get_op(op).problem({"M": 4, "N": 20}, "float16", {"residual": False})
    base = torch.randn(4, 32).half()
    x = base[:, 3:23]  # row stride 32: no copy needed
    w = torch.randn(20).half()
    v, cfg = config(op, "row", p)
    check(op, p, v, cfg, inputs={"x": x, "weight": w})
    with pytest.raises(InvalidInputError, match="unit stride along the row"):
        v.launch({"x": torch.randn(20, 4).half().T, "weight": w}, p, cfg)
    with pytest.raises(InvalidInputError, match="dtype of weight"):
        v.launch({"x": x, "weight": w.double()}, p, cfg)


@pytest.mark.parametrize("op, name, dtype", [
    ("rms_norm", "row", "float16"), ("rms_norm", "persistent", "bfloat16"), ("rms_norm", "looped", "float32"),
    ("layer_norm", "row", "bfloat16"), ("layer_norm", "persistent", "float32"), ("layer_norm", "looped", "float16"),
    ("rms_norm_backward", "row", "float32"), ("rms_norm_backward", "persistent", "float16"),
    ("rms_norm_backward", "looped", "bfloat16"), ("layer_norm_backward", "row", "float16"),
    ("layer_norm_backward", "persistent", "bfloat16"), ("layer_norm_backward", "looped", "float32"),
])
def test_verifier_accepts_every_variant(op, name, dtype):
    spec = get_op(op)
    p = spec.problem({"M": 5, "N": 40}, dtype, attrs_for(op))
    v, cfg = config(op, name, p)
    cert = verify_candidate(spec, p, v, cfg, H100)
    st = {c.name: c.status for c in cert.checks}
    assert cert.passed, st
    assert st["error_contract"] == "tested(6 trials)" and st["determinism"] == "tested(8 trials)"
    assert st["exact_identity"].startswith("skipped(not exact")  # rsqrt: the contract covers it
    assert st["odd_shapes"] == f"tested({len(odd_problems(spec, p, v, cfg, H100))} trials)" != "tested(0 trials)"


# ---- planted bugs ------------------------------------------------------------------------------
@triton.jit
def buggy_rms_kernel(x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, s_ptr, mean_ptr, rstd_ptr, M, N, eps,
                     stride_xm, stride_rm, stride_ym, stride_sm, BLOCK_N: tl.constexpr, IS_RMS: tl.constexpr,
                     HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_RES: tl.constexpr, EMULATE: tl.constexpr,
                     BUG: tl.constexpr):
    """The looped RMSNorm (no weight, no residual) with one planted bug."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    if BUG == "half_statistics":
        acc = tl.zeros((BLOCK_N,), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        x = tl.load(x_ptr + row * stride_xm + start + offs, mask=start + offs < N, other=0.0)
        if BUG == "half_statistics":  # the sum of squares accumulated in the input's half precision
            acc = (acc + (x * x).to(tl.float16)).to(tl.float16)
        else:
            acc += x.to(tl.float32) * x.to(tl.float32)
    if BUG == "mean_over_block":  # divides by the padded length, not N
        rstd = tl.rsqrt(tl.sum(acc.to(tl.float32), axis=0) / (tl.cdiv(N, BLOCK_N) * BLOCK_N) + eps)
    elif BUG == "eps_outside":  # rsqrt(mean) + eps
        rstd = tl.rsqrt(tl.sum(acc.to(tl.float32), axis=0) / N) + eps
    else:
        rstd = tl.rsqrt(tl.sum(acc.to(tl.float32), axis=0) / N + eps)
    tl.store(rstd_ptr + row, rstd)
    last = N - 1 if BUG == "tail" else N  # leaves the last column unwritten
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_ptr + row * stride_xm + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_ym + cols, (x * rstd).to(y_ptr.dtype.element_ty), mask=cols < last)


class BuggyLooped(LoopedNorm):
    def __init__(self, bug):
        super().__init__("rms")
        self.bug = bug

    def _run(self, args, meta, p, c, target):
        buggy_rms_kernel[(p.shape["M"],)](*args, BUG=self.bug, **meta)


@pytest.mark.parametrize("bug, dtype, reason", [
    ("half_statistics", "float16", "exceeds"),
    ("mean_over_block", "float16", "exceeds contract"),
    ("eps_outside", "float32", "exceeds"),
    ("tail", "bfloat16", "left unwritten (poison survived)"),
    ("none", "float16", None),  # the same kernel without a bug passes: the test can tell
])
def test_planted_kernel_bugs_are_rejected(bug, dtype, reason):
    spec = get_op("rms_norm")
    p = spec.problem({"M": 4, "N": 300}, dtype, {"weight": False})
    v = BuggyLooped(bug)
    cert = verify_candidate(spec, p, v, {"BLOCK_N": 64, "num_warps": 2}, H100)
    failure = cert.first_failure()
    if reason is None:
        assert cert.passed, [(c.name, c.status) for c in cert.checks]
    else:
        assert not cert.passed and failure.name == "error_contract" and reason in failure.status, failure


@triton.jit
def store_dx_without_mean_term(ds_ptr, dx_ptr, r64, cols, mask, g, xhat, rstd, c1, c2, stride_dsm, stride_dxm,
                               IS_RMS: tl.constexpr, HAS_DS: tl.constexpr, EMULATE: tl.constexpr):
    dx = (g - xhat * c2[:, None]) * rstd[:, None]  # LayerNorm's - mean(g) term forgotten
    tl.store(dx_ptr + r64[:, None] * stride_dxm + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)


def test_wrong_gradient_term_is_rejected(monkeypatch):
    spec = get_op("layer_norm_backward")
    p = spec.problem({"M": 4, "N": 40}, "float16", {"residual": False})
    v, cfg = config("layer_norm_backward", "row", p)
    assert verify_candidate(spec, p, v, cfg, H100).passed
    monkeypatch.setattr(K, "norm_bwd_store_dx", store_dx_without_mean_term)
    cert = verify_candidate(spec, p, v, cfg, H100)
    assert not cert.passed and "output 0: error" in cert.first_failure().status


class ReducesOneRowTooMany(PersistentNormBackward):  # workspace one row longer than the programs write
    def programs(self, p, c, target=None):
        return super().programs(p, c, target) + 1

    def _kernel(self):
        real = K.norm_bwd_persistent_kernel

        class Launch:
            def __getitem__(self, grid):
                return real[(grid[0] - 1,)]
        return Launch()


def test_unwritten_workspace_row_is_caught_by_poison():
    spec = get_op("rms_norm_backward")
    p = spec.problem({"M": 6, "N": 24}, "float32")
    v = ReducesOneRowTooMany("rms")
    cfg = {**v.default_config(p, H100), "PROGRAMS_PER_SM": 1}
    cert = verify_candidate(spec, p, v, cfg, H100)
    assert not cert.passed and "output 1" in cert.first_failure().status, cert.first_failure()


# ---- space, validity, cost model, contracts ----------------------------------------------------
def test_defaults_fit_every_row_length_and_the_registry_falls_back_to_looped():
    for op in FWD + BWD:
        spec = get_op(op)
        for N in (1, 7, 4096, 2**17, 2**20):
            p = spec.problem({"M": 3, "N": N}, "bfloat16")
            v = default_variant(p, H100)
            assert v.rejection(p, v.default_config(p, H100), H100) is None
            assert v.name == ("looped" if N >= 2**17 else ("row" if op in FWD else "persistent")), (op, N, v.name)
        assert set(variants(op)) == set(NAMES)
    p = get_op("rms_norm").problem({"M": 8, "N": 2**17}, "float16")
    why = RowNorm("rms").rejection(p, {"ROWS_PER_PROGRAM": 1, "num_warps": 32}, H100)
    assert "registers" in why


def test_cost_model_sees_rereads_workspaces_and_persistent_grids():
    fwd = get_op("rms_norm").problem({"M": 4096, "N": 4096}, "bfloat16")
    row, looped = get_variant("rms_norm", "row"), get_variant("rms_norm", "looped")
    wr = row.work(fwd, row.default_config(fwd, H100), H100)
    wl = looped.work(fwd, looped.default_config(fwd, H100), H100)
    assert wl.bytes_moved > wr.bytes_moved >= get_op("rms_norm").min_bytes(fwd)
    assert predict_ms(wl, H100) > predict_ms(wr, H100)  # the re-read costs: the row variant wins here
    bwd = get_op("rms_norm_backward").problem({"M": 4096, "N": 4096}, "bfloat16")
    pers, rows = get_variant("rms_norm_backward", "persistent"), get_variant("rms_norm_backward", "row")
    cp = pers.default_config(bwd, H100)
    cr = {**rows.default_config(bwd, H100), "ROWS_PER_PROGRAM": 1}
    assert pers.programs(bwd, cp, H100) <= cp["PROGRAMS_PER_SM"] * H100.sms
    assert rows.work(bwd, cr, H100).bytes_moved > pers.work(bwd, cp, H100).bytes_moved  # one partial row per row
    assert rows.work(bwd, cr, H100).launches == 2 and rows.work(bwd, {**cr, "REDUCE": "atomic"}, H100).launches == 3


def test_symbolic_contracts_prove_memory_safety():
    from warpsmith.ops.norm.contract import CONTRACTS
    from warpsmith.verify.symbolic import prove

    for c in (CONTRACTS[0], CONTRACTS[-1]):  # the row forward kernel and the workspace reduction (~4 s)
        obs = [o for r in prove(c) for o in r.obligations]
        assert obs and not any(o.status == "failed" for o in obs), [(o.name, o.status) for o in obs]
        assert all(o.status == "proved" for o in obs if o.name in ("in_bounds", "int32_no_overflow"))
        # race freedom and coverage through the writer witnesses (bounded without them)
        assert all(o.status == "proved" for o in obs if o.name in ("race_free", "coverage")), \
            [(o.name, o.subject, o.status) for o in obs]
    p = get_op("layer_norm_backward").problem({"M": 5, "N": 40}, "float16")
    v, cfg = config("layer_norm_backward", "looped", p)
    names = [c.name for c in v.contracts(p, cfg)]
    assert names == ["norm_bwd_looped_kernel[k=2]", "norm_partials_reduce_kernel[K=2]"]
