"""Rewrites beyond reassociation and the fold at init: a sum or mean over a GEMM's features folded
into its weight, what forward computes from the parameters alone computed once per parameter
version, the rules that keep both sound, and the program as written as the last candidate when a
rewrite fails verification."""
import importlib.util
import sys
from pathlib import Path

import torch

from warpsmith.compiler import rewrite as R
from warpsmith.compiler import solve
from warpsmith.compiler.solve import compile_problem

PROBLEMS = Path(__file__).parent / "problems"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_sum_over_a_gemms_features_is_folded_into_the_weight_and_verified(tmp_path):
    out = tmp_path / "model_new.py"
    res = solve(PROBLEMS / "gemm_divide_sum.py", out, candidates=1)
    assert res.status == "accepted", res.verdict
    s = res.program.search
    [rec] = [r for r in s.rewrites if r["rewrite"] == "fold_reduction"]
    assert rec["taken"] and rec["after_ms"] < rec["before_ms"] and rec["reduction"] == "sum"
    [mm] = [n for n in res.program.library_calls if n.op == "matmul"]
    assert mm.shape == (16, 1)  # the (16, 64) product is never computed
    assert s.hoisted is not None and s.hoisted["read"] == ["matmul_wsum"]
    assert "def _ws_folded(self, _dev):" in out.read_text()
    assert res.to_json()["search"]["hoisted"]["folded"]


def test_a_mean_of_a_linear_with_bias_on_a_3d_input_keepdim_false(tmp_path):
    res = solve(PROBLEMS / "linear_mean.py", tmp_path / "m.py", candidates=1)
    assert res.status == "accepted", res.verdict
    [rec] = [r for r in res.program.search.rewrites if r["rewrite"] == "fold_reduction"]
    assert rec["taken"] and rec["reduction"] == "mean"
    assert set(res.program.search.hoisted["read"]) == {"linear_wsum", "linear_bsum"}
    [mm] = [n for n in res.program.library_calls if n.op == "matmul"]
    assert mm.shape == (4, 8, 1) and mm.args[2] is not None  # the bias is summed too


def test_an_added_constant_does_not_commute_with_the_sum_so_nothing_is_folded():
    _, _, prog = compile_problem(PROBLEMS / "linear_shift_sum.py")
    assert not prog.search.rewrites
    [mm] = [n for n in prog.library_calls if n.op == "matmul"]
    assert mm.shape == (16, 40)


def test_an_unsound_rewrite_is_rejected_and_the_program_as_written_is_solved(monkeypatch, tmp_path):
    """Plant an unsound rule (a constant add treated as commuting with the sum: off by (N - 1) c):
    the check rejects the rewritten program, and the last candidate, the program as written, passes."""
    monkeypatch.setattr(R, "_SCALAR_CHAIN", ("mul", "div", "add"))
    out = tmp_path / "model_new.py"
    res = solve(PROBLEMS / "linear_shift_sum.py", out, candidates=2)
    assert res.status == "accepted", res.verdict
    [bad] = res.attempts
    assert bad["rewrites"] and bad["reason"] == "wrong_result", bad  # off by (N - 1) c = 39
    assert not res.program.search.rewrites  # the accepted program is the one as written
    assert "_ws_folded" not in out.read_text()
    assert "with rewrites" in res.explain()


def test_values_of_the_parameters_alone_are_folded_and_broadcasts_are_not():
    _, notes, prog = compile_problem(PROBLEMS / "param_prep.py")
    h = prog.search.hoisted
    assert set(h["read"]) == {"mul", "mul_1"}  # w * gain and bias * 2
    assert "mul_2" not in h["folded"]  # shift.expand(M, N) * 3: bigger than shift, computed in the consumer
    assert h["after_ms"] < h["before_ms"]
    assert any(n.startswith("fold at init") for n in notes)


def test_the_fold_is_computed_once_and_again_when_a_parameter_changes(tmp_path):
    out = tmp_path / "param_prep_new.py"
    res = solve(PROBLEMS / "param_prep.py", out, candidates=1)
    assert res.status == "accepted", res.verdict
    mod = _load(out, "ws_param_prep_new")
    torch.manual_seed(0)
    ref = mod.Model()
    torch.manual_seed(0)
    new = mod.ModelNew()
    assert list(new.state_dict()) == list(ref.state_dict())  # the folded values are no state
    calls = []
    launch = mod._ws_fused_0_launch  # the first generated kernel computes a folded value

    def counted(*a):
        calls.append(1)
        return launch(*a)

    mod._ws_fused_0_launch = counted
    x = torch.randn(mod.M, mod.K)
    with torch.no_grad():
        torch.testing.assert_close(new(x), ref(x))
        new(torch.randn(mod.M, mod.K))
        assert len(calls) == 1  # once for two calls
        new.gain.mul_(2.0)  # an in-place update (an optimizer step) bumps the version counter
        ref.gain.mul_(2.0)
        torch.testing.assert_close(new(x), ref(x))
        assert len(calls) == 2
        other = mod.Model()
        new.load_state_dict(other.state_dict())
        torch.testing.assert_close(new(x), other(x))
        assert len(calls) == 3
