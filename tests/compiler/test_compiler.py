"""The compiler's first slice end to end: each problem in ``problems/`` is captured, lowered,
fused, emitted as a self-contained ModelNew and verified by ``warpsmith.check``; the emitted file
imports only torch, triton and the standard library, and runs where warpsmith cannot be imported.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.compiler import compile_problem, solve

HERE = Path(__file__).parent / "problems"

# problem -> (generated kernels, library ops, ATen fallbacks)
EXPECTED = {
    "linear_relu": (0, ["matmul"], []),
    "swish_chain": (1, [], []),
    "softmax": (0, ["softmax"], []),
    "rmsnorm_written": (0, ["rms_norm"], []),
    "rowsum_norm": (1, [], []),
    "with_fallback": (2, [], ["median"]),
    "half_gelu_logsumexp": (1, ["matmul"], []),
    "bf16_standardize": (1, [], []),  # the sigmoid of the (24,) gate recomputed in the row kernel (search: recompute)
    "colnorm": (2, [], []),  # a row kernel over each axis, the normalization fused into the second
    "vector_rows": (1, [], []),
    "long_rows": (3, [], []),  # a row of 20000 walked in chunks; a sum over a size-1 dim is a copy
    # each block's `x + h * scale` is computed in its second GEMM's epilogue (compiler.gemm_epilogue)
    "mlp_blocks": (2, ["layer_norm", "matmul", "matmul", "layer_norm", "matmul", "matmul", "matmul", "softmax"], []),
}


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    out = tmp_path_factory.mktemp("solved")
    results = {}
    for name in EXPECTED:
        results[name] = solve(HERE / f"{name}.py", out / f"{name}_new.py")
    return out, results


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_problem_is_verified_and_written(solved, name):
    out, results = solved
    res = results[name]
    assert res.status == "accepted", res.verdict
    assert res.written == str(out / f"{name}_new.py") and Path(res.written).exists()
    kernels, library, fallbacks = EXPECTED[name]
    p = res.program
    assert len(p.kernels) == kernels
    assert [n.op for n in p.library_calls] == library
    assert [n.op for n in p.fallbacks] == fallbacks
    doc = res.to_json()
    assert doc["check"]["accepted"] is True and len(doc["kernels"]) == kernels


def _imports(path: Path) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            tops.add((node.module or "").split(".")[0])
    return tops


def test_emitted_files_import_only_torch_triton_and_the_standard_library(solved):
    out, _ = solved
    for name in EXPECTED:
        tops = _imports(out / f"{name}_new.py")
        assert tops <= {"torch", "triton"} | set(sys.stdlib_module_names), (name, tops)


BLOCKED_RUN = r'''
import importlib.abc, importlib.util, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "warpsmith" or name.startswith("warpsmith."):
            raise ImportError("warpsmith is blocked in this test")
sys.meta_path.insert(0, Block())
import torch
for path, ref in zip(sys.argv[1::2], sys.argv[2::2]):
    def load(p, n):
        s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s)
        s.loader.exec_module(m); return m
    new, old = load(path, "new"), load(ref, "old")
    torch.manual_seed(0); init = old.get_init_inputs()
    torch.manual_seed(0); a = old.Model(*init)
    torch.manual_seed(0); b = new.ModelNew(*init)
    assert [(k, v.shape) for k, v in a.state_dict().items()] == [(k, v.shape) for k, v in b.state_dict().items()]
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    xs = old.get_inputs()
    with torch.no_grad():
        ya, yb = a(*xs), b(*xs)
    err = (ya.float() - yb.float()).abs().max().item()
    assert err <= 1e-2 * max(1.0, ya.float().abs().max().item()), (path, err)
    assert "warpsmith" not in sys.modules
print("ok")
'''


def test_emitted_files_run_where_warpsmith_cannot_be_imported(solved, tmp_path):
    out, _ = solved
    args = []
    for name in ("linear_relu", "rowsum_norm", "rmsnorm_written", "with_fallback", "mlp_blocks"):
        args += [str(out / f"{name}_new.py"), str(HERE / f"{name}.py")]
    # -I: no PYTHONPATH, no user site, no script folder; the import hook refuses warpsmith even if
    # site-packages holds an editable install of it
    r = subprocess.run([sys.executable, "-I", "-c", BLOCKED_RUN, *args], capture_output=True, text=True,
                       cwd=tmp_path, env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"}, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_strict_refuses_fallbacks_and_writes_nothing(tmp_path):
    out, rep = tmp_path / "o.py", tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["solve", str(HERE / "with_fallback.py"), "-o", str(out), "--json", str(rep),
                                 "--strict"])
    assert r.exit_code == 1
    assert "aten.median.dim" in r.output
    assert not out.exists()
    doc = json.loads(rep.read_text())
    assert doc["status"] == "refused" and [f["op"] for f in doc["fallbacks"]] == ["aten.median.dim"]
    assert doc["fallbacks"][0]["line"].startswith("line 11: return torch.median")


def test_a_rejected_program_is_never_written(tmp_path, monkeypatch):
    from warpsmith.compiler import emit as emit_mod

    real = emit_mod.generate

    def wrong(*a, **k):  # a planted codegen bug: the constant 0.1 becomes 0.2
        kern = real(*a, **k)
        kern.source = kern.source.replace("+ 0.1)", "+ 0.2)")
        return kern

    monkeypatch.setattr(emit_mod, "generate", wrong)
    out = tmp_path / "o.py"
    res = solve(HERE / "rowsum_norm.py", out, candidates=1)  # the next candidates: test_next_candidate.py
    assert res.status == "rejected" and res.verdict["reason"] == "wrong_result"
    assert not out.exists() and res.written is None


BAD = {
    "syntax.py": "def broken(:\n",
    "raises.py": "import torch\nraise RuntimeError('boom at import')\n",
    "no_model.py": "import torch\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n",
    "bad_inputs.py": ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                      "def get_inputs():\n    return [torch.randn(-1)]\ndef get_init_inputs():\n    return []\n"),
    # a lifted tensor constant of differing values too large to write into the file (a small one is
    # kept as a buffer: test_constant_of_differing_values_is_a_non_persistent_buffer)
    "ramp_constant.py": ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                         "        return x + torch.tensor([float(i) for i in range(70000)])\n"
                         "def get_inputs():\n    return [torch.randn(2, 70000)]\ndef get_init_inputs():\n    return []\n"),
}

RAMP = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.tensor([1.0, 2.0, 3.0]) * torch.tensor([[2.0], [-1.5]])\n"
        "def get_inputs():\n    return [torch.randn(2, 3)]\ndef get_init_inputs():\n    return []\n")


def test_constant_of_differing_values_is_a_non_persistent_buffer(tmp_path):
    """torch.tensor([1.0, 2.0, 3.0]) built in forward: the written ModelNew keeps it as a
    non-persistent buffer holding its values (state_dict unchanged), and the check accepts it."""
    import torch

    (tmp_path / "ramp.py").write_text(RAMP)
    out = tmp_path / "out.py"
    r = CliRunner().invoke(cli, ["solve", str(tmp_path / "ramp.py"), "-o", str(out), "--no-prove"])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "torch.tensor([1.0, 2.0, 3.0], dtype=torch.float32)" in text and "persistent=False" in text
    ns: dict = {}
    exec(compile(text, str(out), "exec"), ns)  # noqa: S102 - the file just written
    new, ref = ns["ModelNew"](), ns["Model"]()
    assert list(new.state_dict()) == list(ref.state_dict()) == []
    x = torch.randn(2, 3)
    torch.testing.assert_close(new(x), ref(x), rtol=0, atol=0)



@pytest.mark.parametrize("name", list(BAD) + ["data_dependent.py", "missing.py"])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, name):
    if name in BAD:
        (tmp_path / name).write_text(BAD[name])
        path = tmp_path / name
    elif name == "missing.py":
        path = tmp_path / name
    else:
        path = HERE / name
    out = tmp_path / "out.py"
    r = CliRunner().invoke(cli, ["solve", str(path), "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert "error:" in r.output and not out.exists()
    if name == "data_dependent.py":
        assert "data-dependent" in r.output and "data_dependent.py:11" in r.output
    if name == "raises.py":
        assert "boom at import" in r.output
    if name == "no_model.py":
        assert "no Model" in r.output
    if name == "ramp_constant.py":
        assert "shape (70000,) with differing elements" in r.output and "as a buffer" in r.output


@pytest.mark.parametrize("spelling", [
    "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight",
    "self.weight * (x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5))",
    "x / torch.sqrt(torch.square(x).mean(-1, keepdim=True) + 1e-5) * self.weight",
])
def test_rmsnorm_spellings_lower_to_the_library(tmp_path, spelling):
    src = (HERE / "rmsnorm_written.py").read_text().replace(
        "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight", spelling)
    p = tmp_path / "rms.py"
    p.write_text(src)
    g, notes, prog = compile_problem(p)
    assert [n.op for n in prog.library_calls] == ["rms_norm"], g.format()
    assert not prog.kernels and not prog.fallbacks


def test_matmul_spellings_and_epilogues(tmp_path):
    src = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 8))
        self.b = nn.Parameter(torch.randn(8))
    def forward(self, x, y):
        a = F.silu(torch.addmm(self.b, x, self.w))
        c = F.gelu(x @ self.w)
        return a + c, torch.bmm(y, y.transpose(1, 2))
def get_inputs():
    return [torch.randn(4, 16), torch.randn(2, 3, 5)]
def get_init_inputs():
    return []
'''
    p = tmp_path / "mm.py"
    p.write_text(src)
    g, notes, prog = compile_problem(p)
    assert sorted(n.attrs["activation"] for n in prog.library_calls) == ["gelu", "none", "silu"]
    assert len(prog.kernels) == 0 and not prog.fallbacks  # a + c: in the addmm's epilogue (compiler.gemm_epilogue)
    [fused] = [n for n in prog.library_calls if n.attrs.get("epilogue")]
    assert fused.attrs["activation"] == "silu" and [s["op"] for s in fused.attrs["epilogue"]] == ["add"]


def test_explain_prints_the_ir_and_the_kernels(tmp_path):
    res = solve(HERE / "swish_chain.py", None, verify=False)
    text = res.explain()
    assert "pointwise sigmoid(%x)" in text and "_ws_fused_0: pointwise over [3, 5, 7]" in text
    assert "def _ws_fused_0(" in text and "tl.sigmoid(in0)" in text


def test_fusion_merges_siblings_and_row_shaped_producers():
    g, notes, prog = compile_problem(HERE / "bf16_standardize.py")
    rows = [k for k in prog.kernels if k.group.kind == "rows"]
    assert len(rows) == 1
    # var is written as mean, squared deviations, sum, divide (expand.py): all in the one row kernel
    ops = {n.op for n in rows[0].group.nodes}
    # x / sqrt(v) may be x * rsqrt(v) (compiler.precision's approximate rewrite, declared)
    assert ops >= {"mean", "sub", "sum", "div", "amin"} and ops & {"sqrt", "rsqrt"}
    assert [n.name for n in rows[0].outputs] == ["mul", "amin"]


COMPILE_ONLY = r'''
import importlib.util, sys
import torch
import warpsmith.core._triton as wt  # makes the compile-only driver active (WARPSMITH_COMPILE_ONLY)
from warpsmith.targets.compiler import recording
assert wt.COMPILE_ONLY_ARCH == "sm_90"
for path, ref, launches in zip(sys.argv[1::3], sys.argv[2::3], sys.argv[3::3]):
    def load(p, n):
        s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s)
        s.loader.exec_module(m); return m
    new, old = load(path, "new"), load(ref, "old")
    assert new._EMULATE is False
    model = new.ModelNew(*old.get_init_inputs())
    with recording() as rec, torch.no_grad():
        model(*old.get_inputs())
    assert len(rec) == int(launches), (path, len(rec))
print("ok")
'''


def test_emitted_kernels_compile_for_a_real_gpu_target(solved, tmp_path):
    """Triton's real front end, LLVM and ptxas compile every launch of the emitted programs for
    sm_90 (no GPU needed; nothing runs): the interpreter alone would not catch what only the GPU
    compiler rejects."""
    out, results = solved
    args = []
    for name in EXPECTED:
        p = results[name].program
        args += [str(out / f"{name}_new.py"), str(HERE / f"{name}.py"), str(len(p.kernels) + len(p.library_calls))]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["WARPSMITH_COMPILE_ONLY"] = "sm_90"
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's warpsmith
    r = subprocess.run([sys.executable, "-c", COMPILE_ONLY, *args], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=900)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_lowering_notes_for_a_level_2_style_model():
    g, notes, prog = compile_problem(HERE / "mlp_blocks.py")
    text = "\n".join(notes)
    assert "dropout with p=0.0, train=True is the identity" in text
    mean = next(k for k in prog.kernels if any(n.op == "mean" for n in k.group.nodes))
    assert mean.group.kind == "rows" and mean.group.red == (1,)  # a reduction over a non-last dim, read in place
    assert "matmul of a 3-D and a 2-D operand -> library matmul" in text
    assert sum("fused into" in line and "epilogue" in line for line in notes) == 2  # both GELUs
    assert not prog.fallbacks


def test_a_python_scalar_input_is_guarded(solved):
    out, _ = solved
    text = (out / "vector_rows_new.py").read_text()
    assert "if v_k != 3:" in text and "specialized to input shapes [(37,), None]" in text


def test_the_partition_interface_takes_another_partitioner(tmp_path):
    from warpsmith.compiler.fuse import Group, Partition, partition, problems, unfused

    res = solve(HERE / "rowsum_norm.py", tmp_path / "o.py", partitioner=unfused)
    assert res.status == "accepted" and len(res.program.kernels) == 7  # one kernel per op
    g, _, _ = compile_problem(HERE / "rowsum_norm.py")
    assert problems(g, partition(g)) == [] and problems(g, unfused(g)) == []
    by = {n.name: n for n in g.nodes}
    # a reduction in a pointwise group, and a node in two groups, are refused
    bad = Partition([Group("pointwise", (7, 33), [by["add"], by["sum_1"]]), Group("pointwise", (7, 33), [by["add"]])])
    found = problems(g, bad)
    assert "add is in more than one group" in found and any("cannot run as one kernel" in f for f in found)
    with pytest.raises(ValueError, match="unusable partition"):
        compile_problem(HERE / "rowsum_norm.py", partitioner=lambda graph: bad)


def test_set_rewrites_sizes_for_both_the_compile_and_the_check(tmp_path):
    out, rep = tmp_path / "o.py", tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["solve", str(HERE / "mlp_blocks.py"), "--set", "d=16", "--set", "batch_size=2",
                                 "-o", str(out), "--json", str(rep)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "\nd = 16\n" in text and "specialized to input shapes [(2, 6, 16)]" in text
    assert json.loads(rep.read_text())["check"]["accepted"] is True
    r = CliRunner().invoke(cli, ["solve", str(HERE / "mlp_blocks.py"), "--set", "nope=3", "-o", str(out)])
    assert r.exit_code == 2 and "nope" in r.output


@pytest.mark.whole_check_protocol  # the other compiler tests run the check without its endurance phase
def test_solve_judges_its_program_with_the_checks_whole_protocol(tmp_path):
    from warpsmith.check import hardened

    res = solve(HERE / "swish_chain.py", tmp_path / "swish_chain_new.py")
    assert res.status == "accepted", res.verdict
    protocol = res.verdict["report"]["protocol"]
    assert protocol["endurance"]["drawn"] >= 1 and protocol["endurance"]["made"] >= 1, protocol
    assert hardened.check.__kwdefaults__["settle_s"] == hardened.SETTLE_S
