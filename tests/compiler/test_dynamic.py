"""Symbolic shapes in the torch.compile backend (compiler/symbolic_shapes.py): dynamic=True compiles ONE
verified program that serves a range of sequence lengths, sizes read at call time, guards reported; a
size outside the guards recompiles (dynamo's) or runs the original graph (warpsmith's), never a
wrong result. On a backend without symbolic shapes every graph here ran as ATen."""
import re

import pytest
import torch

import warpsmith
from warpsmith.compiler import backend as B
from warpsmith.compiler import symbolic_shapes as SS


class AttentionBlock(torch.nn.Module):
    """LayerNorm, single-head attention over the sequence (softmax over a symbolic dim), a GELU MLP,
    a mean over the sequence (a reduction over a symbolic dim) and a mean over features."""

    def __init__(self, d: int = 16, h: int = 24) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.q, self.k = torch.nn.Linear(d, d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, h), torch.nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln(x)
        a = torch.softmax(self.q(h) @ self.k(h).transpose(-1, -2) * 0.25, dim=-1) @ h
        y = x + self.down(torch.nn.functional.gelu(self.up(a)))
        return y + y.mean(dim=1, keepdim=True) - h.mean(dim=-1, keepdim=True)


def _block():
    torch.manual_seed(0)
    return AttentionBlock().eval()


class Counting(B.Backend):
    """The warpsmith backend, counting dynamo's compiles: graphs compiled and returned (dynamo may call
    a backend and restart its analysis, e.g. to turn a Python float into a tensor: not a compile)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        out = super().__call__(gm, example_inputs)
        self.compiles += 1
        return out


def test_one_program_serves_several_sequence_lengths():
    m, be = _block(), Counting()
    fn = torch.compile(m, backend=be, dynamic=True)
    with torch.no_grad():
        for seq in (8, 5, 13):
            x = torch.randn(2, seq, 16)
            torch.testing.assert_close(fn(x), m(x), rtol=1e-4, atol=1e-5)
    assert be.compiles == 1
    [r] = be.reports
    assert r.status == "compiled" and not r.fallbacks, r.summary()
    assert r.kernels >= 2 and "softmax" in r.library_calls and "matmul" in r.library_calls
    # the batch and the sequence are symbols; the program reads them at call time
    assert len(r.symbols) == 2 and all("hint" in d for d in r.symbols.values())
    assert "_S = {" in r.source and "_S['" in r.source and "_dev = v_" in r.source
    run = r.source[r.source.index("def run("):]
    assert not re.search(r"\b(1000\d{3})\b", r.source), "a probe size was left in the program"
    # the guards: dynamo's ranges and warpsmith's int32 bound
    assert any(g.startswith("dynamo: 2 <= s") for g in r.guards)
    assert any(g.startswith("warpsmith:") and "< 2^31" in g for g in r.guards)
    # verified at three distinct sizes, each checked against eager
    assert len(r.sizes_verified) == 3 and len({tuple(v.items()) for v in r.sizes_verified}) == 3
    for v in r.sizes_verified:
        assert any(c.startswith(f"sizes {v}, output 0") and ": ok" in c for c in r.checks)
    assert "guard dynamo" in "\n".join(r.shape_lines()) and run


def test_a_reduction_over_the_symbolic_dim_uses_the_runtime_count():
    """mean over the sequence: its count is the kernel's N at run time, not the compiled length."""
    r = _compiled_report(lambda x: x - x.mean(dim=0), [torch.randn(6, 3), torch.randn(11, 3), torch.randn(4, 3)])
    assert r.status == "compiled" and r.kernels >= 1, r.summary()
    assert "/ N" in r.source


def _compiled_report(fn, inputs):
    be = Counting()
    c = torch.compile(fn, backend=be, dynamic=True)
    with torch.no_grad():
        for x in inputs:
            torch.testing.assert_close(c(x), fn(x), rtol=1e-5, atol=1e-6)
    assert be.compiles == 1
    [r] = be.reports
    return r


def test_a_size_outside_dynamos_guards_recompiles():
    """A length of 1 violates dynamo's 2 <= s guard: dynamo compiles again (that length static)."""
    m, be = _block(), Counting()
    fn = torch.compile(m, backend=be, dynamic=True)
    with torch.no_grad():
        for seq in (6, 1):
            x = torch.randn(2, seq, 16)
            torch.testing.assert_close(fn(x), m(x), rtol=1e-4, atol=1e-5)
    assert be.compiles == 2 and [r.status for r in be.reports] == ["compiled", "compiled"]
    assert len(be.reports[1].symbols) == 1  # the batch only


