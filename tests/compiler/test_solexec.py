"""``warpsmith solve DEFINITION``: SOL-ExecBench / FlashInfer-Bench problems (``definitions/``) compiled into
a ``solution.json`` with inline sources, one program per input signature, verified by ``warpsmith.check``;
the sources import only torch, triton and the standard library, and run where warpsmith cannot be imported.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.compiler.solexec import compile_definition, solution, solve_definition

HERE = Path(__file__).parent / "definitions"

# definition -> per signature (workloads, generated kernels, library ops, ATen fallbacks)
EXPECTED = {
    "rmsnorm_bf16": [(["rms-b5-eps6"], 3, ["rms_norm"], []), (["rms-b5-eps5"], 3, ["rms_norm"], [])],
    "gated_mlp": [(["mlp-t5"], 0, ["matmul", "matmul", "matmul"], [])],  # silu(gate) * up: a GEMM's epilogue
    "silu_and_mul": [(["silu-t7"], 1, [], [])],
    "softmax_2shapes": [(["softmax-4x33"], 1, ["softmax"], []), (["softmax-3x128"], 1, ["softmax"], [])],
}


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    out = tmp_path_factory.mktemp("solved")
    return out, {name: solve_definition(HERE / name, out / f"{name}.json") for name in EXPECTED}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_definition_is_verified_and_written(solved, name):
    out, results = solved
    res = results[name]
    assert res.status == "accepted", res.verdict
    assert res.written == str(out / f"{name}.json")
    doc = json.loads(Path(res.written).read_text())
    assert doc["definition"] == name and doc["spec"]["entry_point"] == "main.py::run"
    assert doc["spec"]["languages"] == ["triton"] and doc["spec"]["destination_passing_style"] is False
    assert [s["path"] for s in doc["sources"]] == ["main.py"] + [f"shape_{i}.py" for i in range(len(EXPECTED[name]))]
    got = [(s.workloads, len(s.program.kernels), [n.op for n in s.program.library_calls],
            [n.op for n in s.program.fallbacks]) for s in res.signatures]
    assert got == EXPECTED[name]
    report = res.to_json()
    assert report["check"]["accepted"] is True and report["workloads"]["not_compiled"] == []
    assert report["check"]["report"]["coverage"]["workloads_checked"] == len(res.workloads_all)


def test_entry_point_parameters_are_the_definitions_inputs(solved):
    out, _ = solved
    for name in EXPECTED:
        d = json.loads((HERE / name / "definition.json").read_text())
        main = json.loads((out / f"{name}.json").read_text())["sources"][0]["content"]
        run = next(n for n in ast.parse(main).body if isinstance(n, ast.FunctionDef) and n.name == "run")
        assert [a.arg for a in run.args.args] == list(d["inputs"]), name


def _imports(text: str) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import"
            tops.add((node.module or "").split(".")[0])
    return tops


def test_sources_import_only_torch_triton_and_the_standard_library(solved):
    out, _ = solved
    for name in EXPECTED:
        for src in json.loads((out / f"{name}.json").read_text())["sources"]:
            tops = _imports(src["content"])
            assert tops <= {"torch", "triton"} | set(sys.stdlib_module_names), (name, src["path"], tops)


BLOCKED_RUN = r'''
import importlib.abc, importlib.util, json, os, sys, tempfile
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "warpsmith" or name.startswith("warpsmith."):
            raise ImportError("warpsmith is blocked in this test")
sys.meta_path.insert(0, Block())
import torch
DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
for sol_path, def_path, extra in zip(sys.argv[1::3], sys.argv[2::3], sys.argv[3::3]):
    sol, d = json.load(open(sol_path)), json.load(open(def_path))
    folder = tempfile.mkdtemp()
    for s in sol["sources"]:
        with open(os.path.join(folder, s["path"]), "w") as f:
            f.write(s["content"])
    spec = importlib.util.spec_from_file_location("solution_main", os.path.join(folder, "main.py"))
    main = importlib.util.module_from_spec(spec); spec.loader.exec_module(main)
    ns = {}
    exec(d["reference"], ns)
    workloads = [json.loads(line) for line in open(os.path.join(os.path.dirname(def_path), "workload.jsonl"))]
    const = {k: a["value"] for k, a in d["axes"].items() if a["type"] == "const"}
    def args_for(axes, inputs):
        axes = {**const, **axes}
        for k, a in d["axes"].items():
            if a["type"] == "expr":
                axes[k] = eval(a["expression"], {}, dict(axes))
        out = []
        for name, t in d["inputs"].items():
            desc = inputs.get(name, {"type": "random"})
            if t["shape"] is None:
                out.append(desc["value"])
            else:
                out.append(torch.randn([axes[a] for a in t["shape"]]).to(DT[t["dtype"]]))
        return out
    for w in workloads:
        xs = args_for(w["axes"], w["inputs"])
        want, got = ns["run"](*xs), main.run(*xs)
        want = [want[k] for k in d["outputs"]] if isinstance(want, dict) else want
        want, got = [want] if torch.is_tensor(want) else list(want), [got] if torch.is_tensor(got) else list(got)
        assert len(want) == len(got) == len(d["outputs"]), (sol_path, len(got))
        for a, b in zip(want, got):
            assert a.shape == b.shape and a.dtype == b.dtype, (sol_path, a.shape, b.shape, a.dtype, b.dtype)
            err = (a.float() - b.float()).abs().max().item()
            assert err <= 2e-2 * max(1.0, a.float().abs().max().item()), (sol_path, err)
    # a signature that was not compiled raises, it never runs torch instead
    w = workloads[0]
    axes = dict(w["axes"]); axes.update(json.loads(extra))
    try:
        main.run(*args_for(axes, w["inputs"]))
    except ValueError as e:
        assert "compiled only for the input signatures" in str(e), e
    else:
        raise AssertionError(f"{sol_path}: a signature that was not compiled ran")
    assert "warpsmith" not in sys.modules
print("ok")
'''


def test_solutions_run_where_warpsmith_cannot_be_imported(solved, tmp_path):
    out, _ = solved
    other = {"rmsnorm_bf16": {"batch_size": 6}, "gated_mlp": {"num_tokens": 4}, "silu_and_mul": {"num_tokens": 8},
             "softmax_2shapes": {"batch": 5, "n": 7}}
    args = []
    for name in EXPECTED:
        args += [str(out / f"{name}.json"), str(HERE / name / "definition.json"), json.dumps(other[name])]
    # -I: no PYTHONPATH, no user site, no script folder; the hook refuses warpsmith even if installed
    r = subprocess.run([sys.executable, "-I", "-c", BLOCKED_RUN, *args], capture_output=True, text=True,
                       cwd=tmp_path, env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"}, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


COMPILE_ONLY = r"""
import importlib.util, json, os, sys, tempfile
import torch
import warpsmith.core._triton as wt  # makes the compile-only driver active (WARPSMITH_COMPILE_ONLY)
from warpsmith.targets.compiler import recording
assert wt.COMPILE_ONLY_ARCH == "sm_90"
DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
for sol_path, def_path, launches in zip(sys.argv[1::3], sys.argv[2::3], sys.argv[3::3]):
    sol, d = json.load(open(sol_path)), json.load(open(def_path))
    folder = tempfile.mkdtemp()
    for s in sol["sources"]:
        with open(os.path.join(folder, s["path"]), "w") as f:
            f.write(s["content"])
    spec = importlib.util.spec_from_file_location("solution_main", os.path.join(folder, "main.py"))
    main = importlib.util.module_from_spec(spec); spec.loader.exec_module(main)
    for key, launch_count in zip(main._WS_SIGNATURES, json.loads(launches)):
        assert all(p._EMULATE is False for p in main._WS_PROGRAMS.values())
        xs = [torch.randn(k[1]).to(getattr(torch, k[2].split(".")[1])) if k[0] == "tensor" else eval(k[2])
              for k in key]
        with recording() as rec:
            main.run(*xs)
        assert len(rec) == launch_count, (sol_path, key, len(rec))
