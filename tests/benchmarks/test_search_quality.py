"""The search-quality benchmark runs (quick mode) and its numbers are sane."""
import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "search_quality.py"


def test_quick_run_writes_ratios_against_the_exhaustive_best(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("search_quality", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--quick", "--out", str(tmp_path)]) == 0
    doc = json.loads(next(tmp_path.glob("search_quality_*.json")).read_text())
    assert doc["timing_kind"] == "predicted" and doc["rows"]
    for r in doc["rows"]:
        assert r["ratio_median"] >= 1.0 - 1e-12  # nothing beats the exhaustive optimum
        assert r["budget"] <= r["space_size"]
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("target (within 2%")
