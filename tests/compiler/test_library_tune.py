"""Library calls in an emitted program (GEMMs, softmax, norms: compiler.library_tune.TUNABLE) take a
tuned config: a tuning-DB record for their shape (one the variant's validity predicate accepts), else
one tuned during solve on the predicted path, else the launcher default; the emitted launcher call
carries it, the report names it (source db / tuned / default) with its predicted time against the
launcher default's, and the program is verified by the check as before. A config tuned during an
accepted solve is verified by the tuner's verifier and written to the tuning DB; a later solve takes
it from there. A program whose library configs fail the check is retried at the launchers' defaults."""
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
    assert lib["config"] == {k: cfg[k] for k in LT.TUNABLE["matmul"].knobs}
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


@pytest.mark.parametrize("option,value", [("--budget", "2"), ("--sequences", "2"), ("--strategy", "mcts")])
def test_the_search_options_are_refused_for_a_definition(option, value):
    from click.testing import CliRunner

    from warpsmith.cli.main import cli

    r = CliRunner().invoke(cli, ["solve", str(Path(__file__).parent / "definitions" / "nograd_softmax"), option, value])
    assert r.exit_code == 2 and option in r.output and "KernelBench .py problem" in r.output


def _call(prog, op):
    [n] = [n for n in prog.library_calls if n.op == op]
    return n


def test_a_softmax_takes_a_tuned_config_verified_written_back_and_reused(tmp_path):
    res = solve(PROBLEMS / "softmax.py", tmp_path / "new.py")
    assert res.status == "accepted", res.verdict
    [lib] = res.to_json()["search"]["library"]
    assert lib["op"] == "softmax" and lib["variant"] == "single_pass" and lib["source"] == "tuned"
    assert lib["config"] != lib["default_config"] == LT.TUNABLE["softmax"].default
    assert lib["predicted_ms"] < lib["default_ms"]
    # the config the single-pass variant accepts, carried by the emitted launcher call the check ran
    n = _call(res.program, "softmax")
    p = LT.db_problem(n)
    full = {**lib["config"], **LT.TUNABLE["softmax"].fixed(p)}
    assert get_variant("softmax", "single_pass").rejection(p, full, H100) is None
    cfg_line = ", ".join(f"{k}={v}" for k, v in lib["config"].items())
    assert (f"_ws_softmax(v_x, False, {LT.launcher_args(lib['config'], 'softmax')!r})  # library softmax: {cfg_line} "
            "(tuned)") in (tmp_path / "new.py").read_text()
    explain = res.explain()
    assert "source tuned (tuned during solve" in explain and "vs launcher default ROWS=1, num_warps=4" in explain
    # written back through the tuner's verifier: a verified record of the call's problem with its certificate
    rec = lib["db_record"]
    assert rec["written"] and "verify_candidate" in rec["verified_by"]
    [stored] = TuningDB().list(op="softmax")
    assert stored.id == rec["record_id"] and stored.config == full and stored.timing_kind == "predicted"
    assert stored.verified and stored.shape == dict(p.shape) and stored.variant == "single_pass"
    assert stored.certificate["verdict"] == "accepted" and stored.certificate["config"] == full
    # a later solve of the same shape takes it from the DB, and writes nothing more
    again = solve(PROBLEMS / "softmax.py", tmp_path / "again.py")
    [lib2] = again.to_json()["search"]["library"]
    assert again.status == "accepted" and lib2["source"] == "db" and lib2["config"] == lib["config"]
    assert lib2["evaluated"] == 0 and "db_record" not in lib2


def test_a_norm_takes_a_tuned_config():
    _, _, prog = compile_problem(PROBLEMS / "rmsnorm_written.py")
    [lib] = prog.search.library
    assert lib["op"] == "rms_norm" and lib["variant"] == "row" and lib["source"] == "tuned"
    assert lib["predicted_ms"] < lib["default_ms"] and lib["default_config"] == {"ROWS_PER_PROGRAM": 1, "num_warps": 4}
    assert f", True, {LT.launcher_args(lib['config'], 'rms_norm')!r})" in prog.text


