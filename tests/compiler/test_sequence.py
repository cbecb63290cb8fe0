"""The search over rewrite decisions and partitions (compiler.sequence): it finds a program the
greedy rewrites followed by the partition search miss, deterministic for a seed, within its budget."""
from pathlib import Path

import pytest

from warpsmith.compiler import compile_problem, solve
from warpsmith.compiler.capture import capture, load_problem
from warpsmith.compiler.ir import build
from warpsmith.compiler.lower import lower
from warpsmith.compiler.sequence import search_sequences
from warpsmith.cost import program as P
from warpsmith.errors import InvalidInputError
from warpsmith.targets import get_target

PROBLEMS = Path(__file__).parent / "problems"
H100 = get_target("h100")
EPILOGUE_MS = 1e-3  # 1 us more for a GEMM with a generated epilogue (a stand-in for its register pressure)


@pytest.fixture
def heavy_epilogues(monkeypatch):
    """The program cost model with every GEMM epilogue 1 us dearer. The greedy decision still takes
    sequence_gate.py's epilogue (it saves the gate's kernel under greedy fusion), but keeping the
    gate as written and recomputing it in both readers (the partition search's move) is cheaper."""
    base = P.library_ms

    def priced(n, target, config=None):
        return base(n, target, config) + (EPILOGUE_MS if n.attrs.get("epilogue") else 0.0)

    monkeypatch.setattr(P, "library_ms", priced)


def _lowered(name: str):
    g = build(capture(load_problem(PROBLEMS / name)))
    lower(g)
    return g


def test_the_sequence_search_beats_greedy_rewrites_then_partitions_and_is_verified(heavy_epilogues, tmp_path):
    _, _, before = compile_problem(PROBLEMS / "sequence_gate.py", library_budget=0, sequences=1)
    first = before.search.sequence
    assert first.states[0]["taken"] == ["gemm_epilogue@matmul"] and len(first.states) == 1  # the old order

    res = solve(PROBLEMS / "sequence_gate.py", tmp_path / "new.py", library_budget=0)
    assert res.status == "accepted", res.verdict
    s = res.program.search
    q = s.to_json()["sequence"]
    assert q["winner"] > 0 and q["winner_forced"] == {"gemm_epilogue@matmul": "keep as written"}
    assert q["predicted_ms"] < q["greedy_rewrites_ms"] - 0.9 * EPILOGUE_MS
    assert q["greedy_rewrites_ms"] == pytest.approx(first.greedy_rewrites_ms)
    assert "recompute" in s.to_json()["chosen_label"] and not any(r["taken"] for r in s.rewrites)
    assert s.best_ms == pytest.approx(q["predicted_ms"]) and s.best_ms < s.greedy_ms
    assert "_ws_gemm_epilogue(" not in (tmp_path / "new.py").read_text()  # the gate recomputed, not in the GEMM
    assert "rewrite sequences: " in res.explain() and "forced gemm_epilogue@matmul: keep as written" in res.explain()


def test_the_sequence_search_is_deterministic_for_a_seed_and_keeps_its_budget():
    g = _lowered("scalar_algebra.py")
    text = g.format()
    runs = [search_sequences(g, H100, budget=3, seed=5)[1].to_json() for _ in range(2)]
    assert runs[0] == runs[1] and runs[0]["evaluated"] == 3
    assert all(len(st["forced"]) <= 1 for st in runs[0]["states"]) and runs[0]["states"][0]["forced"] == {}
    assert g.format() == text  # the caller's graph is left as it was
    assert search_sequences(g, H100, budget=1)[1].to_json()["evaluated"] == 1
    with pytest.raises(InvalidInputError, match="sequence search budget"):
        search_sequences(g, H100, budget=0)


def test_a_state_that_raises_is_a_reported_dead_end(monkeypatch):
    from warpsmith.compiler import decisions, sequence

    real = sequence.apply_rewrites

    def fragile(g, target):
        if decisions._FORCED.get():
            raise ValueError("a forced site this pass cannot take")
        return real(g, target)

    monkeypatch.setattr(sequence, "apply_rewrites", fragile)
    best, rec = search_sequences(_lowered("scalar_algebra.py"), H100, budget=3)
    q = rec.to_json()
    assert q["evaluated"] == 3 and q["winner"] == 0 and best.forced == {}
    assert all("forced site this pass cannot take" in st["error"] for st in q["states"][1:])


def test_solve_with_the_tree_search_emits_a_verified_program_and_reports_its_strategy(heavy_epilogues, tmp_path):
    import json

    from click.testing import CliRunner

    from warpsmith.cli.main import cli

    out, report = tmp_path / "new.py", tmp_path / "report.json"
    r = CliRunner().invoke(cli, ["solve", str(PROBLEMS / "sequence_gate.py"), "-o", str(out), "--json", str(report),
                                 "--explain", "--budget", "0", "--sequences", "4", "--strategy", "mcts", "--quiet"])
    assert r.exit_code == 0, r.output
    assert "verdict: accepted" in r.output and out.exists()
    q = json.loads(report.read_text())["search"]["sequence"]
    assert q["strategy"] == "mcts" and 1 < q["evaluated"] <= 4 and q["dead_ends"] == 0 and q["iterations"] >= 1
    assert q["states"][0]["via"] == "initial" and {s["via"] for s in q["states"][1:]} <= {"expand", "rollout"}
    # one site (the epilogue): the tree search flips it, as the hill climb does, and keeps the cheaper program
    assert q["winner_forced"] == {"gemm_epilogue@matmul": "keep as written"}
    assert q["predicted_ms"] < q["greedy_rewrites_ms"] - 0.9 * EPILOGUE_MS
    assert "_ws_gemm_epilogue(" not in out.read_text()
    assert "rewrite sequences: strategy mcts" in r.output and "0 dead end(s)" in r.output


def test_search_sequences_names_a_bad_strategy():
    with pytest.raises(InvalidInputError, match="hill or mcts"):
        search_sequences(_lowered("scalar_algebra.py"), H100, budget=2, strategy="anneal")
