"""`warpsmith profile`: the per-kernel table, the roofline (PNG and self-contained HTML) and the
Perfetto trace, every figure predicted; bytes and FLOPs from the op's own definition."""
from __future__ import annotations

import json
import re
import threading

import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.profile.trace import TraceRecorder, kernel_sequence
from warpsmith.targets.compiler import nvdisasm_path

M = N = K = 4096


@pytest.fixture(scope="module")
def matmul_profile(tmp_path_factory):
    """The issue's command, run once (the compile-only worker compiles the default config for sm_90)."""
    if nvdisasm_path() is None:
        pytest.skip("nvdisasm not found: the static machine-code model has nothing to count")
    tmp = tmp_path_factory.mktemp("profile")
    mp = pytest.MonkeyPatch()
    mp.setenv("WARPSMITH_FACTS_DIR", str(tmp / "facts"))
    try:
        res = CliRunner().invoke(cli, ["profile", "matmul", "--shape", f"M={M},N={N},K={K}", "--dtype", "bfloat16",
                                       "--target", "h200", "--html", str(tmp / "out.html"), "--png",
                                       str(tmp / "out.png"), "--trace", str(tmp / "out.json"), "--json",
                                       str(tmp / "profile.json")])
    finally:
        mp.undo()
    assert res.exit_code == 0, res.output
    return tmp, res.output


def test_bytes_and_flops_are_the_ops_definition(matmul_profile):
    tmp, out = matmul_profile
    doc = json.loads((tmp / "profile.json").read_text())
    assert doc["flops"] == 2 * M * N * K and doc["bytes"] == (M * K + K * N + M * N) * 2  # bf16
    (k,) = doc["kernels"]  # the default config is one tiled kernel
    assert k["name"] == "matmul_tiled_kernel" and k["counted_from"] == "op definition"
    assert k["flops"] == doc["flops"] and k["bytes"] == doc["bytes"]
    assert k["intensity"] == pytest.approx(2 * M * N * K / ((M * K + K * N + M * N) * 2))
    assert k["bound"] in ("tensor", "alu", "sfu", "issue", "shared", "l2", "hbm", "latency")
    assert 0 < k["sol"] <= 1 and k["predicted_ms"] >= doc["roofline_ms"]
    assert k["sol"] == pytest.approx(doc["roofline_ms"] / k["predicted_ms"])
    assert k["regs"] > 0 and k["spill_bytes"] == 0 and k["occupancy"] >= 1 and k["grid"] == [1024, 1]
    assert dict(k["top_classes"]).get("tensor", 0) > 0  # HGMMA, executed once per loop pass
    assert doc["timing"] == "predicted" and doc["measured_ms"] is None
    assert "measured: not available without a GPU" in out and "(predicted)" in out


