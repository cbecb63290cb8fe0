"""Algebraic rewrites (compiler/algebra.py, compiler/lower_softmax_attention.py): scalars distributed
and collected, divisions by constants made multiplications, a constant factor moved through a
matmul, exp/log identities, and the user's own softmax-then-matmul as online softmax (the library's
flash attention). Each is taken, and the program verified; a planted unsound variant of each kind is
rejected by the check, and the program as written is solved instead."""
from pathlib import Path

from warpsmith.compiler import algebra as A
from warpsmith.compiler import lower_softmax_attention as LSA
from warpsmith.compiler import solve
from warpsmith.compiler.solve import compile_problem

PROBLEMS = Path(__file__).parent / "problems"


def _taken(res_or_prog, rule):
    prog = getattr(res_or_prog, "program", res_or_prog)
    return [r for r in prog.search.rewrites if r.get("rule") == rule and r["taken"]]


def _as_written(res, out):
    """The accepted program is the one as written: one rejected candidate before it, with rewrites."""
    assert res.status == "accepted", res.verdict
    [bad] = res.attempts
    assert bad["rewrites"] and bad["reason"] == "wrong_result", bad
    assert not res.program.search.rewrites
    assert "with rewrites" in res.explain()
    assert out.exists()


def test_scalars_are_distributed_collected_and_divisions_become_multiplications(tmp_path):
    out = tmp_path / "model_new.py"
    res = solve(PROBLEMS / "scalar_algebra.py", out, candidates=1)
    assert res.status == "accepted", res.verdict
    for rule in ("scalar_chain", "collect", "reciprocal"):
        recs = _taken(res, rule)
        assert recs and all(r["after_ms"] <= r["before_ms"] and r["removes"] for r in recs), rule
    text = "".join(k.source for k in res.program.kernels)
    assert "/ 3.0" not in text and "/ 7.0" not in text and "2.0)" in text  # (x * 1.5) * 4.0 / 3.0 = x * 2.0
    assert "rewrite algebra at" in res.explain()


def test_a_wrong_reciprocal_is_rejected_and_the_program_as_written_is_solved(monkeypatch, tmp_path):
    monkeypatch.setattr(A, "reciprocal", lambda c: 1.001 / c)  # off by 1e-3: far past the contract
    out = tmp_path / "model_new.py"
    _as_written(solve(PROBLEMS / "scalar_algebra.py", out, candidates=2), out)


def test_a_factor_on_a_gemms_output_moves_to_the_weight_which_is_folded_at_init(tmp_path):
    out = tmp_path / "model_new.py"
    res = solve(PROBLEMS / "scaled_matmul.py", out, candidates=1)
    assert res.status == "accepted", res.verdict
    [rec] = _taken(res, "scalar_matmul")
    assert rec["moved"] == "the product -> the second operand" and rec["after_ms"] < rec["before_ms"]
    [mm] = [n for n in res.program.library_calls if n.op == "matmul"]
    h = res.program.search.hoisted
    assert h is not None and h["read"] == [f"{mm.name}_scaled1"]  # w * 0.125, once per parameter version
    # the one generated kernel computes w * 0.125 at init: none scales the (64, 24) product at each call
    assert [n.name for k in res.program.kernels for n in k.group.nodes] == [f"{mm.name}_scaled1"]


def test_exp_log_identities_are_taken_and_verified(tmp_path):
    res = solve(PROBLEMS / "exp_log.py", tmp_path / "m.py", candidates=1)
    assert res.status == "accepted", res.verdict
    for rule in ("log_exp", "exp_product", "log_product"):
        assert _taken(res, rule), rule
    exps = [n for k in res.program.kernels for n in k.group.nodes if n.op == "exp"]
    assert len(exps) == 1  # four exps written; exp(t) * exp(s) is one exp, the others cancel


def test_exp_log_identities_are_not_made_where_exp_may_overflow_or_underflow():
    """Unbounded arguments: log(exp(x)) is -inf where exp(x) underflows, exp(x) * exp(y) NaN where one
    overflows and the other underflows; the rewrites would change those patterns (the check rejects
    that, on its outlier inputs), so they are not made."""
    _, _, prog = compile_problem(PROBLEMS / "exp_log_unbounded.py")
    assert not [r for r in prog.search.rewrites if r["rewrite"] == "algebra"]
    assert sum(n.op == "exp" for k in prog.kernels for n in k.group.nodes) == 3


def test_log_of_a_product_as_a_product_of_logs_is_rejected_and_the_program_as_written_is_solved(
        monkeypatch, tmp_path):
    """Plant log(exp(x) * y) -> x * log(y) (the log of a product as a product): the check rejects it."""
    monkeypatch.setattr(A, "log_product", lambda x, logy, name, shape, dtype, line:
                        A._pw(name, "mul", [x, logy], shape, dtype, line))
    out = tmp_path / "model_new.py"
    _as_written(solve(PROBLEMS / "exp_log.py", out, candidates=2), out)


def test_a_users_softmax_then_matmul_becomes_flash_attention_and_is_verified(tmp_path):
    out = tmp_path / "model_new.py"
    res = solve(PROBLEMS / "user_attention.py", out, candidates=1)
    assert res.status == "accepted", res.verdict
    [rec] = _taken(res, "online_softmax")
    assert rec["after_ms"] < rec["before_ms"] and rec["window"] is None and not rec["bias"]
    assert [n.op for n in res.program.library_calls] == ["attention"]  # no (S, S) matmul, no softmax
    [att] = res.program.library_calls
    assert abs(att.attrs["scale"] - 8 ** -0.5) < 1e-12
    # the online softmax's exp2 rounding is declared to the check (past its usual criterion on pow2 inputs)
    assert res.program.declared is not None and res.program.declared.approx == {"softmax": "online_softmax"}


def test_a_causal_mask_written_as_masked_fill_of_triu_becomes_the_window(tmp_path):
    res = solve(PROBLEMS / "user_causal_attention.py", tmp_path / "m.py", candidates=1)
    assert res.status == "accepted", res.verdict
    [rec] = _taken(res, "online_softmax")
    assert rec["window"] == (None, 0) and not rec["bias"]
    assert [n.op for n in res.program.library_calls] == ["attention"]
    assert not res.program.fallbacks  # the mask is gone with the scores (no triu left to run)


def test_the_probes_refuse_an_untransposed_key_and_a_planted_match_without_them_is_rejected(
        monkeypatch, tmp_path):
    """q @ k with k (B, H, D, S), S == D, has the shapes of q @ k^T but not its value (the product
    over the wrong axis of k): the probes refuse the match. Planted without them, the lowering is
    wrong; the check rejects it and the program as written is solved."""
    _, _, prog = compile_problem(PROBLEMS / "user_attention_untransposed.py")
    assert not [r for r in prog.search.rewrites if r.get("rule") == "online_softmax"]
    assert "attention" not in [n.op for n in prog.library_calls]
    monkeypatch.setattr(LSA, "verified", lambda *a, **k: True)
    out = tmp_path / "model_new.py"
    res = solve(PROBLEMS / "user_attention_untransposed.py", out, candidates=2)
    _as_written(res, out)
    assert "attention" not in [n.op for n in res.program.library_calls]
