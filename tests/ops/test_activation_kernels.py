"""Gated activation kernels under the interpreter: every op, form and dtype against the spec's
reference under its contract; verification; planted bugs the verifier must reject; proofs."""
import pytest
import torch

from warpsmith.core._triton import triton
from warpsmith.errors import InvalidInputError
from warpsmith.ops.activation import kernel as K
from warpsmith.ops.activation.variant import Tiled
from warpsmith.ops import default_variant, get_variant, variants
from warpsmith.core.opspec import as_tuple
from warpsmith.ops import get_op
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
OPS = ("swiglu", "swiglu_backward", "geglu", "geglu_backward")


def check(op, p, cfg, dist="normal", seed=0, inputs=None):
    spec, v = get_op(op), get_variant(op, "tiled")
    inputs = inputs or spec.make_inputs(p, torch.Generator().manual_seed(seed), dist)
    outs = as_tuple(v.launch(inputs, p, cfg))
    ref64, scale = (as_tuple(x) for x in spec.oracle(inputs, p.attrs))
    refs = as_tuple(spec.reference(inputs, p.attrs))
    for out, (shape, dtype), c, r64, s, r in zip(outs, spec.outputs(p), as_tuple(spec.contract(p)), ref64, scale, refs):
        assert out.shape == shape and out.dtype == dtype
        ok, msg = c.check(out, r64, s, r)
        assert ok, (op, p.describe(), cfg, dist, msg)
    return outs


