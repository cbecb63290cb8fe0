"""Pointwise chains fused into a GEMM's epilogue (compiler.gemm_epilogue): the chain runs on the GEMM's
fp32 accumulator tile, the GEMM's output is never written, the result is rounded once; the rewrite is
chosen by the predicted time and the program verified by the check, with the program as written as
the last candidate when the fused one fails."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpsmith.compiler import gemm_epilogue as GE
from warpsmith.compiler import solve
from warpsmith.compiler.solve import compile_problem

PROBLEMS = Path(__file__).parent / "problems"


def _epilogue_calls(prog):
    return [n for n in prog.library_calls if n.op == "matmul" and n.attrs.get("epilogue")]


def _forward(text: str) -> str:
    return text[text.index("class ModelNew"):]


def test_a_linear_chain_is_fused_into_one_kernel_solved_and_accepted(tmp_path):
    out = tmp_path / "chain_new.py"
    res = solve(PROBLEMS / "gemm_epilogue_chain.py", out, candidates=1)
    assert res.status == "accepted", res.verdict
    prog = res.program
    assert prog.kernels == [] and not prog.fallbacks  # no separate pointwise kernel
    [mm] = prog.library_calls
    assert [s["op"] for s in mm.attrs["epilogue"]] == ["mul", "sigmoid", "add", "clamp"]
    assert [o["mode"] for o in mm.attrs["operands"]] == ["col"]  # the shift, read once per tile column
    [rec] = [r for r in prog.search.rewrites if r["rewrite"] == "gemm_epilogue"]
    assert rec["taken"] and rec["after_ms"] < rec["before_ms"]
    assert any("computed in the GEMM's epilogue" in n for n in res.notes)
    text = out.read_text()
    fwd = _forward(text)
    # one launch computes the result: no plain matmul call, no generated kernel, nothing in between
    assert fwd.count("_ws_gemm_epilogue(") == 1 and "_ws_matmul" not in fwd and "_launch(" not in fwd
    assert f"def {GE.kernel_name(mm)}(" in text and "tl.sigmoid(" in text


def test_per_row_full_and_per_column_operands_are_read_at_the_tiles_offsets(tmp_path):
    res = solve(PROBLEMS / "gemm_epilogue_operands.py", tmp_path / "ops_new.py", candidates=1)
    assert res.status == "accepted", res.verdict
    prog = res.program
    assert prog.kernels == [] and not prog.fallbacks
    [mm] = prog.library_calls
    assert [s["op"] for s in mm.attrs["epilogue"]] == ["mul", "tanh", "mul", "add", "leaky_relu", "mul"]  # "/ c" became "* (1 / c)" (algebra)
    assert [(o["node"], o["mode"]) for o in mm.attrs["operands"]] == [("r", "row"), ("p_scale", "col"), ("f", "full")]


def test_fp16_inputs_are_within_the_error_contract(tmp_path):
    res = solve(PROBLEMS / "gemm_epilogue_half.py", tmp_path / "half_new.py", candidates=1)
    assert res.status == "accepted", res.verdict
    [mm] = res.program.library_calls
    assert [s["op"] for s in mm.attrs["epilogue"]] == ["hardswish", "mul", "add", "gelu"]
    assert mm.attrs["epilogue"][-1]["attrs"].get("approximate") == "tanh"
    assert res.program.kernels == []


def test_an_unsound_epilogue_is_rejected_and_the_program_as_written_is_solved(monkeypatch, tmp_path):
    """Plant a wrong epilogue (the per-column vector indexed by the tile's row): the check rejects the
    fused program, and the last candidate, the program as written (unfused), is accepted and written."""
    monkeypatch.setitem(GE.INDEX, "col", ("rm", "M"))
    out = tmp_path / "chain_new.py"
    res = solve(PROBLEMS / "gemm_epilogue_chain.py", out, candidates=2)
    assert res.status == "accepted", res.verdict
    [bad] = res.attempts
    assert bad["rewrites"] and bad["reason"] == "wrong_result", bad
    assert not res.program.search.rewrites  # the accepted program is the one as written
    assert not _epilogue_calls(res.program) and len(res.program.kernels) == 1  # GEMM, then the chain's kernel
    assert "_ws_gemm_epi_" not in out.read_text()


def test_what_does_not_fuse(tmp_path):
    """An intermediate used elsewhere cuts the chain before it; a reduction over the features stays a
    row kernel after the fused chain; a value computed from the GEMM outside the chain is no operand."""
    src = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 12)
        self.b = nn.Linear(16, 12)

    def forward(self, x):
        y = torch.sigmoid(self.a(x) * 2.0)       # y is also returned: the chain ends at y
        z = self.b(x)
        w = z * z.sum(-1, keepdim=True)            # the sum reads z: nothing fuses into b
        return y, y - 1.0, (y * 3.0).sum(-1), w
def get_inputs():
    return [torch.randn(8, 16)]
def get_init_inputs():
    return []
'''
    p = tmp_path / "cut.py"
    p.write_text(src)
    _, _, prog = compile_problem(p)
    [fused] = _epilogue_calls(prog)
    assert [s["op"] for s in fused.attrs["epilogue"]] == ["mul", "sigmoid"] and fused.name == "sigmoid"
    plain = [n for n in prog.library_calls if not n.attrs.get("epilogue")]
    assert len(plain) == 1 and plain[0].shape == (8, 12)
    # as written: no rewrite, the plain GEMMs
    _, _, asis = compile_problem(p, rewrites_on=False)
    assert not _epilogue_calls(asis) and not asis.search.rewrites


COMPILE_ONLY = r'''
import importlib.util, sys
import torch
import warpsmith.core._triton as wt  # makes the compile-only driver active (WARPSMITH_COMPILE_ONLY)
from warpsmith.targets.compiler import recording
assert wt.COMPILE_ONLY_ARCH == "sm_90"
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m); return m
new, old = load(sys.argv[1], "new"), load(sys.argv[2], "old")
assert new._EMULATE is False
with recording() as rec, torch.no_grad():
    new.ModelNew(*old.get_init_inputs())(*old.get_inputs())
print(len(rec), "ok")
'''


def test_the_fused_kernel_compiles_for_sm_90(tmp_path):
    """Triton's real front end, LLVM and ptxas compile the emitted GEMM-with-epilogue for sm_90 (nothing runs)."""
    out = tmp_path / "ops_new.py"
    res = solve(PROBLEMS / "gemm_epilogue_operands.py", out, candidates=1, verify=False, prove=False)
    assert _epilogue_calls(res.program)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["WARPSMITH_COMPILE_ONLY"] = "sm_90"
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    r = subprocess.run([sys.executable, "-c", COMPILE_ONLY, str(out), str(PROBLEMS / "gemm_epilogue_operands.py")],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "1 ok", r.stderr[-3000:]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-n", "0", "-q"]))
