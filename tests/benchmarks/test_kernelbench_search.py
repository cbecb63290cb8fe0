"""benchmarks/kernelbench.py records per problem what the search did (from the ``solve --json``
report) and counts the solved problems on which it left greedy fusion."""
import importlib.util
from pathlib import Path

from warpsmith.compiler import compile_problem

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("kernelbench_bench", ROOT / "benchmarks" / "kernelbench.py")
KB = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(KB)
PROBLEMS = ROOT / "tests" / "compiler" / "problems"


def _report(chosen_ms: float, label: str = "greedy", rewrites=(), kernels=(), library=(), untuned=1.0) -> dict:
    return {"search": {"target": "h100", "greedy_ms": 1.0, "greedy_untuned_ms": untuned, "chosen_ms": chosen_ms,
                       "untuned_ms": chosen_ms, "chosen_label": label, "rewrites": list(rewrites),
                       "kernels": list(kernels), "library": list(library), "hoisted": None}}


def test_summary_needs_a_difference_and_a_time_change():
    same = KB.search_summary(_report(1.0))
    assert same["left_greedy_by"] == [] and not same["left_greedy"]
    # a different partition that changes the time by 4%: not counted; by 6%: counted
    assert not KB.search_summary(_report(0.96, "greedy, merge g0+g1"))["left_greedy"]
    moved = KB.search_summary(_report(0.94, "greedy, merge g0+g1"))
    assert moved["left_greedy"] and moved["left_greedy_by"] == ["partition"] and moved["left_greedy_structural"]
    # a time change with no difference from greedy fusion is not counted (it cannot happen in a sound report)
    assert not KB.search_summary(_report(0.5))["left_greedy"]
    rw = KB.search_summary(_report(0.5, rewrites=[{"rewrite": "reassociate", "at": "mm", "taken": True},
                                                  {"rewrite": "algebra", "at": "mul", "taken": False}]))
    assert rw["rewrites_taken"] == ["reassociate@mm"] and rw["left_greedy_by"] == ["rewrite"]
    assert KB.search_summary({"status": "capture"}) is None


def test_tuned_configs_count_against_greedy_at_default_configs():
    k = {"name": "_ws_fused_0", "config": {"BLOCK": 256}, "default_config": {"BLOCK": 1024}}
    lib = {"node": "mm", "op": "matmul", "config": {"BLOCK_M": 128}, "tuned": True}
    s = KB.search_summary(_report(1.0, kernels=[k], library=[lib], untuned=1.2))
    assert s["tuned_kernels"] == ["_ws_fused_0"] and s["tuned_library"] == ["mm"] and s["library_tuned"]
    assert s["left_greedy"] and s["left_greedy_by"] == ["tuned config"]
    assert not s["left_greedy_structural"]  # neither the partition nor a rewrite
    # a partition change worth 4% once the library call's tuned gain (10% of greedy) is put back: not structural
    lib = {**lib, "default_ms": 0.3, "predicted_ms": 0.2}
    s = KB.search_summary(_report(0.86, "greedy, merge g0+g1", library=[lib]))
    assert s["left_greedy"] and s["left_greedy_by"] == ["partition", "tuned config"]
    assert not s["left_greedy_structural"]
    assert KB.search_summary(_report(0.84, "greedy, merge g0+g1", library=[lib]))["left_greedy_structural"]


def test_table_counts_solved_problems_only():
    rows = [{"level": 2, "problem": f"{i}_p.py", "category": "matmul", "outcome": o, "seconds": 1.0,
             "search": KB.search_summary(_report(t, "greedy, split g0@1"))}
            for i, (o, t) in enumerate([("solved", 0.5), ("solved", 1.0), ("rejected", 0.5), ("solved", 0.7)])]
    text = KB.table(rows, [2])
    assert "search left greedy on 2 of 3 solved problems" in text
    assert "left greedy" in KB.problem_table(rows)


def test_a_real_report():
    """matmul_chain.py: the reassociation rewrite leaves greedy fusion by much more than 5% (predicted)."""
    _, _, prog = compile_problem(PROBLEMS / "matmul_chain.py")
    s = KB.search_summary({"search": prog.search.to_json()})
    assert "rewrite" in s["left_greedy_by"] and any(r.startswith("reassociate@") for r in s["rewrites_taken"])
    assert s["chosen_ms"] < 0.95 * s["greedy_ms"] and s["left_greedy"]
    assert s["greedy_rewrites_ms"] is not None and s["sequence_forced"] == {}  # the greedy rewrites won
