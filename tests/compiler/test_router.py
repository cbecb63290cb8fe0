"""Top-k and sort for MoE routers: the selection kernel (ops/topk/kernel.py) against torch, and its
lowering (compiler/lower_route.py) from ``aten.topk``/``aten.sort`` in a router block, by the
torch.compile backend and by the torch.export path, with no fallback."""
from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton

from warpsmith.compiler import backend
from warpsmith.compiler.solve import compile_problem
from warpsmith.ops.topk.kernel import topk_rows_kernel

HERE = Path(__file__).parent / "problems" / "families"


def _topk(x: torch.Tensor, k: int, largest: bool) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    v = torch.full((m, k), 7.0, dtype=x.dtype)  # poisoned
    i = torch.full((m, k), -5, dtype=torch.int64)
    topk_rows_kernel[(m,)](x, v, i, m, n, k, x.stride(0), x.stride(1), v.stride(0), i.stride(0),
                           BLOCK_N=triton.next_power_of_2(n), BLOCK_K=max(2, triton.next_power_of_2(k)), LARGEST=largest)
    return v, i


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n,k", [(1, 1), (7, 3), (64, 8), (257, 2), (3000, 8)])
def test_topk_kernel_matches_torch(dtype, n, k):
    """Values always equal torch's; indices too in rows without equal values (16-bit rows of hundreds
    have ties: there the indices hold the values, distinct)."""
    k = min(k, n)
    torch.manual_seed(n + k)
    x = torch.randn(n).to(dtype)
    x = torch.stack([x, x.flip(0), -x, torch.randperm(n).to(dtype)])
    for largest in (True, False):
        v, i = _topk(x, k, largest)
        tv, ti = torch.topk(x, k, largest=largest)
        assert torch.equal(v, tv), (largest, v, tv)
        assert torch.equal(torch.gather(x, 1, i), v) and all(len(set(r)) == k for r in i.tolist())
        for r in range(x.shape[0]):
            if x[r].unique().numel() == n:
                assert torch.equal(i[r], ti[r]), (r, largest, i[r], ti[r])


def test_topk_kernel_ties_nan_inf():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, 3, 3, 2, 3, 0, 3], [nan, 1, -inf, nan, inf, 0, -inf]])
    v, i = _topk(x, 7, True)
    tv, _ = torch.sort(x, descending=True, stable=True)
    assert torch.equal(v.nan_to_num(99.0), tv.nan_to_num(99.0))
    assert i.tolist() == [[1, 2, 4, 6, 3, 0, 5], [0, 3, 4, 1, 5, 2, 6]]  # ties: lowest index first (stable)
    assert i.tolist() == torch.sort(x, descending=True, stable=True).indices.tolist()
    v, i = _topk(x, 7, False)
    assert i.tolist() == torch.sort(x, descending=False, stable=True).indices.tolist()  # NaN last
    # torch.topk orders equal values as it likes (CPU: 1, 6, 4 here): values agree, indices hold them
    tv, ti = torch.topk(x[:1], 3)
    v, i = _topk(x[:1], 3, True)
    assert torch.equal(v, tv) and torch.equal(x[0, i[0]], v[0])


class Router(nn.Module):
    def __init__(self, d=32, experts=16, k=2):
        super().__init__()
        self.gate = nn.Linear(d, experts, bias=False)
        self.k = k

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1, dtype=torch.float)
        w, idx = torch.topk(probs, self.k, dim=-1)
        return (w / w.sum(-1, keepdim=True)).to(x.dtype), idx


@pytest.mark.parametrize("k", [2, 8])
def test_router_block_compiles_with_no_topk_fallback(k):
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = Router(k=k)
    x = torch.randn(3, 7, 32)
    with torch.no_grad():
        c = backend.compile(m, (x,))
        r = c.reports[-1]
        assert r.status == "compiled", r.summary()  # verified against float64, indices exact
        assert "topk" in r.library_calls and not r.fallbacks, r.summary()
        w, i = c(x)
        w0, i0 = m(x)
    assert torch.equal(i, i0)
    torch.testing.assert_close(w, w0, rtol=2e-6, atol=1e-7)


@torch.no_grad()
def test_export_path_router_and_sort(tmp_path):
    g, notes, prog = compile_problem(HERE / "moe_router.py")
    assert not prog.fallbacks, [str(n.target) for n in prog.fallbacks]
    assert sorted(n.op for n in prog.library_calls).count("topk") == 2
    assert any("sort (descending, stable)" in n for n in notes), notes
    path = tmp_path / f"m_{uuid.uuid4().hex[:8]}.py"
    path.write_text(prog.text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    ref = mod.Model()
    torch.manual_seed(0)
    new = mod.ModelNew()
    x = mod.get_inputs()[0]
    want, got = ref(x), new(x)
    assert torch.equal(got[1], want[1]) and torch.equal(got[3], want[3])
    torch.testing.assert_close(got[0], want[0], rtol=2e-6, atol=1e-7)
    torch.testing.assert_close(got[2], want[2], rtol=2e-6, atol=1e-7)
