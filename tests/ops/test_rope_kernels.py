"""RoPE kernels under the interpreter: both ops, layouts, table forms and dtypes against the spec's
reference under its contract; verification; planted bugs the verifier must reject; proofs."""
import pytest
import torch

from warpsmith.errors import InvalidInputError
from warpsmith.ops import default_variant, get_variant
from warpsmith.ops.rope.variant import Tiled
from warpsmith.core.opspec import Problem
from warpsmith.ops import get_op
from warpsmith.ops.rope.spec import head_dim
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
SHAPE = {"B": 2, "S": 5, "Hq": 3, "Hk": 2, "R2": 5, "E": 3}  # GQA, odd rotary and pass-through dims


def check(op, p, cfg, dist="normal", seed=0, inputs=None, variant=None):
    spec = get_op(op)
    v = variant or get_variant(op, "tiled")
    inputs = inputs or spec.make_inputs(p, torch.Generator().manual_seed(seed), dist)
    outs = v.launch(inputs, p, cfg)
    ref64, scale = spec.oracle(inputs, p.attrs)
    for out, (shape, dtype), c, r64, s, r in zip(outs, spec.outputs(p), spec.contract(p), ref64, scale,
                                                  spec.reference(inputs, p.attrs)):
        assert out.shape == shape and out.dtype == dtype
        ok, msg = c.check(out, r64, s, r)
        assert ok, (op, p.describe(), cfg, dist, msg)
    return outs


def cfg_for(p, **over):
    return {**get_variant(p.op, "tiled").default_config(p, H100), "BLOCK_H": 4, "BLOCK_S": 4, "BLOCK_R": 4,
            "num_warps": 1, **over}


CASES = [  # (layout, positions, cos_sin, table_dtype, persistent)
    ("neox", "implied", "table", "input", 0), ("gptj", "given", "table", "float32", 2),
    ("neox", "implied", "per_token", "input", 1), ("gptj", "implied", "per_token", "float32", 0),
    ("neox", "given", "table", "float32", 0), ("gptj", "implied", "table", "input", 4),
]


