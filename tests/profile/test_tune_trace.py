"""`warpsmith tune --trace`: a Perfetto trace of a real (tiny) tuning run."""
from __future__ import annotations

import json

from click.testing import CliRunner

from warpsmith.cli.main import cli


def test_tune_trace_has_compile_predict_verify_and_prove_spans(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPSMITH_FACTS_DIR", str(tmp_path / "facts"))  # nothing cached: the worker compiles
    out = tmp_path / "trace.json"
    res = CliRunner().invoke(cli, ["tune", "matmul", "--shape", "M=8,N=8,K=8", "--dtype", "float16", "--budget", "4",
                                   "--finalists", "1", "--trace", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    tracks = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    spans = [dict(e, track=tracks[e["tid"]]) for e in doc["traceEvents"] if e["ph"] == "X"]
    names = {s["name"] for s in spans}
    assert {"prescreen", "search", "compile", "predict", "verify", "prove", "test"} <= names, names
    compiles = [s for s in spans if s["name"] == "compile"]
    assert compiles and all(s["track"] == "compile-only worker" and s["args"]["variant"] for s in compiles)
    assert any(s["args"]["cached"] is False for s in compiles)
    (search,) = [s for s in spans if s["name"] == "search"]
    assert search["args"]["evaluated"] == 4
    assert {s["track"] for s in spans if s["name"] != "compile"} == {"main"}
    (verify,) = [s for s in spans if s["name"] == "verify"]
    assert verify["args"]["passed"] is True
    for stage in ("prove", "test"):  # the verifier's stages nest inside its span
        (s,) = [x for x in spans if x["name"] == stage]
        assert verify["ts"] <= s["ts"] and s["ts"] + s["dur"] <= verify["ts"] + verify["dur"] + 1
    assert all(s["dur"] >= 0 for s in spans)


def test_tune_help_documents_trace_and_a_bad_suffix_exits_2(tmp_path):
    res = CliRunner().invoke(cli, ["tune", "--help"])
    assert "--trace" in res.output and "ui.perfetto.dev" in res.output
    res = CliRunner().invoke(cli, ["tune", "matmul", "--shape", "M=8,N=8,K=8", "--trace", str(tmp_path / "t.txt")])
    assert res.exit_code == 2 and "--trace: expected a file name ending in .json" in res.output, res.output