def small(p, **over):
    return {**get_variant(p.op, "tiled").default_config(p, H100), "BLOCK_H": 16, "BLOCK_M": 2, "num_warps": 1, **over}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_every_op_and_dtype_on_an_odd_shape(op, dtype):
    # rotate through the forms: packed or not, erf or tanh, persistent or one program per tile
    i = OPS.index(op) + ("float32", "float16", "bfloat16").index(dtype)
    attrs = {"packed": bool(i % 2)} | ({"approximate": ("none", "tanh")[i // 2 % 2]} if op.startswith("geglu") else {})
    p = get_op(op).problem({"M": 5, "H": 37}, dtype, attrs)
    check(op, p, small(p, PROGRAMS_PER_SM=(0, 1)[i // 3 % 2]), dist=("normal", "outliers", "specials")[i % 3])


@pytest.mark.parametrize("op, M, H", [("swiglu", 1, 1), ("geglu_backward", 3, 2), ("swiglu_backward", 2, 300)])
def test_row_of_one_and_rows_longer_than_a_block(op, M, H):
    p = get_op(op).problem({"M": M, "H": H}, "float16", {"packed": H == 2})
    check(op, p, small(p, BLOCK_H=64, BLOCK_M=1, PROGRAMS_PER_SM=2 if H == 300 else 0))


@pytest.mark.parametrize("op", ["swiglu", "swiglu_backward", "geglu_backward"])
def test_far_tails_where_sigmoid_underflows_or_exp_overflows(op):
    """g in [-110, 110]: exp(-g) overflows below -88.7 while sigmoid(g) is still a (subnormal) number;
    the kernels' sigmoid exp(min(g, 0)) / (1 + exp(-|g|)) keeps it (1 / (1 + exp(-g)) would give 0)."""
    p = get_op(op).problem({"M": 4, "H": 56}, "float32", {"approximate": "tanh"} if op == "geglu_backward" else {})
    g = torch.linspace(-110, 110, 4 * 56).reshape(4, 56)
    inputs = {"gate": g, "up": torch.full_like(g, -300.0)} | ({"dy": torch.full_like(g, 7.0)} if "back" in op else {})
    check(op, p, small(p, BLOCK_H=64, BLOCK_M=4), inputs=inputs)


def test_strided_rows_are_read_in_place():
    p = get_op("geglu").problem({"M": 4, "H": 20}, "float32", {"approximate": "tanh"})
    big = torch.randn(4, 64)
    gate, up = big[:, 3:23], big[:, 40:60]  # row stride 64: no copy needed
    assert gate.stride() == (64, 1)
    check("geglu", p, small(p), inputs={"gate": gate, "up": up})


@pytest.mark.parametrize("op", OPS)
def test_verify_candidate_passes(op):
    attrs = {"packed": op == "swiglu_backward"} | ({"approximate": "tanh"} if op == "geglu" else {})
    p = get_op(op).problem({"M": 6, "H": 40}, "bfloat16" if op.startswith("geglu") else "float32", attrs)
    cfg = small(p, BLOCK_H=32, PROGRAMS_PER_SM=2 if op.endswith("backward") else 0)
    cert = verify_candidate(get_op(op), p, get_variant(op, "tiled"), cfg, H100)
    assert cert.passed, cert.to_json()["checks"]


# ---- planted bugs: each must be rejected by the verifier ------------------------------------------
class TanhForErf(Tiled):
    """GeGLU with the tanh approximation where the erf form is required."""

    def launch(self, inputs, problem, config, out=None):
        from warpsmith.core.opspec import Problem

        wrong = Problem(problem.op, problem.shape, problem.dtype, {**problem.attrs, "approximate": "tanh"})
        return super().launch(inputs, wrong, config, out)


class MissingUpFactor(Tiled):
    """Backward whose d gate drops the up factor (dy * act'(g))."""

    def launch(self, inputs, problem, config, out=None):
        return super().launch({**inputs, "up": torch.ones_like(inputs["up"])}, problem, config, out)


class SwappedHalves(Tiled):
    """Packed input read as (up, gate) instead of (gate, up)."""

    def launch(self, inputs, problem, config, out=None):
        x = inputs["x"]
        h = x.shape[1] // 2
        return super().launch({"x": torch.cat([x[:, h:], x[:, :h]], 1)}, problem, config, out)


class FloorGrid(Tiled):
    """The grid's row count rounded down: the last partial row tile is never written."""

    def launch(self, inputs, problem, config, out=None):
        M, H = problem.shape["M"], problem.shape["H"]
        y = out if out is not None else torch.empty((M, H), dtype=problem.dtype)
        g, u = inputs["gate"], inputs["up"]
        K.gated_fwd_kernel[(M // config["BLOCK_M"], triton.cdiv(H, config["BLOCK_H"]))](
            g, u, y, M, H, stride_gm=g.stride(0), stride_um=u.stride(0), stride_ym=y.stride(0),
            BLOCK_M=config["BLOCK_M"], BLOCK_H=config["BLOCK_H"], ACT="silu", EMULATE=False)
        return y


@pytest.mark.parametrize("bug, op, attrs, expect", [
    (TanhForErf, "geglu", {"approximate": "none"}, "exceeds contract"),
    (MissingUpFactor, "swiglu_backward", {}, "exceeds contract"),
    (SwappedHalves, "swiglu", {"packed": True}, "exceeds contract"),
    (FloorGrid, "swiglu", {}, "left unwritten (poison survived)"),
])
def test_planted_bugs_are_rejected(bug, op, attrs, expect):
    p = get_op(op).problem({"M": 5, "H": 24}, "float32", attrs)
    cert = verify_candidate(get_op(op), p, bug(op), small(p), H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and expect in failure.status, \
        (failure.name, failure.status)


# ---- validity, heuristics, cost model, launcher checks ---------------------------------------------
def test_defaults_are_valid_across_the_range_and_the_space_is_searchable():
    for op in OPS:
        assert list(variants(op)) == ["tiled"]
        for M, H in ((1, 1), (7, 17), (4096, 14336), (10**6, 8192), (3, 2**22)):
            p = get_op(op).problem({"M": M, "H": H}, "bfloat16")
            v = default_variant(p, H100)
            cfg = v.default_config(p, H100)
            assert v.rejection(p, cfg, H100) is None, (op, M, H, cfg)
            assert v.space(p, H100).project(cfg) == cfg
            w = v.work(p, cfg, H100)
            assert w.bytes_moved == (5 if op.endswith("backward") else 3) * M * H * 2 and w.programs >= 1


def test_validity_predicate_and_persistent_work():
    v = get_variant("swiglu", "tiled")
    p = get_op("swiglu").problem({"M": 4096, "H": 4096}, "float16")
    base = v.default_config(p, H100)
    assert "per thread" in v.invalid(p, {**base, "BLOCK_M": 64, "BLOCK_H": 4096, "num_warps": 1}, H100)
    assert "idle" in v.invalid(p, {**base, "BLOCK_M": 1, "BLOCK_H": 16, "num_warps": 4}, H100)
    wide = get_op("swiglu").problem({"M": 1, "H": 2**21}, "float16")
    assert "grid" in v.invalid(wide, {**base, "BLOCK_M": 1, "BLOCK_H": 16, "num_warps": 1}, H100)
    assert v.invalid(wide, {**base, "BLOCK_M": 1, "BLOCK_H": 16, "num_warps": 1, "PROGRAMS_PER_SM": 2}, H100) is None
    tiled, pers = v.work(p, base, H100), v.work(p, {**base, "PROGRAMS_PER_SM": 2}, H100)
    assert pers.programs == 2 * H100.sms < tiled.programs and pers.steps > tiled.steps == 1


def test_launcher_refuses_bad_operands():
    v = get_variant("swiglu", "tiled")
    p = get_op("swiglu").problem({"M": 2, "H": 8}, "float32")
    cfg = small(p)
    good = {"gate": torch.randn(2, 8), "up": torch.randn(2, 8)}
    with pytest.raises(InvalidInputError, match="column stride"):
        v.launch({"gate": torch.randn(8, 2).t(), "up": good["up"]}, p, cfg)
    with pytest.raises(InvalidInputError, match="input up"):
        v.launch({"gate": good["gate"], "up": torch.randn(2, 9)}, p, cfg)
    with pytest.raises(InvalidInputError, match="out"):
        v.launch(good, p, cfg, out=torch.empty(2, 8, dtype=torch.float16))


# ---- symbolic proofs ------------------------------------------------------------------------------
def test_contracts_of_a_tuned_config_prove_memory_safety():
    from warpsmith.verify.symbolic import prove

    p = get_op("geglu_backward").problem({"M": 6, "H": 40}, "float16", {"packed": True})
    v = get_variant("geglu_backward", "tiled")
    (c,) = v.contracts(p, small(p))
    statuses = {(o.name, o.status.split("(")[0]) for r in prove(c) for o in r.obligations}
    assert ("in_bounds", "proved") in statuses and ("int32_no_overflow", "proved") in statuses
    assert all(s in ("proved", "bounded") for _, s in statuses), statuses