@pytest.mark.parametrize("op", ["rope", "rope_backward"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_layouts_table_forms_and_dtypes(op, dtype):
    i = ["float32", "float16", "bfloat16"].index(dtype) + 3 * (op == "rope_backward")
    layout, positions, cos_sin, tdt, persistent = CASES[i]
    shape = {**SHAPE, "P": 11} if positions == "given" else SHAPE
    p = get_op(op).problem(shape, dtype, {"layout": layout, "positions": positions, "cos_sin": cos_sin,
                                          "table_dtype": tdt})
    check(op, p, cfg_for(p, PROGRAMS_PER_SM=persistent), dist=("normal", "specials", "outliers")[i % 3])


@pytest.mark.parametrize("op", ["rope", "rope_backward"])
def test_verify_candidate_passes(op):
    p = get_op(op).problem({"B": 2, "S": 7, "Hq": 4, "Hk": 2, "R2": 4, "E": 2, "P": 16}, "bfloat16",
                           {"layout": "gptj" if op == "rope" else "neox", "positions": "given"})
    v = get_variant(op, "tiled")
    cert = verify_candidate(get_op(op), p, v, v.default_config(p, H100), H100)
    assert cert.passed, cert.to_json()["checks"]
    assert any(c.name == "exact_identity" and c.status.startswith("tested") for c in cert.checks)


def test_batch_broadcast_tables_and_positions_and_one_token():
    p = get_op("rope").problem({"B": 3, "S": 4, "Hq": 2, "Hk": 1, "R2": 3}, "float16", {"cos_sin": "per_token"})
    x = get_op("rope").make_inputs(p, torch.Generator().manual_seed(1))
    shared = {**x, "cos": x["cos"][:1], "sin": x["sin"][:1]}  # (1, S, R2): stride 0 over the batch
    expect = {**x, "cos": x["cos"][:1].expand(3, -1, -1), "sin": x["sin"][:1].expand(3, -1, -1)}
    out = get_variant("rope", "tiled").launch(shared, p, cfg_for(p))
    ref = get_op("rope").reference(expect, p.attrs)
    assert all(torch.equal(a, b) for a, b in zip(out, ref))
    one = get_op("rope").problem({"B": 1, "S": 1, "Hq": 1, "Hk": 1, "R2": 1}, "float32", {"positions": "given"})
    check("rope", one, cfg_for(one))


def test_positions_outside_the_table_are_not_read_and_give_nan():
    p = get_op("rope").problem({"B": 1, "S": 4, "Hq": 1, "Hk": 1, "R2": 2, "E": 1, "P": 3}, "float32",
                               {"positions": "given"})
    x = get_op("rope").make_inputs(p, torch.Generator().manual_seed(2))
    x["positions"] = torch.tensor([[0, -1, 3, 2]])
    q, k = get_variant("rope", "tiled").launch(x, p, cfg_for(p))
    bad = torch.tensor([False, True, True, False])
    assert torch.isnan(q[0, 0, bad, :4]).all() and not torch.isnan(q[0, 0, ~bad]).any()
    assert torch.equal(q[0, 0, :, 4], x["q"][0, 0, :, 4])  # the copied dim is still copied


# ---- planted bugs: each must be rejected by the verifier ------------------------------------------
def _with(problem, **attrs):
    return Problem(problem.op, problem.shape, problem.dtype, {**problem.attrs, **attrs})


class ForwardForBackward(Tiled):
    """rope_backward rotating by +theta (the sin sign not flipped)."""

    def launch(self, inputs, problem, config, out=None):
        fwd = Tiled("rope")
        return fwd.launch({"q": inputs["dq_out"], "k": inputs["dk_out"], **{k: v for k, v in inputs.items()
                                                                            if k not in ("dq_out", "dk_out")}},
                          Problem("rope", problem.shape, problem.dtype, problem.attrs), config, out)


class GptjAsHalves(Tiled):
    """GPT-J's interleaved pairs taken as NeoX halves."""

    def launch(self, inputs, problem, config, out=None):
        return super().launch(inputs, _with(problem, layout="neox"), config, out)


class PositionsIgnored(Tiled):
    """Given positions ignored: token s reads table row s."""

    def launch(self, inputs, problem, config, out=None):
        rest = {k: v for k, v in inputs.items() if k != "positions"}
        return super().launch(rest, _with(problem, positions="implied"), config, out)


class PassThroughUnwritten(Tiled):
    """Partial rotary: the dims past rotary_dim are never written."""

    def launch(self, inputs, problem, config, out=None):
        shape = {k: v for k, v in problem.shape.items() if k != "E"}
        narrow = Problem(problem.op, shape, problem.dtype, problem.attrs)
        r = 2 * problem.shape["R2"]
        ins = {k: (v[..., :r] if k in ("q", "k") else v) for k, v in inputs.items()}
        outs = tuple(o[..., :r] for o in out)
        super().launch(ins, narrow, config, outs)
        return out


@pytest.mark.parametrize("bug, op, attrs, expect", [
    (ForwardForBackward, "rope_backward", {}, "exceeds contract"),
    (GptjAsHalves, "rope", {"layout": "gptj"}, "exceeds contract"),
    (PositionsIgnored, "rope", {"positions": "given"}, "exceeds contract"),
    (PassThroughUnwritten, "rope", {}, "left unwritten (poison survived)"),
])
def test_planted_bugs_are_rejected(bug, op, attrs, expect):
    shape = {"B": 1, "S": 6, "Hq": 2, "Hk": 1, "R2": 4, "E": 2} | ({"P": 9} if attrs.get("positions") else {})
    p = get_op(op).problem(shape, "float32", attrs)
    cert = verify_candidate(get_op(op), p, bug(op), cfg_for(p, BLOCK_S=8), H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and expect in failure.status, \
        (failure.name, failure.status)


# ---- validity, heuristics, cost model, launcher checks ---------------------------------------------
def test_defaults_are_valid_across_the_range():
    for shape in ({"B": 1, "S": 1, "Hq": 1, "Hk": 1, "R2": 1}, {"B": 1, "S": 1, "Hq": 32, "Hk": 8, "R2": 64},
                  {"B": 4, "S": 8192, "Hq": 64, "Hk": 8, "R2": 32, "E": 64},
                  {"B": 65535, "S": 3, "Hq": 2, "Hk": 2, "R2": 256}):
        for op in ("rope", "rope_backward"):
            p = get_op(op).problem(shape, "bfloat16", {"positions": "given"})
            v = default_variant(p, H100)
            cfg = v.default_config(p, H100)
            assert v.rejection(p, cfg, H100) is None and v.space(p, H100).project(cfg) == cfg, (shape, cfg)
            w = v.work(p, cfg, H100)
            assert w.bytes_moved >= get_op(op).min_bytes(p) * 0.999


def test_more_heads_per_tile_read_cos_sin_fewer_times_and_bad_configs_are_refused():
    v = get_variant("rope", "tiled")
    p = get_op("rope").problem({"B": 1, "S": 4096, "Hq": 32, "Hk": 8, "R2": 64}, "bfloat16",
                               {"table_dtype": "float32"})
    base = v.default_config(p, H100)
    few = v.work(p, {**base, "BLOCK_H": 2, "BLOCK_S": 8}, H100)
    many = v.work(p, {**base, "BLOCK_H": 16, "BLOCK_S": 1}, H100)
    assert many.bytes_moved < few.bytes_moved
    assert "per thread" in v.invalid(p, {**base, "BLOCK_H": 64, "BLOCK_S": 64, "BLOCK_R": 64, "num_warps": 1}, H100)
    assert "idle" in v.invalid(p, {**base, "BLOCK_H": 1, "BLOCK_S": 1, "BLOCK_R": 8, "num_warps": 8}, H100)
    pers = {**base, "PROGRAMS_PER_SM": 2}
    assert v.programs(p, pers, H100) == 2 * H100.sms and v.work(p, pers, H100).steps > v.work(p, base, H100).steps


def test_launcher_refuses_bad_operands():
    v = get_variant("rope", "tiled")
    p = get_op("rope").problem({"B": 1, "S": 2, "Hq": 1, "Hk": 1, "R2": 2}, "float16", {"positions": "given"})
    x = get_op("rope").make_inputs(p, torch.Generator().manual_seed(0))
    with pytest.raises(InvalidInputError, match="positions"):
        v.launch({**x, "positions": x["positions"].float()}, p, cfg_for(p))
    with pytest.raises(InvalidInputError, match="input cos"):
        v.launch({**x, "cos": x["cos"].float()}, p, cfg_for(p))  # table_dtype=input: float16 expected
    with pytest.raises(InvalidInputError, match="input k"):
        v.launch({**x, "k": x["k"][..., :3]}, p, cfg_for(p))
    assert head_dim(p) == 4


# ---- symbolic proofs ------------------------------------------------------------------------------
def test_the_position_gather_is_proved_in_bounds_for_any_position_values():
    """in_bounds of every load and store of a tuned config's kernel, over the whole domain of sizes and
    strides, for any int64 positions (the kernel masks its gather). The full report (race freedom,
    coverage: bounded; int32: proved) takes ~15 s per constexpr set; see ops/rope/contract.py."""
    from warpsmith.verify.symbolic.prove import Prover

    p = get_op("rope").problem({"B": 2, "S": 7, "Hq": 4, "Hk": 2, "R2": 4, "E": 2, "P": 16}, "float16",
                               {"layout": "gptj", "positions": "given"})
    (c,) = get_variant("rope", "tiled").contracts(p, cfg_for(p))
    prover = Prover(c, c.constexprs[0])
    trace = prover.trace()
    kinds = {(a.base, a.kind) for a in trace.accesses}
    assert {("pos_ptr", "load"), ("cos_ptr", "load"), ("qo_ptr", "store"), ("ko_ptr", "store")} <= kinds
    for i, a in enumerate(trace.accesses):
        ob = prover.in_bounds(trace, a, i)
        assert ob.status == "proved", ob.to_json()
    assert prover.int32_no_overflow(trace).status == "proved"