def _plant(p, variant, cfg):
    TuningDB().put(TuningRecord(op=p.op, variant=variant, shape=dict(p.shape), dtype=p.dtype_name,
                                attrs=dict(p.key_attrs), target="h100", config=cfg,
                                fingerprint=fingerprint(get_variant(p.op, variant).source_hash()),
                                timing_kind="predicted", time_ms=0.001, baseline_ms=None, verified=True,
                                certificate={"verdict": "accepted"}))


def test_a_db_record_the_variant_rejects_is_skipped_for_the_default():
    _, _, prog = compile_problem(PROBLEMS / "softmax.py", library_budget=0)
    p = LT.db_problem(_call(prog, "softmax"))
    _plant(p, "single_pass", {"BLOCK_N": 64, "ROWS": 3, "num_warps": 1, "PROGRAMS_PER_SM": 0})  # ROWS not a power of 2
    _, _, prog = compile_problem(PROBLEMS / "softmax.py", library_budget=0)
    [lib] = prog.search.library
    assert lib["source"] == "default" and lib["config"] == {"ROWS": 1, "num_warps": 4}
    assert "rejected: BLOCK_N=64 and ROWS=3 must be powers of two" in lib["detail"]
    assert "_ws_softmax(v_x, False)" in prog.text


def test_a_program_whose_library_config_fails_the_check_is_retried_at_the_defaults(tmp_path, monkeypatch):
    bad = {"ROWS": 3, "num_warps": 1}  # tl.arange(0, 3): the emitted program cannot run
    monkeypatch.setattr(LT, "_tuned", lambda *a: (dict(bad), 1))
    real = LT.price
    monkeypatch.setattr(LT, "price", lambda n, t, p, c, tgt: real(n, t, p, c, tgt) / (2 if c == bad else 1))
    res = solve(PROBLEMS / "softmax.py", tmp_path / "new.py", candidates=1)
    assert res.status == "accepted", res.verdict
    [att] = res.attempts
    assert att["library_configs"] and att["reason"]
    [lib] = res.to_json()["search"]["library"]
    assert lib["source"] == "default" and "rejected by the check" in lib["detail"] and "db_record" not in lib
    assert "_ws_softmax(v_x, False)" in (tmp_path / "new.py").read_text()
    assert not TuningDB().path.exists() or TuningDB().list(op="softmax") == []  # nothing written back


def test_an_attention_takes_a_tuned_config():
    _, _, prog = compile_problem(PROBLEMS / "user_attention.py")
    [lib] = prog.search.library
    assert lib["op"] == "attention" and lib["variant"] == "flash" and lib["source"] == "tuned"
    assert lib["predicted_ms"] < lib["default_ms"] and lib["default_config"] == LT.TUNABLE["attention"].default
    p = LT.db_problem(_call(prog, "attention"))
    assert (p.shape["B"], p.shape["H"], p.shape["G"], p.shape["Sq"], p.shape["D"]) == (2, 2, 1, 16, 8)
    assert get_variant("attention", "flash").rejection(p, lib["config"], H100) is None
    assert f"cfg={LT.launcher_args(lib['config'], 'attention')!r})" in prog.text


@pytest.mark.slow  # the quick tier: the softmax solve above (the same emission, check and write-back)
def test_an_attention_with_a_tuned_config_is_verified_and_written_back(tmp_path):
    res = solve(PROBLEMS / "user_attention.py", tmp_path / "new.py")
    assert res.status == "accepted", res.verdict
    [lib] = res.to_json()["search"]["library"]
    assert lib["source"] == "tuned" and lib["db_record"]["written"]
    [stored] = TuningDB().list(op="attention")
    assert stored.variant == "flash" and stored.verified and stored.certificate["verdict"] == "accepted"
