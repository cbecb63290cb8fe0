"""Emitted files compose: every library kernel and helper the compiler can emit, copied into one
file beside a generated kernel and a problem source that binds the library's own names, keeps each
global name once and runs every launcher right (issue 29: LeNet5's conv called the matmul module's
``store_tile``, the conv module's helper of the same name being overwritten in the emitted file).

The end-to-end shape of that bug is ``problems/lenet_small.py``: conv, pool, conv, pool and three
linear layers, solved and accepted by ``warpsmith check``.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from warpsmith.compiler import emit, library, names, solve
from warpsmith.compiler.codegen_expr import HELPERS

HERE = Path(__file__).parent / "problems"

# a problem's source that binds names the copied library text defines or uses
PROBLEM = '''
import math as tl_helpers
store_tile = "the problem's store_tile"
FLT_MAX = 1.0
to_output = None
language = "the problem's language"


def conv_fwd_kernel():
    return "the problem's conv_fwd_kernel"
'''

GENERATED_SOURCE = '''@triton.jit
def _ws_fused_0(in0_ptr, out0_ptr, NUMEL, BLOCK: tl.constexpr, EMULATE: tl.constexpr):
    """every codegen helper and the library's to_output, as generated kernels call them"""
    offs = tl.arange(0, BLOCK)
    x = tl.load(in0_ptr + offs).to(tl.float32)
    y = _ws_log1p(x) + _ws_expm1(x) + _ws_tanh(x) + _ws_trunc(3.0 * x) + _ws_round(3.0 * x)
    y = y + tl.where(_ws_signbit(x), 1.0, 0.0) + tl.reduce(x + 1.0, 0, _ws_mul)
    tl.store(out0_ptr + offs, to_output(y, out0_ptr, EMULATE))
'''

GENERATED_LAUNCHER = '''def _ws_fused_0_launch(dev, a0):
    out0 = torch.empty(a0.shape, dtype=a0.dtype, device=dev)
    _ws_fused_0[(1,)](a0, out0, a0.numel(), BLOCK=a0.numel(), EMULATE=_EMULATE)
    return out0,
