"""Generated kernels carry launch contracts (compiler/contracts.py) that ``warpsmith prove`` proves:
in bounds and no int32 overflow for every shape of the contract's symbolic domain, race freedom and
coverage through writer witnesses; a planted codegen bug fails an obligation and ``solve`` writes nothing.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import z3
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.compiler import compile_problem, solve
from warpsmith.compiler import contracts as C
from warpsmith.compiler.ir import is_generator
from warpsmith.compiler.proofs import prove_text

HERE = Path(__file__).parent / "problems"
BUDGET = 1500  # ms per obligation (deterministic z3 units)

# problem -> what it exercises
PROBLEMS = {
    "swish_chain": "a pointwise chain with a broadcast operand",
    "colnorm": "whole-row kernels reducing the last and a non-last dim",
    "long_rows": "a row of 20000 walked in chunks (looped), a row of 1, a pointwise kernel",
    "scans": "a cumsum over a non-last dim, a reverse cumsum, a cumprod",
    "cat_flip": "a cat of two inputs and an arange (a generator), a flip over two dims",
}


@pytest.fixture(scope="module")
def compiled():
    return {name: compile_problem(HERE / f"{name}.py")[2] for name in PROBLEMS}


@pytest.fixture(scope="module")
def proved(compiled):
    return {name: prove_text(prog.text, f"{name}_new.py", BUDGET) for name, prog in compiled.items()}


def _by_name(proofs, name):
    return [o for k in proofs.kernels for o in k.obligations if o.name == name]


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_every_generated_kernel_is_proved_in_bounds_and_int32_for_all_shapes(proved, compiled, name):
    p = proved[name]
    assert len(p.kernels) == len(compiled[name].kernels) >= 1
    assert not p.failed, p.lines()
    for k in p.kernels:
        names = {o.name for o in k.obligations}
        assert {"launch", "in_bounds", "int32_no_overflow", "race_free", "coverage"} <= names, (k.kernel, names)
        for o in k.obligations:
            if o.name in ("launch", "in_bounds", "int32_no_overflow"):
                assert o.status == "proved", (k.kernel, o.name, o.subject, o.status, o.detail)


def test_race_freedom_and_coverage_are_proved_through_the_witnesses(proved):
    obs = [o for p in proved.values() for n in ("race_free", "coverage") for o in _by_name(p, n)]
    assert obs and all(o.status == "proved" and "witness" in o.detail for o in obs), \
        [(o.name, o.subject, o.status, o.detail) for o in obs if o.status != "proved"]


def test_the_kernel_kinds_the_problems_cover(compiled, proved):
    kinds = {k.kind for p in proved.values() for k in p.kernels}
    assert kinds == {"pointwise", "rows (whole rows)", "rows (looped)"}
    specs = [C.launch_spec(k) for prog in compiled.values() for k in prog.kernels]
    assert any(s["reverse"] for s in specs) and any(s["fixed"] for s in specs)  # a reverse scan, a cat
    assert any(s["kind"] == "rows" and s["red"] != [len(s["domain"]) - 1] for s in specs)  # a non-last dim
    nodes = [n for prog in compiled.values() for k in prog.kernels for n in k.group.nodes]
    assert {"flip", "cat", "cumsum", "cumprod"} <= {n.op for n in nodes}
    assert any(is_generator(a) for n in nodes for a in n.operands())  # an arange, computed inline


def test_the_contract_is_symbolic_not_the_captured_shape(compiled, tmp_path):
    prog = compiled["cat_flip"]
    module = C.kernel_module(prog.text, tmp_path / "cat_flip_new.py")
    for spec in getattr(module, C.TABLE):
        launch = C.record(module, spec)
        c, _ = C.contract(getattr(module, spec["kernel"]), spec, launch.constexprs)
        D = [z3.Int(f"D{d}") for d in range(len(spec["domain"]))]
        for d, size in enumerate(spec["domain"]):
            s = z3.Solver()
            s.add(*c.assumptions(c.constexprs[0]), D[d] == size + 1000)
            # every dim takes other sizes, but the one a cat splits (its pieces' sizes are literals)
            assert (s.check() == z3.sat) == (d not in spec["fixed"]), (spec["kernel"], d)


# a planted codegen bug (problem, text of a kernel, replaced by) -> the obligation that must fail
BUGS = {
    "load one stride past its dim": ("swish_chain", "in1_ptr + i0 * s1_0", "in1_ptr + (i0 + 1) * s1_0", "in_bounds"),
    "a row store without its mask": ("colnorm", "EMULATE), mask=cmask)", "EMULATE))", "in_bounds"),
    "a chunk mask one too long": ("long_rows", "cmask = (cols < N) & rmask", "cmask = (cols <= N) & rmask", "in_bounds"),
    "a cat piece read past its end": ("cat_flip", "(i1 < 7)), other", "(i1 < 8)), other", "in_bounds"),
    "two lanes storing one element": ("swish_chain", "tl.store(out0_ptr + offs,", "tl.store(out0_ptr + offs // 2,",
                                      "race_free"),
    "a mask dropping the last element": ("swish_chain", "mask = offs < NUMEL", "mask = offs < NUMEL - 1", "coverage"),
    "offsets in int32": ("swish_chain", "tl.program_id(0).to(tl.int64) * BLOCK", "tl.program_id(0) * BLOCK",
                         "int32_no_overflow"),
}


@pytest.mark.parametrize("bug", list(BUGS))
def test_a_planted_bug_fails_an_obligation_with_a_counterexample(compiled, bug):
    name, old, new, want = BUGS[bug]
    text = compiled[name].text
    assert old in text
    p = prove_text(text.replace(old, new, 1), f"{name}_new.py", BUDGET)
    failed = [o for _, o in p.failed]
    assert any(o.name == want for o in failed), p.lines()
    o = next(o for o in failed if o.name == want)
    assert o.counterexample, o
    if want != "coverage":  # an access (or two) at the emitted file's line
        src = o.counterexample["source"]
        assert all(x.startswith(f"{name}_new.py:") for x in (src if isinstance(src, list) else [src])), src


def test_a_launcher_that_disagrees_with_the_contract_fails_the_launch_check(compiled):
    text = compiled["swish_chain"].text
    old = "out0, 105, 3, 5, 7,"  # NUMEL, D0, D1, D2: a launcher passing a wrong element count
    assert old in text
    p = prove_text(text.replace(old, "out0, 104, 3, 5, 7,"), "swish_chain_new.py", BUDGET)
    bad = [o for _, o in p.failed if o.name == "launch"]
    assert bad and "NUMEL: the launcher passes 104, the contract 105" in bad[0].detail, p.lines()


def test_solve_refuses_to_write_a_program_whose_proof_fails(tmp_path, monkeypatch):
    from warpsmith.compiler import emit as emit_mod

    real = emit_mod.generate

    def wrong(*a, **k):  # a planted codegen bug: the broadcast operand read one stride too far
        kern = real(*a, **k)
        kern.source = kern.source.replace("in1_ptr + i0 * s1_0", "in1_ptr + (i0 + 1) * s1_0")
        return kern

    monkeypatch.setattr(emit_mod, "generate", wrong)
    out = tmp_path / "o.py"
    res = solve(HERE / "swish_chain.py", out, prove_timeout_ms=BUDGET, candidates=1)
    assert res.status == "rejected" and res.verdict["reason"] == "proof_failed", res.verdict
    assert "in_bounds" in res.verdict["message"] and not out.exists() and res.written is None
    doc = res.to_json()["proofs"]
    bad = [o for k in doc["kernels"] for o in k["obligations"] if o["status"] == "failed"]
    assert bad and bad[0]["counterexample"]["offset"] > bad[0]["counterexample"]["span"]
    assert "## proofs" in res.explain() and "failed" in res.explain()


def test_cli_reports_proofs_and_proves_the_written_file_on_its_own(tmp_path):
    out, rep = tmp_path / "cat_flip_new.py", tmp_path / "rep.json"
    r = CliRunner().invoke(cli, ["solve", str(HERE / "cat_flip.py"), "-o", str(out), "--json", str(rep),
                                 "--prove-timeout-ms", str(BUDGET)])
    assert r.exit_code == 0, r.output
    assert "proofs: 3 generated kernel(s)" in r.output and "0 failed" in r.output
    doc = json.loads(rep.read_text())
    assert [k["status"] for k in doc["proofs"]["kernels"]] == ["proved"] * 3
    proof_json = tmp_path / "proof.json"
    r = CliRunner().invoke(cli, ["prove", "--solution", str(out), "--timeout-ms", str(BUDGET), "--json",
                                 str(proof_json)])
    assert r.exit_code == 0, r.output
    assert json.loads(proof_json.read_text())["programs"][0]["kernels"][0]["status"] == "proved"
    # a file with no launch table is refused as input (exit 2)
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    assert CliRunner().invoke(cli, ["prove", "--solution", str(plain)]).exit_code == 2


def test_no_prove_skips_the_proofs(tmp_path):
    res = solve(HERE / "swish_chain.py", None, verify=False, prove=False)
    assert res.proofs is None and res.to_json()["proofs"] is None and "not proved" in res.explain()


def test_a_solution_json_is_proved_per_program(tmp_path):
    from warpsmith.compiler.solexec import solve_definition

    out = tmp_path / "solution.json"
    res = solve_definition(Path(__file__).parent / "definitions" / "silu_and_mul", out, verify=False,
                           prove_timeout_ms=BUDGET)
    assert all(s.proofs is not None and not s.proofs.failed for s in res.signatures)
    assert res.to_json()["programs"][0]["proofs"]["kernels"][0]["status"] == "proved"
    r = CliRunner().invoke(cli, ["prove", "--solution", str(out), "--timeout-ms", str(BUDGET)])
    assert r.exit_code == 0 and "solution.json:shape_0.py" in r.output, r.output


def test_an_identical_kernel_reuses_its_proof(compiled):
    text = compiled["colnorm"].text
    first = prove_text(text, "a.py", BUDGET)
    again = prove_text(text, "b.py", BUDGET)
    assert all(k.reused_from == k.kernel for k in again.kernels)
    assert [[o.status for o in k.obligations] for k in again.kernels] == \
        [[o.status for o in k.obligations] for k in first.kernels]
