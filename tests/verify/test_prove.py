"""The symbolic prover: library GEMM contracts, a correct example, and planted kernel bugs."""
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.verify.symbolic import prove

ZOO = Path(__file__).parent / "zoo"
sys.path.insert(0, str(ZOO))
import kernel_bugs  # noqa: E402


def statuses(contract):
    return [(o.name, o.status) for r in prove(contract) for o in r.obligations]


def test_correct_kernels_never_fail_and_loops_are_proved_for_all_trip_counts():
    for c in kernel_bugs.CORRECT:
        st = statuses(c)
        assert st and not any(s == "failed" for _, s in st), st
        assert ("in_bounds", "proved") in st  # quantified over every size and trip count


@pytest.mark.parametrize("name", sorted(kernel_bugs.BUGS))
def test_planted_kernel_bugs_fail_the_right_obligation_with_a_counterexample(name):
    contract, obligation = kernel_bugs.BUGS[name]
    obs = [o for r in prove(contract) for o in r.obligations]
    failed = [o for o in obs if o.status == "failed"]
    assert any(o.name == obligation for o in failed), [(o.name, o.status) for o in obs]
    assert all(o.counterexample for o in failed)


def test_library_gemm_contracts_prove_or_bound_everything():
    from warpsmith.ops.matmul.contract import CONTRACTS

    for c in CONTRACTS:
        for r in prove(c):
            for o in r.obligations:
                assert o.status == "proved" or o.status.startswith("bounded("), (c.name, o.to_json())
            # the masked loads and stores of the plain kernels are proved over the whole domain
            if c.name == "matmul_tiled_kernel" and not r.constexprs["EVEN_K"]:
                assert all(o.status == "proved" for o in r.obligations if o.name == "in_bounds")


def test_guard_is_needed_for_even_k():
    """Without its guard, the EVEN_K specialization reads past K: the prover finds it."""
    from warpsmith.ops.matmul.contract import tiled, _meta, EPILOGUE

    c = tiled([_meta(16, 32, 16, True, **EPILOGUE)])
    c.guards = {}
    failed = [o for r in prove(c) for o in r.obligations if o.status == "failed"]
    assert any(o.name == "in_bounds" and "a_ptr" in o.subject for o in failed)


def test_prove_cli_exit_codes_and_json(tmp_path):
    ok_file = ZOO / "copy_ok.py"
    out = tmp_path / "p.json"
    r = CliRunner().invoke(cli, ["prove", str(ok_file), "--json", str(out)])
    assert r.exit_code == 0 and "5 of 5 obligations proved, 0 failed, 0 bounded or unknown" in r.output, r.output
    doc = json.loads(out.read_text())
    assert doc["reports"] and all(o["status"] == "proved" for x in doc["reports"] for o in x["obligations"])
    # the same file with the mask one past the end: exit 1, the failed obligation named
    text = ok_file.read_text()
    assert text.count("mask=offs < M), mask=offs < M)") == 1
    bad_file = tmp_path / "copy_off_by_one.py"
    bad_file.write_text(text.replace("mask=offs < M), mask=offs < M)", "mask=offs <= M), mask=offs <= M)"))
    bad_json = tmp_path / "bad.json"
    r = CliRunner().invoke(cli, ["prove", str(bad_file), "--json", str(bad_json)])
    assert r.exit_code == 1 and "0 failed" not in r.output, r.output
    failed = [o for x in json.loads(bad_json.read_text())["reports"] for o in x["obligations"] if o["status"] == "failed"]
    assert failed and {o["name"] for o in failed} >= {"in_bounds"}
    bad = CliRunner().invoke(cli, ["prove", str(tmp_path / "missing.py")])
    assert bad.exit_code == 2 and "expected" in bad.output


def test_certificates_carry_the_proofs_and_a_failed_obligation_rejects():
    from warpsmith.ops.matmul.variant import TiledGemm
    from warpsmith.ops.matmul.spec import MATMUL
    from warpsmith.targets import get_target
    from warpsmith.verify import verify_candidate

    cfg = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, num_warps=2, num_stages=2, EVEN_K=False,
               PRECISION="ieee")
    p = MATMUL.problem({"M": 20, "N": 20, "K": 24}, "float16")
    cert = verify_candidate(MATMUL, p, TiledGemm(), cfg, get_target("h100"), prove=True)
    doc = cert.to_json()
    assert cert.passed and doc["symbolic"]["in_bounds"] == "proved" and doc["proofs"]
    assert doc["symbolic"]["split_coverage"].startswith("not applicable")

    class WithBuggyContract(TiledGemm):
        def contracts(self, problem, config):
            return [kernel_bugs.BUGS["rows[off_by_one]"][0]]

    bad = verify_candidate(MATMUL, p, WithBuggyContract(), cfg, get_target("h100"), prove=True)
    assert not bad.passed and bad.first_failure().name == "symbolic.in_bounds"


def test_gathers_are_proved_under_a_declared_precondition_only():
    ok = [o for r in prove(kernel_bugs.gather((0, kernel_bugs.NB))) for o in r.obligations]
    assert all(o.status == "proved" for o in ok if o.name == "in_bounds") and len(ok) >= 3
    # a precondition too weak for the addresses: a concrete counterexample
    weak = [o for r in prove(kernel_bugs.gather((0, kernel_bugs.NB + 1))) for o in r.obligations]
    assert any(o.name == "in_bounds" and o.status == "failed" and o.counterexample for o in weak)
    # no precondition: the addresses depend on unknown data; never proved
    none = [o for r in prove(kernel_bugs.gather(None)) for o in r.obligations]
    assert none and all(o.status != "proved" for o in none)
