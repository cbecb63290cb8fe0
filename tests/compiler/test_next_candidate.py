"""A program the check rejects is never written nor used: solve verifies the search's next partition
in its place, and the report says what the rejected one failed. The wrong program is planted by
corrupting what a given candidate rank emits (its ModelNew scales the output)."""
import importlib
from pathlib import Path

from warpsmith.compiler import solve

SOLVE = importlib.import_module("warpsmith.compiler.solve")
PROBLEM = Path(__file__).parent / "problems" / "swish_chain.py"
WRONG = """
_ws_forward = ModelNew.forward


def _ws_wrong(self, *args):
    return _ws_forward(self, *args) * 1.0625  # planted: 6% off


ModelNew.forward = _ws_wrong
"""


def _plant(monkeypatch, bad_ranks):
    real, seen = SOLVE.compile_problem, []

    def compile_problem(*args, choice=0, **kwargs):
        g, notes, prog = real(*args, choice=choice, **kwargs)
        seen.append(choice)
        if choice in bad_ranks:
            prog.text += WRONG
        return g, notes, prog

    monkeypatch.setattr(SOLVE, "compile_problem", compile_problem)
    return seen


def test_a_rejected_best_candidate_gives_way_to_the_next(monkeypatch, tmp_path):
    seen = _plant(monkeypatch, {0})
    out = tmp_path / "model_new.py"
    res = solve(PROBLEM, out, prove=False)
    assert res.status == "accepted", res.verdict
    assert seen == [0, 1]
    [a] = res.attempts
    assert a["choice"] == 0 and a["reason"] not in (None, "") and a["partition"]
    assert "_ws_wrong" not in out.read_text()  # what was written is the accepted program
    assert res.program.search.choice == 1 and res.program.search.best_ms >= res.program.search.ranked[0][0].predicted_ms
    assert res.to_json()["rejected_candidates"] == res.attempts
    assert "candidates rejected before this one" in res.explain()


def test_when_every_candidate_is_rejected_nothing_is_written(monkeypatch, tmp_path):
    seen = _plant(monkeypatch, {0, 1})
    out = tmp_path / "model_new.py"
    res = solve(PROBLEM, out, prove=False, candidates=2)
    assert res.status == "rejected" and seen == [0, 1]
    assert [a["choice"] for a in res.attempts] == [0, 1]
    assert not out.exists() and res.written is None
