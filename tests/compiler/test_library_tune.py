"""Library GEMMs in an emitted program take a tuned config (compiler.library_tune): a tuning-DB
record for their shape, else one tuned during solve on the predicted path; the emitted launcher call
carries it, the report names it with its predicted time against the launcher default's, and the
program is verified by the check as before."""
from pathlib import Path

import pytest

from warpsmith.compiler import compile_problem, solve
from warpsmith.compiler import library_tune as LT
from warpsmith.cost.program import LIBRARY_CONFIGS
from warpsmith.db import TuningDB, TuningRecord
from warpsmith.errors import InvalidInputError
from warpsmith.ops import get_variant
from warpsmith.targets import fingerprint, get_target

PROBLEMS = Path(__file__).parent / "problems"
H100 = get_target("h100")


def _gemm(prog):
    [n] = [n for n in prog.library_calls if n.op == "matmul"]
    return n


def test_a_tuned_config_is_emitted_reported_and_verified(tmp_path):
    res = solve(PROBLEMS / "linear_relu.py", tmp_path / "new.py")
    assert res.status == "accepted", res.verdict
    [lib] = res.to_json()["search"]["library"]
    assert lib["tuned"] and lib["source"] == "tuned" and lib["evaluated"] > 0
    assert lib["detail"].startswith("tuned during solve")
    assert lib["config"] != LIBRARY_CONFIGS["matmul"] and lib["default_config"] == LIBRARY_CONFIGS["matmul"]
    assert lib["predicted_ms"] < lib["default_ms"]
    # a config the tiled variant accepts for the call's problem, emitted in the launcher call the check ran
    assert get_variant("matmul", "tiled").rejection(LT.db_problem(_gemm(res.program)),
                                                    {**lib["config"], "EVEN_K": False, "PRECISION": "ieee"}, H100) is None
    args = repr(LT.launcher_args(lib["config"]))
    assert f"'relu', {args})" in (tmp_path / "new.py").read_text()
    explain = res.explain()
    assert "tuned during solve" in explain and "launcher default BLOCK_M=64" in explain
    # the program's predicted time counts the tuned call
    s = res.program.search
    assert s.best_ms == pytest.approx(s.greedy_ms - (lib["default_ms"] - lib["predicted_ms"]))


def test_a_db_record_is_taken_before_tuning():
    _, _, prog = compile_problem(PROBLEMS / "linear_relu.py", library_budget=0)
    n = _gemm(prog)
    assert "launch_config" not in n.attrs and prog.search.library[0]["detail"].endswith("budget 0)")
    p = LT.db_problem(n)
    cfg = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 4, "num_warps": 2, "num_stages": 2,
           "EVEN_K": False, "PRECISION": "ieee"}
    TuningDB().put(TuningRecord(op="matmul", variant="tiled", shape=dict(p.shape), dtype=p.dtype_name,
                                attrs=dict(p.attrs), target="h100", config=cfg,
                                fingerprint=fingerprint(get_variant("matmul", "tiled").source_hash()),
                                timing_kind="predicted", time_ms=0.001, baseline_ms=None, verified=True,
                                certificate={"verdict": "accepted"}))
    _, _, prog = compile_problem(PROBLEMS / "linear_relu.py")
    [lib] = prog.search.library
    assert lib["source"] == "db" and lib["detail"] == "tuning DB record (verified)" and lib["evaluated"] == 0
    assert lib["config"] == {k: cfg[k] for k in LT.LAUNCHER_KNOBS}
    assert "(32, 32, 16, 4, 2, 2))" in prog.text


def test_budget_zero_keeps_the_launcher_default_and_a_negative_one_is_refused():
    _, _, prog = compile_problem(PROBLEMS / "linear_relu.py", library_budget=0)
    [lib] = prog.search.library
    assert not lib["tuned"] and lib["config"] == LIBRARY_CONFIGS["matmul"] and lib["evaluated"] == 0
    assert "'relu')" in prog.text  # the launcher's own tiles
    with pytest.raises(InvalidInputError, match="library tuning budget"):
        LT.choose(_gemm(prog), H100, budget=-1)


def test_tuning_is_deterministic_for_a_seed():
    _, _, prog = compile_problem(PROBLEMS / "linear_relu.py", library_budget=0)
    n = _gemm(prog)
    LT._TUNED.clear()
    first = LT.choose(n, H100, budget=12, seed=3)
    LT._TUNED.clear()
    assert LT.choose(n, H100, budget=12, seed=3) == first and first["evaluated"] == 12


@pytest.mark.parametrize("option", ["--budget", "--sequences"])
def test_the_search_options_are_refused_for_a_definition(option):
    from click.testing import CliRunner

    from warpsmith.cli.main import cli

    r = CliRunner().invoke(cli, ["solve", str(Path(__file__).parent / "definitions" / "nograd_softmax"), option, "2"])
    assert r.exit_code == 2 and option in r.output and "KernelBench .py problem" in r.output
