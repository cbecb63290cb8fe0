"""The symbolic prover: library GEMM contracts, a correct example, and planted kernel bugs."""
import json
import sys
from pathlib import Path

import pytest
import z3
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


def _gemm_contracts():
    """Each library GEMM contract; the persistent kernel's (about a minute of z3) is slow-tier, its grid-stride
    witness being covered quickly in test_prove_witness."""
    from warpsmith.ops.matmul.contract import CONTRACTS

    return [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if "persistent" in c.name else [])
            for c in CONTRACTS]


@pytest.mark.parametrize("c", _gemm_contracts())
def test_library_gemm_contracts_prove_or_bound_everything(c):
    for r in prove(c):
        for o in r.obligations:
            assert o.status == "proved" or o.status.startswith("bounded("), (c.name, o.to_json())
        # the masked loads and stores of the plain kernels are proved over the whole domain
        if c.name == "matmul_tiled_kernel" and not r.constexprs["EVEN_K"]:
            assert all(o.status == "proved" for o in r.obligations if o.name == "in_bounds")
        # race freedom and coverage of C (grouped order, grid-stride loop) and of split-K's workspace,
        # through the writer witnesses; the atomic form has no witness
        if "atomic" not in c.name:
            assert all(o.status == "proved" for o in r.obligations if o.name in ("race_free", "coverage")), \
                (c.name, [(o.name, o.status) for o in r.obligations])


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
    lib_json = tmp_path / "lib.json"
    r = CliRunner().invoke(cli, ["prove", str(ZOO / "kernel_bugs.py"), "--json", str(lib_json)])
    # the correct kernels fail nothing, but split coverage is only ever bounded: exit 1, not 0
    assert r.exit_code == 1 and "0 failed" in r.output, r.output
    doc = json.loads(lib_json.read_text())
    obs = [o for x in doc["reports"] for o in x["obligations"]]
    assert obs and not any(o["status"] == "failed" for o in obs)
    assert any(o["name"] == "split_coverage" and o["status"].startswith("bounded(") for o in obs)
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
    # no precondition: the table may hold any value, so the unmasked gather escapes: a counterexample
    none = [o for r in prove(kernel_bugs.gather(None)) for o in r.obligations]
    bad = [o for o in none if o.name == "in_bounds" and o.status == "failed" and "pool_ptr" in o.subject]
    assert bad, [(o.name, o.status, o.detail) for o in none]
    cex = bad[0].counterexample
    page = cex["loaded table_ptr value"]  # the index value that escapes
    assert not 0 <= page * 16 + cex["lane0"] <= (cex["NB"] - 1) * 16 + 15 and cex["offset"] == page * 16 + cex["lane0"]


def test_a_gather_checked_by_its_mask_is_proved_without_a_precondition():
    c = kernel_bugs.gather(None, checked=True)
    obs = [o for r in prove(c) for o in r.obligations if o.name == "in_bounds"]
    assert obs and all(o.status == "proved" for o in obs), [(o.subject, o.status, o.detail) for o in obs]


def _forced_bounded(monkeypatch):
    """Make every quantified query time out, so each obligation takes its bounded (numpy) path."""
    import importlib

    prove_mod = importlib.import_module("warpsmith.verify.symbolic.prove")
    real = prove_mod.Prover._solve

    def solve(self, facts, extra_assume=(), timeout_ms=None):
        concrete = extra_assume and all(z3.is_eq(e) and z3.is_int_value(e.arg(1)) for e in extra_assume)
        if not concrete and not (extra_assume and self.c.split):  # split's contiguous layout: a real solve
            return "unknown", "forced timeout"
        return real(self, facts, extra_assume, timeout_ms)

    monkeypatch.setattr(prove_mod.Prover, "_solve", solve)


CEX_PATHS = [("rows[off_by_one]", "in_bounds"), ("rows[overlap]", "race_free"),
             ("rows[missing_tail_tile]", "coverage"), ("strided_pick[int32]", "int32_no_overflow"),
             ("split_sum[twice]", "split_coverage"), ("split_sum[drops_tail]", "split_coverage")]


@pytest.mark.parametrize("forced", [False, True], ids=["quantified", "bounded"])
@pytest.mark.parametrize("name,obligation", CEX_PATHS)
def test_every_counterexample_serializes(monkeypatch, name, obligation, forced):
    """A counterexample from each path (z3 model or bounded numpy enumeration) is plain JSON."""
    if forced:
        _forced_bounded(monkeypatch)
    contract, _ = kernel_bugs.BUGS[name]
    reports = prove(contract)
    failed = [o for r in reports for o in r.obligations if o.status == "failed" and o.name == obligation]
    assert failed and failed[0].counterexample, [(o.name, o.status, o.detail) for r in reports for o in r.obligations]
    if forced and obligation != "split_coverage":
        assert "named shape" in failed[0].detail or "bounded" in failed[0].detail or obligation == "in_bounds"
    for r in reports:
        assert json.loads(json.dumps(r.to_json()))["contract"] == contract.name  # no default= needed