def test_png_html_and_trace_are_valid(matmul_profile):
    tmp, _ = matmul_profile
    assert (tmp / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp / "out.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "predicted" in page
    assert len(re.findall(r'<circle class="kernel"', page)) == 1  # one point per kernel
    import xml.etree.ElementTree as ET

    svg = ET.fromstring(page[page.index("<svg"):page.index("</svg>") + len("</svg>")])  # well-formed
    assert [c.get("class") for c in svg if c.get("class")] == ["ceiling"] * 5 + ["kernel"]
    for ceiling in ("HBM", "L2", "shared memory", "tensor cores (bf16)", "FP32 FMA"):
        assert ceiling in page
    assert not re.search(r'(src|href)="https?:', page) and "<script" not in page  # self-contained
    trace = json.loads((tmp / "out.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [s["name"] for s in spans] == ["matmul_tiled_kernel"]
    assert spans[0]["args"]["timing"] == "predicted" and spans[0]["dur"] > 0


def test_without_compiling_the_analytic_model_gives_one_row(tmp_path):
    res = CliRunner().invoke(cli, ["profile", "rms_norm", "--shape", "M=64,N=4096", "--dtype", "bfloat16",
                                   "--no-compile", "--json", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "p.json").read_text())
    (k,) = doc["kernels"]
    assert k["flops"] == doc["flops"] and k["bytes"] == doc["bytes"] and k["predicted_ms"] == doc["analytic_ms"]
    assert "machine code not counted" in res.output


@pytest.mark.parametrize("args,message", [
    (["--html", "out.txt"], "--html: expected a file name ending in .html, got 'out.txt'"),
    (["--variant", "nope"], "unknown variant of matmul: expected one of"),
    (["--config", "[1]"], "--config: expected a JSON object of knobs"),
    (["--target", "tpu"], "unknown target: expected one of"),
])
def test_bad_input_exits_2_naming_expected_and_given(args, message):
    res = CliRunner().invoke(cli, ["profile", "matmul", "--shape", "M=64,N=64,K=64", "--no-compile", *args])
    assert res.exit_code == 2 and message in res.output, res.output


def test_recorder_puts_threads_on_their_own_tracks():
    rec = TraceRecorder("t")

    def work(i: int) -> None:
        with rec.span("compile", candidate=i) as extra:
            extra["ok"] = True

    threads = [threading.Thread(target=work, args=(i,), name=f"worker {i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    doc = json.loads(json.dumps(rec.to_json()))
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert sorted(names[s["tid"]] for s in spans) == ["worker 0", "worker 1"]
    assert all(s["args"]["ok"] is True for s in spans)


def test_kernel_sequence_lays_kernels_end_to_end():
    class Row:
        def __init__(self, name, ms):
            self.name, self.predicted_ms = name, ms

    rows = [Row("a", 0.5), Row("b", None), Row("c", 0.25), Row("d", float("inf"))]  # d: a config that cannot run
    spans = [e for e in kernel_sequence(rows).to_json()["traceEvents"] if e["ph"] == "X"]
    assert [(s["name"], s["ts"], s["dur"]) for s in spans] == [("a", 0.0, 500.0), ("c", 500.0, 250.0)]


def test_an_emitted_solution_is_profiled_kernel_by_kernel_in_launch_order(tmp_path):
    """Part of issue 30: `warpsmith profile SOLUTION.py` on a ModelNew file `warpsmith solve` wrote."""
    if nvdisasm_path() is None:
        pytest.skip("nvdisasm not found: the static machine-code model has nothing to count")
    from pathlib import Path

    from warpsmith.compiler.solve import solve

    problem = Path(__file__).resolve().parents[1] / "compiler" / "problems" / "colnorm.py"  # x: (10, 12) fp32
    res = solve(problem, tmp_path / "colnorm_new.py", verify=False, prove=False)  # emitted, not checked here
    kernels = [k.name for k in res.program.kernels]
    assert len(kernels) == 2
    r = CliRunner().invoke(cli, ["profile", str(tmp_path / "colnorm_new.py"), "--target", "h200", "--json",
                                 str(tmp_path / "p.json"), "--trace", str(tmp_path / "t.json"), "--html",
                                 str(tmp_path / "p.html")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "p.json").read_text())
    assert [k["name"] for k in doc["kernels"]] == kernels and doc["variant"] == "emitted program"
    first = doc["kernels"][0]  # the row means: reads x (480 B), writes 10 floats
    assert first["bytes"] == 10 * 12 * 4 + 10 * 4 and first["counted_from"] == "launch arguments / machine code"
    assert all(k["predicted_ms"] > 0 and k["regs"] > 0 for k in doc["kernels"])
    spans = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e["ph"] == "X"]
    assert [s["name"] for s in spans] == kernels and spans[1]["ts"] == pytest.approx(spans[0]["ts"] + spans[0]["dur"])
    assert len(re.findall(r'<circle class="kernel"', (tmp_path / "p.html").read_text())) == 2
    bad = CliRunner().invoke(cli, ["profile", str(problem), "--target", "h200"])  # a problem, not a solution
    assert bad.exit_code == 2 and "an emitted KernelBench solution" in bad.output, bad.output
    bad = CliRunner().invoke(cli, ["profile", str(problem), "--shape", "M=1"])
    assert bad.exit_code == 2 and "--shape: expected no value with a solution file" in bad.output, bad.output


def test_a_tuning_record_is_profiled_with_its_measured_time(tmp_path):
    """`profile --record ID`: the record's op, shape, variant and config; a measured record's time is the
    roofline's measured point (here a record written by hand: the plumbing, not a measurement)."""
    from warpsmith.db import TuningDB, TuningRecord
    from warpsmith.targets import fingerprint

    db = TuningDB(tmp_path / "t.db")
    cfg = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 2,
           "EVEN_K": True, "PRECISION": "ieee"}
    rid = db.put(TuningRecord(op="matmul", variant="tiled", shape={"M": 256, "N": 256, "K": 256}, dtype="float16",
                              attrs={}, target="h200", fingerprint=fingerprint("-"), config=cfg, timing_kind="measured",
                              time_ms=0.01, baseline_ms=None, verified=False, certificate=None),
                 allow_unverified=True)
    res = CliRunner().invoke(cli, ["profile", "--record", str(rid), "--db", str(tmp_path / "t.db"), "--no-compile",
                                   "--json", str(tmp_path / "p.json"), "--html", str(tmp_path / "p.html")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["variant"] == "tiled" and doc["config"] == cfg and doc["target"] == "h200"
    assert doc["measured_ms"] == 0.01 and f"tuning record #{rid}, measured on h200" in res.output
    assert doc["flops"] == 2 * 256 ** 3
    page = (tmp_path / "p.html").read_text()
    assert len(re.findall(r'<circle class="measured"', page)) == 1 and "<b>measured</b> on a GPU" in page
    assert len(re.findall(r'<circle class="kernel"', page)) == 1
    other = CliRunner().invoke(cli, ["profile", "--record", str(rid), "--db", str(tmp_path / "t.db"), "--no-compile",
                                     "--target", "h100"])
    assert other.exit_code == 0 and f"record #{rid} was timed on h200, not h100" in other.output
    bad = CliRunner().invoke(cli, ["profile", "matmul", "--record", str(rid), "--db", str(tmp_path / "t.db")])
    assert bad.exit_code == 2 and "OP: expected nothing besides --record" in bad.output, bad.output
    missing = CliRunner().invoke(cli, ["profile", "--record", "99", "--db", str(tmp_path / "t.db")])
    assert missing.exit_code == 2 and "no record with id 99" in missing.output, missing.output
    none = CliRunner().invoke(cli, ["profile"])
    assert none.exit_code == 2 and "OP: expected an op, a solution file (.py) or --record ID" in none.output
