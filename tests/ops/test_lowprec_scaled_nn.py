"""warpsmith.nn.Fp8Linear (fp8 training: forward e4m3, backward hybrid e5m2 x e4m3, dynamic scaling) and Int8Linear
(W8A8 inference) against torch.nn.Linear: quantization-level agreement (SNR), shared parameters, and
Int8Linear refusing autograd."""
import pytest
import torch

import warpsmith.nn as wnn
from warpsmith.core.errors import InvalidInputError
from warpsmith.ops.lowprec.quant_reference import snr_db


def test_fp8_linear_forward_and_backward():
    torch.manual_seed(0)
    lin = torch.nn.Linear(40, 24).bfloat16()
    f = wnn.Fp8Linear.from_linear(lin)
    assert isinstance(f, torch.nn.Linear) and f.weight is lin.weight  # parameters shared
    x = torch.randn(2, 3, 40).bfloat16().requires_grad_()
    y, yr = f(x), lin(x)
    assert y.shape == (2, 3, 24) and y.dtype == torch.bfloat16
    assert snr_db(y.detach(), yr.detach()) > 24  # e4m3 (3 mantissa bits) operands: ~28 dB
    g = torch.randn_like(y)
    (y.float() * g.float()).sum().backward()
    grads = [t.grad.clone() for t in (x, lin.weight, lin.bias)]
    for t in (x, lin.weight, lin.bias):
        t.grad = None
    (yr.float() * g.float()).sum().backward()
    ref = [x.grad, lin.weight.grad, lin.bias.grad]
    # e5m2 gradient (2 mantissa bits) x e4m3 operand (3 bits): 25-28 dB measured on seeds 0-2
    assert snr_db(grads[0], ref[0]) > 22 and snr_db(grads[1], ref[1]) > 22
    assert torch.allclose(grads[2].float(), ref[2].float(), rtol=1e-2, atol=1e-2)


def test_fp8_linear_backward_is_the_hybrid_recipe(monkeypatch):
    """Both backward GEMMs take the gradient in e5m2 and the other operand (weight, activations) in e4m3."""
    import warpsmith.ops as wops

    seen, real = [], wops.scaled_matmul
    monkeypatch.setattr(wops, "scaled_matmul", lambda a, b, *r, **k: seen.append((a.dtype, b.dtype)) or real(a, b, *r, **k))
    lin = torch.nn.Linear(40, 24).bfloat16()
    x = torch.randn(5, 40).bfloat16().requires_grad_()
    wnn.Fp8Linear.from_linear(lin)(x).float().sum().backward()
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    assert seen == [(e4, e4), (e5, e4), (e5, e4)], seen


def test_int8_linear_inference_only():
    torch.manual_seed(1)
    lin = torch.nn.Linear(300, 33)
    q = wnn.Int8Linear.from_linear(lin)
    assert q.qweight.dtype == torch.int8 and q.weight_scale.shape == (33, 1)
    x = torch.randn(7, 300)
    with torch.no_grad():
        y = q(x)
        assert snr_db(y, lin(x)) > 35
    with pytest.raises(InvalidInputError, match="inference only"):
        q(x.requires_grad_())