def test_prove_cli_on_a_failing_file_exits_1_with_serializable_counterexamples(tmp_path):
    src = tmp_path / "bad.py"
    src.write_text(f"import sys\nsys.path.insert(0, {str(ZOO)!r})\nimport kernel_bugs\n"
                   "CONTRACTS = [kernel_bugs.BUGS['rows[missing_tail_tile]'][0], kernel_bugs.BUGS['split_sum[drops_tail]'][0]]\n")
    out = tmp_path / "bad.json"
    r = CliRunner().invoke(cli, ["prove", str(src), "--json", str(out)])
    assert r.exit_code == 1, r.output
    doc = json.loads(out.read_text())
    failed = {o["name"] for x in doc["reports"] for o in x["obligations"] if o["status"] == "failed"}
    assert {"coverage", "split_coverage"} <= failed


def _line(source: str) -> str:
    path, line = source.rsplit(":", 1)
    return Path(path).read_text().splitlines()[int(line) - 1]


def test_counterexamples_name_the_smallest_sizes_iteration_element_and_source_line():
    obs = [o for r in prove(kernel_bugs.BUGS["rows[off_by_one]"][0]) for o in r.obligations]
    load = next(o for o in obs if o.name == "in_bounds" and o.status == "failed" and "x_ptr" in o.subject)
    cex = load.counterexample
    assert (cex["M"], cex["N"]) == (1, 1)  # the smallest failing sizes: one row, read one past the end
    assert cex["element"] == [1, 0] and cex["offset"] == 1 and cex["lane0"] == 1
    assert cex["iteration (loop at line 22)"] == 0
    assert "range(0, N, 32)" in _line(cex["source"].rsplit(":", 1)[0] + ":22")
    assert "tl.load(x_ptr" in _line(cex["source"])
    race = next(o for r in prove(kernel_bugs.BUGS["rows[overlap]"][0]) for o in r.obligations
                if o.name == "race_free")
    rc = race.counterexample
    assert race.status == "failed" and rc["first.pid0"] != rc["second.pid0"]
    assert rc["element"] == [rc["address"] // rc["N"], rc["address"] % rc["N"]]
    assert all("tl.store(y_ptr" in _line(s) for s in rc["source"])


def test_a_load_of_what_another_program_stores_is_a_failed_obligation():
    ok = {o.name: o for r in prove(kernel_bugs.neighbour(0)) for o in r.obligations}
    assert ok["cross_program_raw"].status == "proved"  # each program reads only what it writes itself
    bad = {o.name: o for r in prove(kernel_bugs.neighbour(1)) for o in r.obligations}
    raw = bad["cross_program_raw"]
    assert raw.status == "failed", raw
    cex = raw.counterexample
    assert cex["load.pid0"] != cex["store.pid0"] and cex["M"] == 18  # smallest: program 1 stores y[16] only where 17 < M
    assert cex["address"] == cex["load.pid0"] * 16 + cex["load.lane0"] + 1 == cex["store.pid0"] * 16 + cex["store.lane0"]


def test_a_load_of_what_another_program_stores_is_found_by_the_bounded_path_too(monkeypatch):
    _forced_bounded(monkeypatch)
    bad = {o.name: o for r in prove(kernel_bugs.neighbour(1)) for o in r.obligations}
    raw = bad["cross_program_raw"]
    assert raw.status == "failed" and raw.counterexample["load.program"] != raw.counterexample["store.program"]
    json.dumps(raw.to_json())


def test_int32_results_of_values_of_no_declared_range_are_not_proved_where_they_reach_an_address():
    """A wrap of a gathered index is possible for some table contents: never proved, whatever the mask."""
    obs = {o.name: o for r in prove(kernel_bugs.gather(None, checked=True)) for o in r.obligations}
    assert obs["int32_no_overflow"].status == "unknown" and "values=(lo, hi)" in obs["int32_no_overflow"].detail
    ranged = {o.name: o for r in prove(kernel_bugs.gather((0, kernel_bugs.NB), checked=True)) for o in r.obligations}
    assert ranged["int32_no_overflow"].status == "proved"