print("ok")
"""


def test_solution_kernels_compile_for_a_real_gpu_target(solved, tmp_path):
    """Triton's real front end, LLVM and ptxas compile every launch of every program for sm_90
    (no GPU needed; nothing runs)."""
    import os

    out, results = solved
    args = []
    for name in EXPECTED:
        launches = [len(s.program.kernels) + len(s.program.library_calls) for s in results[name].signatures]
        args += [str(out / f"{name}.json"), str(HERE / name / "definition.json"), json.dumps(launches)]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["WARPSMITH_COMPILE_ONLY"] = "sm_90"
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's warpsmith
    r = subprocess.run([sys.executable, "-c", COMPILE_ONLY, *args], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=900)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_a_scalar_value_is_part_of_the_signature(solved):
    _, results = solved
    main = results["rmsnorm_bf16"].solution["sources"][0]["content"]
    assert "('scalar', 'float', '1e-06')): 'shape_0.py'" in main and "('scalar', 'float', '1e-05')): 'shape_1.py'" in main


def test_workloads_and_set_choose_what_is_compiled_and_checked(tmp_path):
    out, rep = tmp_path / "sol.json", tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["solve", str(HERE / "softmax_2shapes"), "--workloads", "softmax-3x128",
                                 "--set", "n=64", "-o", str(out), "--json", str(rep)])
    assert r.exit_code == 0, r.output
    assert "1 input signature(s) compiled, for 1 of 2 workload(s)" in r.output and "x float32[3, 64]" in r.output
    assert "not compiled" in r.output and "softmax-4x33" in r.output
    doc = json.loads(rep.read_text())
    assert doc["workloads"] == {"compiled": ["softmax-3x128"], "not_compiled": ["softmax-4x33"]}
    assert doc["check"]["accepted"] is True and doc["check"]["report"]["coverage"]["workloads_checked"] == 1
    assert [p["signature"] for p in doc["programs"]] == ["x float32[3, 64]"]
    assert [s["path"] for s in json.loads(out.read_text())["sources"]] == ["main.py", "shape_0.py"]


def test_strict_refuses_fallbacks_and_writes_nothing(tmp_path):
    out, rep = tmp_path / "sol.json", tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["solve", str(HERE / "median_fallback"), "-o", str(out), "--json", str(rep),
                                 "--strict"])
    assert r.exit_code == 1, r.output
    assert "aten.median.dim" in r.output and not out.exists()
    doc = json.loads(rep.read_text())
    assert doc["status"] == "refused" and [f["op"] for f in doc["programs"][0]["fallbacks"]] == ["aten.median.dim"]
    assert "line 5: return torch.median" in doc["programs"][0]["fallbacks"][0]["line"]


def test_a_rejected_solution_is_never_written(tmp_path, monkeypatch):
    from warpsmith.compiler import emit as emit_mod

    real = emit_mod.generate

    def wrong(*a, **k):  # a planted codegen bug: silu(a) * b is 1% too large
        kern = real(*a, **k)
        assert "(v_silu * in1)" in kern.source
        kern.source = kern.source.replace("(v_silu * in1)", "(v_silu * in1 * 1.01)")
        return kern

    monkeypatch.setattr(emit_mod, "generate", wrong)
    out = tmp_path / "sol.json"
    out.write_text("precious")  # a file already there is left as it was
    res = solve_definition(HERE / "silu_and_mul", out, candidates=1)  # the greedy program only: it has the bug
    assert res.status == "rejected" and res.verdict["reason"] == "wrong_result", res.verdict
    assert out.read_text() == "precious" and res.written is None
    assert [a["reason"] for a in res.attempts] == ["wrong_result"]


WRONG_RUN = """
_ws_run = run


