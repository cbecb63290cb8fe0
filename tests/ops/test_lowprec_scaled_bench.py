"""benchmarks/lowprec.py: the plan (cases from CASE_BUILDERS, the hook other parts of the family append
to), argument parsing, and the problems handed to the static compile. The dry run itself (CPU, tiny
cases, error contract on each GEMM) is ``python benchmarks/lowprec.py --dry-run``."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_scripts import load  # noqa: E402


def test_plan_cases_and_hook(capsys, monkeypatch):
    bench = load("lowprec")
    assert bench.main(["--print-plan", "--tokens", "16", "--groups", "scaled_gemm,quantization"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "20 cases"  # 3 shapes x 5 GEMM kinds + 5 quantization kinds at M = 16
    assert bench.main(["--print-plan", "--groups", "int4_weight_only"]) == 0
    int4 = capsys.readouterr().out.strip().splitlines()
    assert int4[-1] == "32 cases"  # Llama-3-8B's 4 projections x M in (1, 16, 64, 4096) x AWQ and GPTQ
    assert any(ln.split()[-1] == "int4_gptq_llama3-8b_down_M1" for ln in int4[:-1])
    names = [ln.split()[1] for ln in lines[:-1]]
    assert "fp8_block_M16_N14336_K4096" in names and "w8a8_M16_N4096_K4096" in names
    assert "fp8_hybrid_M16_N4096_K14336" in names
    assert bench.main(["--print-plan", "--tokens", "1,16", "--groups", "quantization"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "10 cases"

    def extra_cases(args):
        return [bench.Case(f"extra_M{m}", "extra", {"M": m}, 0.0, 0.0, [], lambda d: {}) for m in args.tokens]

    monkeypatch.setattr(bench, "CASE_BUILDERS", bench.CASE_BUILDERS + [extra_cases])
    assert bench.main(["--print-plan", "--tokens", "1,64", "--groups", "extra"]) == 0
    assert capsys.readouterr().out.split() == ["extra", "extra_M1", "extra", "extra_M64", "2", "cases"]
    import argparse

    probs = [p for c in bench.build(argparse.Namespace(tokens=[16])) for p in c.problems if p["op"] == "scaled_matmul"]
    assert {p["attrs"]["scaling"] for p in probs} == {"tensor", "row", "block"}
    assert all(p["op"] == "scaled_matmul" and p["dtype"] == "bfloat16" for p in probs)


def test_quantization_cases_name_their_problems_and_report_the_copy_fraction():
    """Each quantization case hands its problem to the static compile (and dispatch), and its row reports
    the bandwidth of the public function and of the default config as a fraction of the same-bytes copy."""
    import argparse

    from warpsmith.ops import get_op

    bench = load("lowprec")
    cases = bench.quant_cases(argparse.Namespace(tokens=[16]))
    assert [c.problems[0]["op"] for c in cases] == ["quantize"] * 4 + ["stochastic_round"]
    assert [c.problems[0]["attrs"].get("granularity") for c in cases[:4]] == ["row", "block", "tensor", "block"]
    for c in cases:
        pr = c.problems[0]
        get_op(pr["op"]).problem(pr["shape"], pr["dtype"], pr["attrs"])  # valid problems
    row = {"impls": {"copy": {"ms": 1.0}, "warpsmith": {"ms": 1.25}, "warpsmith_default": {"ms": 1.0 / 0.9}}}
    frac = bench.copy_fraction(row, bench.COPY_TARGET)
    assert abs(frac["warpsmith"]["fraction_of_copy"] - 0.8) < 1e-12 and not frac["warpsmith"]["meets_target"]
    assert frac["warpsmith_default"]["meets_target"]
    assert bench.copy_fraction({"impls": {"copy": {"status": "ok"}}}, 0.85) == {}  # the dry run: no timings
