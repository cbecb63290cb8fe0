"""Values between kernels stored in 16 bits (compiler.precision): taken only within a share of
KernelBench's tolerance and declared to the check, whose contract it widens up to that tolerance
and never past it."""
from pathlib import Path

import pytest
import torch

from warpsmith.check import check
from warpsmith.check.compare import judge
from warpsmith.compiler import solve
from warpsmith.compiler.capture import capture, load_problem
from warpsmith.compiler.precision import Declaration
from warpsmith.compiler.solve import compile_problem

PROBLEMS = Path(__file__).parent / "problems"


def test_a_half_program_stores_its_float32_intermediates_in_float16_declared_and_verified(tmp_path):
    out, report = tmp_path / "model_new.py", tmp_path / "report.json"
    res = solve(PROBLEMS / "half_storage.py", out, strict=True, candidates=1)
    assert res.status == "accepted", res.verdict
    [rec] = [r for r in res.program.search.rewrites if r["rewrite"] == "storage"]
    assert rec["taken"] and rec["dtype"] == "float16" and rec["after_ms"] < rec["before_ms"]
    assert 0 < rec["deviation_share"] <= 0.5
    decl = res.program.declared
    assert decl is not None and set(decl.points) == set(rec["at"].split(", "))
    assert res.verdict["report"]["protocol"]["declared"]["points"] == {k: "float16" for k in decl.points}
    text = out.read_text()
    assert "dtype=torch.float16, device=dev)" in text  # the intermediate buffers are 16-bit
    # the float64 program with the declared rounding differs from the exact one, by little
    x = [torch.randn(64, 48, dtype=torch.float16)]
    exact, rounded = Declaration(decl.program).run(x)[0], decl.run(x)[0]
    assert 0 < float((exact - rounded).abs().max()) < 1e-2 * (1 + float(exact.abs().max()))


def test_a_float32_program_keeps_float32_because_bfloat16_is_outside_kernelbench_tolerance():
    _, _, prog = compile_problem(PROBLEMS / "float_storage.py")
    [rec] = [r for r in prog.search.rewrites if r["rewrite"] == "storage"]
    assert not rec["taken"] and "KernelBench's tolerance" in rec["why_not"] and rec["deviation_share"] > 1
    assert prog.declared is None and "dtype=torch.bfloat16" not in prog.text


def test_a_value_exact_in_16_bits_on_the_problems_inputs_alone_is_not_stored_lower():
    """mlp_blocks' ``clamp`` saturates at ±1 on every get_inputs() draw, so rounding it to bfloat16 is
    exact there and not on the check's other draws: the admission moves each stored value by a full
    rounding, whatever it is, and refuses (the docs' solve example then opens with no rejection)."""
    _, _, prog = compile_problem(PROBLEMS / "mlp_blocks.py")
    [rec] = [r for r in prog.search.rewrites if r["rewrite"] == "storage" and r["at"] == "clamp"]
    assert not rec["taken"] and "moved by a rounding" in rec["why_not"] and rec["deviation_share"] > 1
    assert prog.declared is None
    problem = load_problem(PROBLEMS / "mlp_blocks.py")
    exact = Declaration(capture(problem).program)
    x = problem.inputs
    rounded = Declaration(exact.program, {"clamp": torch.bfloat16})
    assert torch.equal(rounded.run(x)[0], exact.run(x)[0])  # exact in bf16 on these inputs...
    assert not torch.equal(rounded.run_moved(x)[0], exact.run(x)[0])  # ...but not a rounding away


def test_without_rewrites_nothing_is_stored_lower():
    _, _, prog = compile_problem(PROBLEMS / "half_storage.py", rewrites_on=False)
    assert prog.declared is None
    assert not any(r["rewrite"] == "storage" for r in prog.search.rewrites)


def test_the_declared_deviation_widens_the_contract_up_to_kernelbench_tolerance_and_no_further():
    g = torch.Generator().manual_seed(0)
    y64 = torch.randn(4096, generator=g, dtype=torch.float64)
    ref = y64.to(torch.float16)
    out = (y64 * (1 + 3e-3)).to(torch.float16)  # 3e-3 relative: far beyond 4x the fp16 reference's error
    assert not judge(out, ref, y64)[0]
    ok, msg = judge(out, ref, y64, declared=y64 * (1 + 4e-3))
    assert ok and "declared deviation" in msg
    # a declaration as large as the error itself cannot pass an output past KernelBench's 1e-2
    far = (y64 * (1 + 3e-2)).to(torch.float16)
    ok, msg = judge(far, ref, y64, declared=y64 * (1 + 3e-2))
    assert not ok and "KernelBench's tolerance for float16" in msg
    # float32: the cap is 1e-4
    r32 = y64.to(torch.float32)
    ok, msg = judge((y64 * (1 + 5e-4)).to(torch.float32), r32, y64, declared=y64 * (1 + 5e-4))
    assert not ok and "float32 (0.0001" in msg


class _Lie:
    """A declaration that claims the program may be 50% off."""

    summary = "a lie"

    def __init__(self, model):
        self.model = model

    def run(self, args):
        return (self.model(*[a.double() for a in args]).double() * 1.5,)

    def to_json(self):
        return {"kind": "lie"}


