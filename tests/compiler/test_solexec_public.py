"""SOL-ExecBench as its users write it (issue 29): what its public definitions do, reproduced by small
definitions of our own in ``definitions/`` (nothing of SOL-ExecBench is vendored here):

- ``nograd_softmax``, ``nograd_rmsnorm_assert``: the reference decorated ``@torch.no_grad()`` (20 of its
  21 definitions), GPU-sized const axes shrunk by a declared CPU cap, and a const the reference
  asserts (``assert hidden_size == 4096``) kept;
- ``triton_ref_scale_add``: a reference that launches its own Triton kernel (its ``triton_ref_vecadd``),
  run as given and judged on its outputs; ``--strict`` refuses it;
- ``item_constraint``: an axis tied to input data by a ``.item()`` constraint (its ``gqa_paged_decode``'s
  ``num_kv_indices == kv_indptr[-1].item()``), drawn inputs checked and redrawn.

``scripts/solve_sol_execbench.py`` runs the real public examples (fetched at run time).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.compiler.solexec import cap_here, solve_definition

HERE = Path(__file__).parent / "definitions"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    out = tmp_path_factory.mktemp("capped")
    return out, solve_definition(HERE / "nograd_softmax", out / "softmax.json", cpu_cap=16)


def test_a_no_grad_reference_is_captured_and_its_capped_workloads_accepted(capped):
    out, res = capped
    assert res.status == "accepted", res.verdict
    assert res.written == str(out / "softmax.json")
    # the const axis and the larger batch are capped; workloads and signatures say so
    assert res.cpu_cap["cap"] == 16 and res.cpu_cap["consts"] == {"hidden_size": [2048, 16]}
    assert res.cpu_cap["consts_kept"] is None
    assert res.cpu_cap["workloads"]["sm-b40"] == {"batch_size": [40, 16], "hidden_size": [2048, 16]}
    assert [s.text for s in res.signatures] == ["x float32[3, 16]", "x float32[16, 16]"]
    assert all(s.program.fallbacks == [] and s.program.library_calls for s in res.signatures)
    report = res.to_json()
    assert report["cpu_cap"] == res.cpu_cap
    assert "at the CPU cap 16" in report["check"]["coverage"], report["check"]["coverage"]
    assert report["check"]["report"]["problem"]["cpu_cap"]["consts"] == {"hidden_size": [2048, 16]}


def test_check_takes_the_same_cap_and_states_it(capped):
    out, _ = capped
    r = CliRunner().invoke(cli, ["check", str(HERE / "nograd_softmax"), str(out / "softmax.json"), "--cpu-cap", "16",
                                 "--workloads", "sm-b40"])
    assert r.exit_code in (0, 3), r.output
    assert "at the CPU cap 16" in r.output and "hidden_size 2048->16" in r.output, r.output


def test_a_const_the_reference_asserts_keeps_its_size(tmp_path):
    res = solve_definition(HERE / "nograd_rmsnorm_assert", tmp_path / "rms.json", cpu_cap=16)
    assert res.status == "accepted", res.verdict
    assert res.cpu_cap["consts"] == {} and "AssertionError" in res.cpu_cap["consts_kept"]
    assert res.cpu_cap["workloads"] == {"rms-b300": {"batch_size": [300, 16]}}
    assert [s.text for s in res.signatures] == ["hidden_states bfloat16[2, 96], weight bfloat16[96]",
                                                "hidden_states bfloat16[16, 96], weight bfloat16[96]"]


def test_the_cpu_cap_is_not_applied_on_a_gpu(monkeypatch):
    assert cap_here(16) == (None if torch.cuda.is_available() else 16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cap_here(16) is None and cap_here(None) is None


def test_a_triton_kernel_reference_runs_as_given_and_is_accepted(tmp_path):
    out, rep = tmp_path / "sol.json", tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["solve", str(HERE / "triton_ref_scale_add"), "-o", str(out), "--json", str(rep)])
    assert r.exit_code == 0, r.output
    assert "the reference as given" in r.output and "_scale_add_kernel" in r.output
    doc = json.loads(rep.read_text())
    assert doc["status"] == "accepted" and doc["reference_as_given"] == ["_scale_add_kernel"]
    assert doc["check"]["accepted"] is True
    program = json.loads(out.read_text())["sources"][1]["content"]
    assert "@triton.jit" in program and "def _scale_add_kernel" in program


def test_strict_refuses_a_triton_kernel_reference(tmp_path):
    out = tmp_path / "sol.json"
    r = CliRunner().invoke(cli, ["solve", str(HERE / "triton_ref_scale_add"), "-o", str(out), "--strict"])
    assert r.exit_code == 1, r.output
    assert "refused (--strict): the reference launches its own Triton kernel(s) (_scale_add_kernel)" in r.output
    assert not out.exists()


def test_an_item_constraint_is_satisfied_by_every_draw_and_solved(tmp_path):
    from warpsmith.check import load_problem

    problem = load_problem(HERE / "item_constraint")
    assert problem.info["data_constraints"] == ["num_kv_indices == kv_indptr[-1].item()"]
    [w] = problem.workloads
    for i in range(30):  # a draw of ints in [0, 8) meets it one time in 8: the others are redrawn
        indptr, x = problem.draw_inputs(w, torch.Generator().manual_seed(i), problem.distributions[i % 9],
                                        torch.device("cpu"))
        assert int(indptr[-1]) == 5 and x.shape == (5,)
    res = solve_definition(HERE / "item_constraint", tmp_path / "sol.json")
    assert res.status == "accepted", res.verdict


def _variant(tmp_path: Path, constraint: str) -> Path:
    folder = tmp_path / "problem"
    shutil.copytree(HERE / "item_constraint", folder)
    d = json.loads((folder / "definition.json").read_text())
    d["constraints"] = [constraint]
    (folder / "definition.json").write_text(json.dumps(d))
    return folder


@pytest.mark.parametrize("constraint, named", [
    ("num_kv_indices == kv_indptr[-1].item() + 100", "false on every draw"),  # unsatisfiable by these draws
    ("num_kv_indices == kv_indptr.nope()", "AttributeError"),  # does not evaluate
])
def test_a_data_constraint_no_draw_meets_exits_2(tmp_path, constraint, named):
    folder, out = _variant(tmp_path, constraint), tmp_path / "sol.json"
    r = CliRunner().invoke(cli, ["solve", str(folder), "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert "error:" in r.output and constraint in r.output and named in r.output, r.output
    assert not out.exists()


def test_the_script_runs_every_example_and_prints_the_table(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(HERE / "triton_ref_scale_add", repo / "examples" / "triton" / "scale_add")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "solve_sol_execbench.py"), "--repo", str(repo),
                        "--cpu-cap", "16", "--timeout", "600", "--json", str(tmp_path / "rows.json")],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "1 of 1 examples accepted" in r.stdout
    [row] = json.loads((tmp_path / "rows.json").read_text())
    assert row["example"] == "triton/scale_add" and row["captured"] and row["solved"] and row["accepted"]
    assert row["as_given"] == ["_scale_add_kernel"]
