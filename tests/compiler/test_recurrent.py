"""Recurrent cells and layers as loops of fused steps (compiler/lower_rnn.py): ``nn.LSTM``/``nn.GRU``/
``nn.RNN`` (torch.export: ``aten.lstm``/``gru``/``rnn_relu``; torch.compile on the CPU:
``mkldnn_rnn_layer``) and the single cells, against eager, with no fallback: per step one library GEMM
and one generated gate kernel."""
from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from warpsmith.compiler import backend
from warpsmith.compiler.solve import compile_problem
from warpsmith.core.error_contract import within_reference

HERE = Path(__file__).parent / "problems" / "families"


def _close(y, want, oracle, what):
    assert y.shape == want.shape and y.dtype == want.dtype, what
    err, own = (y.double() - oracle).abs().max().item(), (want.double() - oracle).abs().max().item()
    ok, allowed = within_reference(err, own, oracle.abs().max().item(), torch.finfo(y.dtype).eps / 2)
    assert ok, (what, err, own, allowed)


@torch.no_grad()
def test_export_path_layers_unrolled_into_fused_steps(tmp_path):
    g, notes, prog = compile_problem(HERE / "recurrent.py")
    assert not prog.fallbacks, [str(n.target) for n in prog.fallbacks]
    assert sum("unrolled over its steps" in n for n in notes) == 3, notes
    T = 5
    assert [n.op for n in prog.library_calls] == ["matmul"] * (3 * (T + 1))  # input GEMM + one per step
    gates = [k for k in prog.kernels if any(m.op == "sigmoid" or m.op == "tanh" or m.op == "relu"
                                            for m in k.group.nodes)]
    assert len(gates) <= 3 * T + 3, len(gates)  # one gate kernel per step (plus at most the stacking)
    path = tmp_path / f"m_{uuid.uuid4().hex[:8]}.py"
    path.write_text(prog.text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    ref = mod.Model()
    torch.manual_seed(0)
    new = mod.ModelNew()
    torch.manual_seed(1)
    xs = mod.get_inputs()
    want, got = ref(*xs), new(*xs)
    oracle = ref.double()(*[x.double() for x in xs])
    for i, (y, w, o) in enumerate(zip(got, want, oracle)):
        _close(y, w, o, f"output {i}")


I, H, B = 10, 12, 3


def _run(m, args, verify=True):
    torch._dynamo.reset()
    with torch.no_grad():
        c = backend.compile(m, args, verify=verify)
        r = c.reports[-1]
        assert r.status == "compiled" and not r.fallbacks, r.summary()
        got = c(*args)
        want = m(*args)
        oracle = m.double()(*[a.double() for a in args]) if not isinstance(args[1], tuple) else \
            m.double()(args[0].double(), tuple(t.double() for t in args[1]))
        m.float()
    flat = lambda v: [t for x in (v if isinstance(v, tuple) else (v,)) for t in (x if isinstance(x, tuple) else (x,))]  # noqa: E731
    for i, (y, w, o) in enumerate(zip(flat(got), flat(want), flat(oracle))):
        _close(y, w, o, f"output {i}")
    return r


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_cells_through_the_backend(cell):
    torch.manual_seed(0)
    x, h, c = torch.randn(B, I), torch.randn(B, H), torch.randn(B, H)
    m, args = {"rnn": (nn.RNNCell(I, H), (x, h)), "lstm": (nn.LSTMCell(I, H), (x, (h, c))),
               "gru": (nn.GRUCell(I, H), (x, h))}[cell]
    r = _run(m, args)
    assert r.library_calls == ["matmul", "matmul"], r.summary()
    assert r.kernels == 1, r.summary()  # the gate math in one kernel (LSTM: the add pushed through the split)
    assert cell != "lstm" or any("pushed through" in n for n in r.notes), r.notes


@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_layers_through_the_backend(layer, monkeypatch):
    import torch._dynamo

    monkeypatch.setattr(torch._dynamo.config, "allow_rnn", True)  # dynamo otherwise runs nn.LSTM/GRU eagerly
    torch.manual_seed(0)
    xs, h = torch.randn(4, B, I), torch.randn(1, B, H)
    m = nn.LSTM(I, H) if layer == "lstm" else nn.GRU(I, H)
    args = (xs, (h, torch.randn(1, B, H))) if layer == "lstm" else (xs, h)
    # the backend's own float64 check cannot run the captured LSTM (mkldnn_rnn_layer has no float64
    # kernel): the compiled program is checked here against the float64 model instead
    r = _run(m, args, verify=layer != "lstm")
    assert r.library_calls.count("matmul") == 5, r.summary()  # the input GEMM and one per step
