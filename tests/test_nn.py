"""warpsmith.nn: drop-in modules against their torch.nn counterparts (under each op's error contract)."""
import pytest
import torch

import warpsmith.nn as wnn
from warpsmith.errors import InvalidInputError
from warpsmith import dispatch


def close(got, ref, rtol):
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert (got.double() - ref.double()).abs().max() <= rtol * ref.double().abs().max() + 1e-30


@pytest.fixture
def ops_called(monkeypatch):
    seen = []
    real = dispatch.select
    monkeypatch.setattr(dispatch, "select", lambda p, variants: (seen.append(p.op), real(p, variants))[1])
    return seen


def test_rms_norm_module_matches_torch_and_loads_its_state_dict(ops_called):
    ref = torch.nn.RMSNorm(37, eps=1e-6)
    with torch.no_grad():
        ref.weight.normal_()
    mod = wnn.RMSNorm(37, eps=1e-6)
    mod.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 37, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    close(mod(x), ref(x2), 1e-5)
    mod(x).sum().backward()
    ref(x2).sum().backward()
    close(x.grad, x2.grad, 1e-5)
    close(mod.weight.grad, ref.weight.grad, 1e-5)
    assert "rms_norm" in ops_called and "rms_norm_backward" in ops_called
    assert isinstance(mod, torch.nn.RMSNorm)


def test_rms_norm_eps_none_follows_torch():
    ref = torch.nn.RMSNorm(16)
    x = torch.randn(4, 16) * 1e-4  # eps matters at this scale
    close(wnn.RMSNorm(16)(x), ref(x), 1e-5)


def test_layer_norm_module_with_residual():
    ref = torch.nn.LayerNorm(29)
    with torch.no_grad():
        ref.weight.normal_(), ref.bias.normal_()
    mod = wnn.from_torch(ref)
    assert mod.weight is ref.weight and mod.bias is ref.bias and isinstance(mod, wnn.LayerNorm)
    x, r = torch.randn(5, 29), torch.randn(5, 29)
    y, s = mod(x, residual=r)
    close(s, x + r, 1e-6)
    close(y, ref(x + r), 1e-5)


def test_softmax_modules():
    x = torch.randn(3, 50)
    close(wnn.Softmax(dim=-1)(x), torch.softmax(x, -1), 1e-5)
    close(wnn.LogSoftmax(dim=-1)(x), torch.log_softmax(x, -1), 1e-5)


def test_cross_entropy_losses():
    logits, target = torch.randn(6, 40), torch.randint(0, 40, (6,))
    target[1] = -100
    ref = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    close(wnn.from_torch(ref)(logits, target), ref(logits, target), 1e-5)
    hidden, weight = torch.randn(6, 8), torch.randn(40, 8)
    close(wnn.LinearCrossEntropyLoss()(hidden, weight, target),
          torch.nn.functional.cross_entropy(hidden @ weight.T, target), 1e-5)


def test_glu_modules():
    g, u = torch.randn(4, 24), torch.randn(4, 24)
    close(wnn.SwiGLU()(g, u), torch.nn.functional.silu(g) * u, 1e-5)
    close(wnn.SwiGLU()(torch.cat([g, u], -1)), torch.nn.functional.silu(g) * u, 1e-5)
    close(wnn.GEGLU("tanh")(g, u), torch.nn.functional.gelu(g, approximate="tanh") * u, 1e-5)


def test_unsupported_configurations_are_refused_at_construction():
    with pytest.raises(InvalidInputError, match="one trailing dimension"):
        wnn.RMSNorm((4, 8))
    with pytest.raises(InvalidInputError, match="last dimension"):
        wnn.Softmax(dim=0)
    with pytest.raises(InvalidInputError, match="class weights"):
        wnn.CrossEntropyLoss(weight=torch.ones(3))
    with pytest.raises(InvalidInputError, match="torch.nn.RMSNorm"):
        wnn.from_torch(torch.nn.Linear(2, 2))