def test_a_lying_declaration_cannot_pass_a_wrong_candidate(tmp_path):
    cand = tmp_path / "wrong.py"
    cand.write_text((PROBLEMS / "half_storage.py").read_text().replace("class Model(", "class ModelNew(")
                    .replace(".sum(1).half()", ".sum(1).mul(1.05).half()"))
    import importlib.util

    spec = importlib.util.spec_from_file_location("half_storage_ref", PROBLEMS / "half_storage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    model = mod.Model().double()
    rep = check(PROBLEMS / "half_storage.py", cand, timing=False, declared=_Lie(model))
    assert not rep.accepted and rep.reason == "wrong_result"
    assert "KernelBench's tolerance" in rep.first_failure.message
    assert rep.to_json()["protocol"]["declared"] == {"kind": "lie"}


@pytest.mark.parametrize("name", ["half_storage.py", "float_storage.py"])
def test_the_program_as_written_is_checked_without_a_declaration(name, tmp_path):
    res = solve(PROBLEMS / name, tmp_path / "m.py", candidates=1, check_kwargs={"timing": False})
    assert res.status == "accepted", res.verdict


def test_a_sol_execbench_solution_declares_per_signature_and_the_check_uses_it(tmp_path):
    from warpsmith.compiler.solexec import declarations, load, solve_definition

    path = Path(__file__).parent / "precision_defs" / "centred_fp16"
    res = solve_definition(path, tmp_path / "solution.json", candidates=1)
    assert res.status == "accepted", res.verdict
    for s in res.signatures:
        [rec] = [r for r in s.program.search.rewrites if r["rewrite"] == "storage"]
        assert rec["taken"] and 0 < rec["deviation_share"] <= 0.5 and s.program.declared is not None
    decl = declarations(res.signatures)
    assert res.verdict["report"]["protocol"]["declared"] == decl.to_json()
    assert len(decl.to_json()["signatures"]) == 2
    # the check's own draws find their signature's declaration (a miss would mean the strict contract)
    problem = load(path)
    for w in problem.workloads:
        args = problem.draw_inputs(w, torch.Generator().manual_seed(3), problem.distributions[1], torch.device("cpu"))
        [y] = decl.run(args)
        assert y.dtype == torch.float64 and tuple(y.shape) == (w.axes["rows"],)
    with pytest.raises(KeyError):
        decl.run([torch.randn(7, 48).half(), torch.randn(48).half()])


# ---- approximate functions in generated kernels (compiler.precision.approximate) ----------------------
def test_approximate_exp_division_and_rsqrt_are_declared_and_verified(tmp_path):
    out = tmp_path / "model_new.py"
    res = solve(PROBLEMS / "approx_math.py", out, strict=True, candidates=1)
    assert res.status == "accepted", res.verdict
    recs = {r["rule"]: r for r in res.program.search.rewrites if r["rewrite"] == "approximate"}
    assert set(recs) == {"exp2", "fast_div", "rsqrt"}
    for r in recs.values():
        assert r["taken"] and 0 < r["deviation_share"] <= 0.5 and r["after_ms"] == r["before_ms"]
    decl = res.program.declared
    assert decl is not None and not decl.points
    assert sorted(decl.approx.values()) == ["exp2", "fast_div", "rsqrt"]
    assert res.verdict["report"]["protocol"]["declared"]["approx"] == decl.approx
    text = "".join(k.source for k in res.program.kernels)
    assert "tl.exp2(" in text and "1.4426950408889634" in text and "approx=True" in text and "tl.rsqrt(" in text
    assert "tl.sqrt(" not in text and "tl.exp(" not in text
    # the declared deviation is small, and not nothing
    x = [torch.randn(16, 40), torch.randn(16, 40)]
    exact, moved = Declaration(decl.program).run(x)[0], decl.run(x)[0]
    assert 0 < float((exact - moved).abs().max()) < 1e-5 * (1 + float(exact.abs().max()))


def test_a_wrong_exp2_prescale_is_rejected_and_the_program_as_written_is_solved(monkeypatch, tmp_path):
    from warpsmith.compiler import codegen_expr

    monkeypatch.setattr(codegen_expr, "LOG2E", 1.443)  # log2(e) = 1.44269504...: wrong in the 4th digit
    out = tmp_path / "model_new.py"
    res = solve(PROBLEMS / "approx_math.py", out, candidates=2)
    assert res.status == "accepted", res.verdict
    [bad] = res.attempts
    assert bad["rewrites"] and bad["reason"] == "wrong_result", bad
    assert res.program.declared is None and not res.program.search.rewrites
    assert "tl.exp2(" not in out.read_text()


def test_an_approximation_past_the_tolerance_share_is_not_taken():
    """exp(8x) - exp(8x + 1e-3): a few ulps of each exp are hundreds of times the difference."""
    _, _, prog = compile_problem(PROBLEMS / "exp_cancel.py")
    [rec] = [r for r in prog.search.rewrites if r["rewrite"] == "approximate"]
    assert rec["rule"] == "exp2" and not rec["taken"] and rec["deviation_share"] > 0.5
    assert "KernelBench's tolerance" in rec["why_not"]
    assert prog.declared is None and "tl.exp2(" not in prog.text