'''


@dataclass
class _Generated:  # what kernel_code reads of a generated kernel (codegen.Kernel)
    name: str
    source: str
    launcher: str


def _epilogue_node():
    """A library GEMM (linear + bias, relu) whose epilogue (compiler.gemm_epilogue) reads a per-row and a
    full operand: tanh(relu(x W^T + b) * 2) * r + f, fused by the rewrite's own functions."""
    from warpsmith.compiler import gemm_epilogue
    from warpsmith.compiler.ir import Graph, Node

    f32 = torch.float32
    x, r, f = (Node(n, "input", n, [], s, f32) for n, s in (("x", (5, 7)), ("r", (5, 1)), ("f", (5, 6))))
    w, b = Node("w", "param", "w", [], (6, 7), f32), Node("b", "param", "b", [], (6,), f32)
    mm = Node("mm", "library", "matmul", [x, w, b], (5, 6), f32, {"form": "linear", "activation": "relu"})
    s = Node("s", "pointwise", "mul", [mm, 2.0], (5, 6), f32)
    t = Node("t", "pointwise", "tanh", [s], (5, 6), f32)
    u = Node("u", "pointwise", "mul", [t, r], (5, 6), f32)
    v = Node("epi", "pointwise", "add", [u, f], (5, 6), f32)
    g = Graph([x, r, f, w, b, mm, s, t, u, v], [v], [x, r, f], {})
    nodes, sink = gemm_epilogue.chain(g, mm)
    return gemm_epilogue.fuse_one(g, mm, nodes, sink)


def _every_row():
    """Every kernel and launcher of library.LAUNCHERS, each once, and a GEMM's generated epilogue kernel."""
    jit, launchers = [], []
    for op in library.LAUNCHERS:
        text, refs = library.LAUNCHERS[op]
        kernels = [library.kernel(r) for r in refs]
        jit += [k for k in kernels if k not in jit]
        if text not in [t for t, _ in launchers]:
            launchers.append((text, kernels))
    epi = _epilogue_node()
    launchers += [(text, library.needs(epi)[0]) for text in library.generated(epi)]
    return jit, launchers


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """One file with every library kernel, helper, constant, import and launcher, the codegen helpers,
    a generated kernel and the runtime, after a problem source binding the library's names; imported."""
    jit, launchers = _every_row()
    gen = _Generated("_ws_fused_0", GENERATED_SOURCE, GENERATED_LAUNCHER)
    code = emit.kernel_code(jit, launchers, [gen], names.bound_names(PROBLEM))
    text = "\n".join(emit._IMPORTS) + "\n" + PROBLEM + "\n\n" + code + emit.RUNTIME
    path = tmp_path_factory.mktemp("compose") / "composed.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("_ws_composed_test", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # inspect.getsource finds the kernels' text through the module
    spec.loader.exec_module(mod)
    yield text, mod, jit
    sys.modules.pop(spec.name, None)


def test_every_global_is_bound_once_and_the_problem_keeps_its_names(composed):
    text, mod, jit = composed
    tree = ast.parse(text)
    bound = Counter()
    for stmt in tree.body:
        bound.update(names.defined(ast.unparse(stmt)))
    twice = {n: c for n, c in bound.items() if c > 1}
    # the problem's own imports repeat the file's (torch, nn) and nothing else may
    assert set(twice) <= {"torch", "nn"}, twice
    assert mod.store_tile == "the problem's store_tile" and mod.FLT_MAX == 1.0 and mod.to_output is None
    assert mod.conv_fwd_kernel() == "the problem's conv_fwd_kernel" and mod.language == "the problem's language"
    # both store_tile helpers are there, under two names, and every copied function is defined
    defs = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    tiles = [d for d in defs if d.name.startswith("store_tile")]
    assert len(tiles) == 2 and len({ast.unparse(d.args) for d in tiles}) == 2
    assert {d.name for d in defs} >= {f"{k.fn.__name__}_1" for k in jit if k.fn.__name__ == "conv_fwd_kernel"}
    assert "FLT_MAX_1 = tl.constexpr(" in text and "def to_output_1(" in text and "to_output_1(y, out0_ptr, EMULATE)" in text


def _close(a, b, tol=2e-4):
    assert a.shape == b.shape, (a.shape, b.shape)
    err = (a.float() - b.float()).abs().max().item()
    assert err <= tol * max(1.0, b.float().abs().max().item()), err


def _gelu(x):
    return F.gelu(x)


def _matmul(m):
    a, b, bias = torch.randn(5, 7), torch.randn(7, 6), torch.randn(6)
    _close(m._ws_matmul(a, b, bias, "relu"), torch.relu(a @ b + bias))
    a3, b3 = torch.randn(2, 5, 7), torch.randn(2, 7, 6)
    _close(m._ws_matmul(a3, b3, None, "none"), a3 @ b3)
    x, w = torch.randn(2, 3, 7), torch.randn(6, 7)
    _close(m._ws_linear(x, w, bias, "gelu"), _gelu(F.linear(x, w, bias)))
    _close(m._ws_matmul_nd(x, b, None, "silu"), F.silu(x @ b))


def _conv(m):
    x, w, bias = torch.randn(1, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(4)
    _close(m._ws_conv(x, w, bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, "relu"),
           torch.relu(F.conv2d(x, w, bias, padding=1)))
    xd, wd = torch.randn(1, 4, 6, 6), torch.randn(4, 1, 3, 3)  # depthwise: the direct kernel
    _close(m._ws_conv(xd, wd, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 4, "none"),
           F.conv2d(xd, wd, stride=2, padding=1, groups=4))
    xt, wt = torch.randn(1, 3, 4, 4), torch.randn(3, 2, 3, 3)  # transposed
    _close(m._ws_conv(xt, wt, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1, "none"),
           F.conv_transpose2d(xt, wt, stride=2, padding=1, output_padding=1))
    x1, w1 = torch.randn(2, 3, 9), torch.randn(4, 3, 3)  # 1-D
    _close(m._ws_conv(x1, w1, None, [1], [0], [2], False, [0], 1, "none"), F.conv1d(x1, w1, dilation=2))


def _pool(m):
    x = torch.randn(1, 2, 7, 7)
    _close(m._ws_pool(x, 2, [2, 2], [2, 2], [0, 0], [1, 1], False, True, True, 0), F.max_pool2d(x, 2, 2))
    _close(m._ws_pool(x, 2, [3, 3], [2, 2], [1, 1], [1, 1], True, False, False, 0),
           F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False))


def _attention(m):
    q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    _close(m._ws_attention(q, k, v, True, None), F.scaled_dot_product_attention(q, k, v, is_causal=True))
    q4, k2, v2 = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 8)  # GQA
    ref = F.scaled_dot_product_attention(q4, k2.repeat_interleave(2, 1), v2.repeat_interleave(2, 1), scale=0.3)
    _close(m._ws_attention(q4, k2, v2, False, 0.3), ref)
    bias = torch.randn(1, 1, 5, 5)  # an additive mask, then a sliding window as the kernel's band
    _close(m._ws_attention(q, k, v, False, None, bias), F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    i = torch.arange(5)
    band = (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - 1)
    _close(m._ws_attention(q, k, v, False, None, None, (1, 0)), F.scaled_dot_product_attention(q, k, v, attn_mask=band))


def _cross_entropy(m):
    x, t = torch.randn(5, 7), torch.tensor([0, 6, -100, 3, 2])
    for red, name in ((0, "none"), (1, "mean"), (2, "sum")):
        _close(m._ws_cross_entropy(x, t, red, -100, 0.0), F.cross_entropy(x, t, reduction=name))
    _close(m._ws_cross_entropy(x, t, 1, -100, 0.1), F.cross_entropy(x, t, label_smoothing=0.1))


def _softmax(m):
    for x in (torch.randn(3, 10), torch.randn(1, library.MAX_WHOLE_ROW + 8)):  # whole rows, then looped
        _close(m._ws_softmax(x, False), torch.softmax(x, -1))
        _close(m._ws_softmax(x, True), torch.log_softmax(x, -1))


def _norm(m):
    for n in (10, library.MAX_WHOLE_ROW + 8):  # whole rows, then looped
        x, w, b = torch.randn(2, n), torch.randn(n), torch.randn(n)
        _close(m._ws_norm(x, w, b, 1e-5, False), F.layer_norm(x, (n,), w, b, 1e-5))
        _close(m._ws_norm(x, w, None, 1e-6, True), F.rms_norm(x, (n,), w, 1e-6))


def _gather(m):
    x, rows = torch.randn(7, 5), torch.tensor([[6, 0], [3, 3]])
    _close(m._ws_gather(x, rows, 0, True, False, "embedding", "idx"), x[rows], 0.0)  # exact
    idx = torch.randint(0, 5, (7, 3))
    _close(m._ws_gather(x, idx, 1, False, False, "gather", "idx"), torch.gather(x, 1, idx), 0.0)


def _topk(m):
    x = torch.randn(3, 37)
    vals, idx = m._ws_topk(x, 4, True)
    ref = torch.topk(x, 4)
    _close(vals, ref.values, 0.0)
    _close(idx, ref.indices, 0.0)  # no ties in a random draw


def _scatter(m):
    src, idx = torch.randn(6, 5), torch.tensor([2, 0, 2, 3, 0, 1])
    ref = torch.zeros(4, 5).index_add_(0, idx, src)
    _close(m._ws_scatter(None, idx, src, 0, True, True, None, 4, None, (4, 5), torch.float32, "index_add", "idx"), ref)


def _gemm_epilogue(m):
    x, w, b, r, f = torch.randn(5, 7), torch.randn(6, 7), torch.randn(6), torch.rand(5, 1), torch.randn(5, 6)
    y = m._ws_gemm_epilogue(m._ws_gemm_epi_epi, "linear", x, w, b, [r, f], (5, 6), torch.float32)
    _close(y, torch.tanh(torch.relu(F.linear(x, w, b)) * 2.0) * r + f)


# one case per row of library.LAUNCHERS: a new library op fails here until it has its case
CASES = {"matmul": _matmul, "conv": _conv, "pool": _pool, "attention": _attention,
         "cross_entropy": _cross_entropy, "softmax": _softmax, "rms_norm": _norm, "layer_norm": _norm,
         "gather": _gather, "scatter": _scatter, "topk": _topk, "gemm_epilogue": _gemm_epilogue}


def test_every_library_op_has_a_case():
    assert set(CASES) == set(library.LAUNCHERS)


@pytest.mark.parametrize("op", sorted(CASES))
def test_each_launcher_runs_right_in_the_composed_file(composed, op):
    torch.manual_seed(0)
    CASES[op](composed[1])


COMPILE_ONLY = r'''
import importlib.util, sys
import torch
import warpsmith.core._triton as wt  # makes the compile-only driver active (WARPSMITH_COMPILE_ONLY)
from warpsmith.targets.compiler import recording
assert wt.COMPILE_ONLY_ARCH == "sm_90"
sys.path.insert(0, sys.argv[2])
import test_emit_compose as T
s = importlib.util.spec_from_file_location("composed", sys.argv[1]); m = importlib.util.module_from_spec(s)
sys.modules["composed"] = m; s.loader.exec_module(m)
assert m._EMULATE is False
T._close = lambda *a, **k: None  # nothing runs: the launches are compiled only
with recording() as rec, torch.no_grad():
    for op, case in sorted(T.CASES.items()):
        case(m)
    m._ws_fused_0_launch(torch.device("cpu"), torch.rand(16))