def test_a_size_outside_warpsmiths_guards_runs_the_original_graph(monkeypatch):
    """warpsmith's own guard (every tensor below the int32 limit; lowered here so that a small size
    violates it) is checked at each call: a violating call runs the original ATen graph, right, and
    the report counts it; no wrong result, no recompile."""
    monkeypatch.setattr(SS, "INT32", 300)
    f = lambda x: torch.relu(x) * 2.0 + 1.0  # noqa: E731
    be = Counting()
    c = torch.compile(f, backend=be, dynamic=True)
    with torch.no_grad():
        for n in (8, 5):  # 32 and 20 elements: within the guard, run by the compiled program
            x = torch.randn(n, 4)
            torch.testing.assert_close(c(x), f(x))
        assert be.reports[0].guard_fallbacks == 0
        x = torch.randn(100, 4)  # 400 elements >= 300
        torch.testing.assert_close(c(x), f(x))
    [r] = be.reports
    assert be.compiles == 1 and r.status == "compiled" and r.guard_fallbacks == 1, r.summary()
    assert all(int(v[next(iter(v))]) * 4 < 300 for v in r.sizes_verified)
    assert any("< 2^31" in g for g in r.guards)


def test_automatic_dynamic_after_a_recompile():
    """Without dynamic=True dynamo makes the length symbolic when it changes: the second graph is
    symbolic and compiled, and serves a third length without compiling again."""
    torch._dynamo.reset()  # automatic dynamic remembers the sizes a frame saw in earlier tests
    m = _block()
    c = warpsmith.compile(m, dynamic=None)
    with torch.no_grad():
        for seq in (8, 5, 13):
            x = torch.randn(2, seq, 16)
            torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-5)
    assert [bool(r.symbols) for r in c.reports] == [False, True]
    assert all(r.status == "compiled" for r in c.reports), c.explain()
    assert "verified at sizes" in c.explain() and "guard" in c.explain()


def test_training_with_symbolic_sizes():
    """Forward and backward graphs with a symbolic length are compiled, verified at three sizes each,
    and the gradients match eager at every length."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.GELU(), torch.nn.Linear(24, 16))
    ref = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.GELU(), torch.nn.Linear(24, 16))
    ref.load_state_dict(m.state_dict())
    be = Counting()
    fn = torch.compile(m, backend=be, dynamic=True)
    for seq in (6, 9, 4):
        x = torch.randn(seq, 16)
        m.zero_grad()
        ref.zero_grad()
        fn(x).square().sum().backward()
        ref(x).square().sum().backward()
        for p, q in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    assert be.compiles == 1
    assert [(r.kind, r.status) for r in be.reports] == [("forward", "compiled"), ("backward", "compiled")], \
        [r.summary() for r in be.reports]
    assert all(len(r.sizes_verified) == 3 for r in be.reports)


@pytest.mark.parametrize("bad", ["var"])
def test_a_size_baked_into_a_kernel_is_refused_with_its_reason(bad):
    """var's count (n - 1) is a literal of the generated kernel: not expressible at call time, so the
    graph runs as ATen and the report says why (never a kernel specialized to the compiled length)."""
    f = lambda x: x.var(dim=0)  # noqa: E731
    be = Counting()
    c = torch.compile(f, backend=be, dynamic=True)
    with pytest.warns(B.EagerFallbackWarning), torch.no_grad():
        for n in (6, 9):
            x = torch.randn(n, 3)
            torch.testing.assert_close(c(x), f(x))
    [r] = be.reports
    assert r.status == "eager" and "symbolic size" in r.reason and r.symbols, r.summary()


def test_a_reshape_that_needs_divisibility_is_verified_at_sizes_its_guards_allow():
    """x.reshape(b, s // 2, 2 * h): dynamo guards s even; the program reads s // 2 at call time, and the
    three sizes it is verified at all satisfy the guard (no odd length)."""
    def f(x):
        b, s, h = x.shape
        y = torch.relu(x).reshape(b, s // 2, 2 * h)
        return y * 2.0 + y.sum(-1, keepdim=True)

    r = _compiled_report(f, [torch.randn(2, 8, 4), torch.randn(2, 6, 4), torch.randn(2, 14, 4)])
    assert r.status == "compiled", r.summary()
    assert any("Mod(" in g for g in r.guards)
    seq = [name for name, d in r.symbols.items() if "hint 8" in d]
    assert len(r.sizes_verified) == 3 and all(v[seq[0]] % 2 == 0 for v in r.sizes_verified), r.sizes_verified
    assert "//2" in r.source