def run(*args):
    return tuple(t * 1.0625 for t in _ws_run(*args))  # planted: 6% off
"""


def test_a_rejected_solution_gives_way_to_the_next_partition(tmp_path, monkeypatch):
    from warpsmith.compiler import solexec

    real, seen = solexec.compile_signature, []

    def planted(problem, sig, args, partitioner=None, target="h100", choice=0, rewrites_on=True):
        out = real(problem, sig, args, partitioner, target, choice, rewrites_on)
        seen.append(choice)
        if choice == 0:
            out.program.text += WRONG_RUN
        return out

    monkeypatch.setattr(solexec, "compile_signature", planted)
    out = tmp_path / "sol.json"
    res = solve_definition(HERE / "silu_and_mul", out, prove=False)
    assert res.status == "accepted", res.verdict
    [a] = res.attempts
    assert a["choice"] == 0 and a["reason"] == "wrong_result" and not a["rewrites"]
    assert 1 in seen and "planted" not in out.read_text()
    assert res.to_json()["rejected_candidates"] == res.attempts


def test_the_flashinfer_bench_schema_names_spec_language(solved, tmp_path):
    from warpsmith.check import load_candidate, load_problem

    _, results = solved
    res = results["softmax_2shapes"]
    d = json.loads((HERE / "softmax_2shapes" / "definition.json").read_text())
    doc = solution(d, res.signatures, "flashinfer-bench")
    assert doc["spec"]["language"] == "triton" and "languages" not in doc["spec"]
    assert doc["sources"] == res.solution["sources"]
    p = tmp_path / "solution.json"
    p.write_text(json.dumps(doc))
    cand = load_candidate(p, load_problem(HERE / "softmax_2shapes"))  # the check's loader takes it
    try:
        assert cand.destination_passing is False
    finally:
        cand.cleanup()


REF = "import torch\n\n\ndef run(x):\n    return x * 2\n"
GOOD = {"name": "double", "axes": {"m": {"type": "var"}, "n": {"type": "const", "value": 4}},
        "inputs": {"x": {"shape": ["m", "n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["m", "n"], "dtype": "float32"}}, "reference": REF}
WORKLOAD = '{"uuid": "w0", "axes": {"m": 3}, "inputs": {"x": {"type": "random"}}}\n'


def _bad(kind):
    """(definition.json text, workload.jsonl text, what the message must name)."""
    d = json.loads(json.dumps(GOOD))
    if kind == "no_reference":
        del d["reference"]
        return json.dumps(d), WORKLOAD, "reference"
    if kind == "malformed_definition":
        return json.dumps(d)[:-5], WORKLOAD, "definition.json"
    if kind == "malformed_workload":
        return json.dumps(d), WORKLOAD + "{not json\n", "line 2"
    if kind == "unknown_axis_in_shape":
        d["inputs"]["x"]["shape"] = ["m", "k"]
        return json.dumps(d), WORKLOAD, "inputs.x.shape"
    if kind == "unknown_axis_in_workload":
        return json.dumps(d), '{"uuid": "w0", "axes": {"m": 3, "q": 2}, "inputs": {}}\n', "q"
    if kind == "random_scalar":
        d["inputs"]["s"] = {"shape": None, "dtype": "float32"}
        d["reference"] = "import torch\n\n\ndef run(x, s):\n    return x * s\n"
        return json.dumps(d), WORKLOAD, "scalar input s"
    if kind == "outputs_mismatch":
        d["reference"] = "import torch\n\n\ndef run(x):\n    return x * 2, x * 3\n"
        return json.dumps(d), WORKLOAD, "1 tensor output(s) (y)"
    if kind == "reference_raises":
        d["reference"] = "import torch\n\n\ndef run(x):\n    return x.nope()\n"
        return json.dumps(d), WORKLOAD, "nope"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["no_reference", "malformed_definition", "malformed_workload",
                                  "unknown_axis_in_shape", "unknown_axis_in_workload", "random_scalar",
                                  "outputs_mismatch", "reference_raises", "missing"])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, kind):
    folder = tmp_path / "problem"
    if kind != "missing":
        folder.mkdir()
        definition, workloads, named = _bad(kind)
        (folder / "definition.json").write_text(definition)
        (folder / "workload.jsonl").write_text(workloads)
    else:
        named = str(folder)
    out = tmp_path / "sol.json"
    r = CliRunner().invoke(cli, ["solve", str(folder), "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert "error:" in r.output and named in r.output, r.output
    assert str(folder) in r.output, r.output  # the message names the problem's file or folder
    assert not out.exists() and not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_options_of_one_format_are_refused_for_the_other(tmp_path):
    kb = Path(__file__).parent / "problems" / "softmax.py"
    r = CliRunner().invoke(cli, ["solve", str(kb), "--workloads", "0"])
    assert r.exit_code == 2 and "--workloads" in r.output
    r = CliRunner().invoke(cli, ["solve", str(tmp_path / "problem.txt")])
    assert r.exit_code == 2 and "definition.json" in r.output


def test_compile_definition_checks_nothing_and_writes_nothing(tmp_path):
    res = compile_definition(HERE / "softmax_2shapes", workloads=["0"])
    assert res.status == "unverified" and res.written is None and res.verdict == {}
    assert [s.workloads for s in res.signatures] == [["softmax-4x33"]]
    assert "def run(x):" in res.solution["sources"][0]["content"]