print(len(rec), "ok")
'''


def test_the_composed_file_compiles_for_a_real_gpu_target(composed, tmp_path):
    """Triton's real front end, LLVM and ptxas compile every launch of the composed file for sm_90 (no
    GPU needed): the renamed helpers, constants and ``to_output`` as a GPU compile resolves them."""
    path = tmp_path / "composed.py"
    path.write_text(composed[0])
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["WARPSMITH_COMPILE_ONLY"] = "sm_90"
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's warpsmith
    r = subprocess.run([sys.executable, "-c", COMPILE_ONLY, str(path), str(Path(__file__).parent)], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=900)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
    assert int(r.stdout.split()[-2]) >= 30  # every case's launches (32 today)


def test_generated_kernel_and_runtime_in_the_composed_file(composed):
    m = composed[1]
    x = torch.rand(16) - 0.5
    y, = m._ws_fused_0_launch(x.device, x)
    ref = (torch.log1p(x) + torch.expm1(x) + torch.tanh(x) + torch.trunc(3 * x) + torch.round(3 * x)
           + torch.signbit(x).float() + torch.prod(x + 1.0))
    _close(y, ref, 1e-5)
    t = torch.randn(3, 4).t()
    c = m._ws_clone(t)
    assert torch.equal(c, t) and c.is_contiguous()
    assert torch.equal(m._ws_view(t, (12,)), t.reshape(12))


def test_rename_touches_global_references_only():
    src = ('def f(x, store_tile):\n'
           '    """calls store_tile"""\n'
           '    y = x.store_tile + store_tile  # store_tile, a parameter here\n'
           '    return y\n\n\n'
           'def g(x):\n'
           '    z = store_tile(x, "store_tile")  # ünïcode before: store_tile\n'
           '    tile = store_tile\n'
           '    return z + tile + math.pi\n')
    out = names.rename_globals(src, {"store_tile": "store_tile_1", "g": "g_1", "math": "m"})
    assert out == ('def f(x, store_tile):\n'
                   '    """calls store_tile"""\n'
                   '    y = x.store_tile + store_tile  # store_tile, a parameter here\n'
                   '    return y\n\n\n'
                   'def g_1(x):\n'
                   '    z = store_tile_1(x, "store_tile")  # ünïcode before: store_tile\n'
                   '    tile = store_tile_1\n'
                   '    return z + tile + m.pi\n')
    ns = names.Namespace({"a", "a_1"})
    assert ns.name(1, "a") == "a_2" and ns.name(1, "b") == "a_2" and ns.name(2, "min") == "min_1"


@pytest.mark.slow  # the composed-file tests above cover the name clash it hit
def test_lenet_small_is_solved_and_accepted(tmp_path):
    """conv -> relu -> pool twice, then three linear layers: the conv and matmul kernels (each with
    its own ``store_tile``) in one file. Before the fix: rejected, ``store_tile() missing 14 required
    positional arguments``."""
    res = solve(HERE / "lenet_small.py", tmp_path / "lenet_new.py")
    assert res.status == "accepted", res.verdict
    assert [n.op for n in res.program.library_calls] == ["conv", "pool", "conv", "pool", "matmul", "matmul", "matmul"]
    text = Path(res.written).read_text()
    assert "def store_tile(" in text and "def store_tile_1(" in text
