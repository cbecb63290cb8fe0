"""batch_norm, group_norm and instance_norm against torch.nn.functional: forward, gradients of
input, weight and bias, running-statistic updates, every dtype, NCHW and channels-last, 1-D/2-D/3-D
inputs, optional affine, inference mode; argument errors."""
import pytest
import torch
import torch.nn.functional as F

import warpsmith.ops as wops
from warpsmith.errors import InvalidInputError

TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _x(shape, dtype, channels_last, seed=0):
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 2 + 0.5).to(dtype)
    if channels_last and x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    if channels_last and x.dim() == 5:
        return x.contiguous(memory_format=torch.channels_last_3d)
    if channels_last and x.dim() == 3:
        return x.transpose(1, 2).contiguous().transpose(1, 2)
    return x


def _params(C, affine, seed=1):
    if not affine:
        return None, None
    g = torch.Generator().manual_seed(seed)
    return torch.randn(C, generator=g).requires_grad_(), torch.randn(C, generator=g).requires_grad_()


def _grads_match(ours, ref, leaves_a, leaves_b, dtype):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(ours.float(), ref.float(), rtol=rtol, atol=atol)
    dy = torch.randn(ref.shape, generator=torch.Generator().manual_seed(7)).to(dtype)
    ga = torch.autograd.grad(ours, leaves_a, dy)
    gb = torch.autograd.grad(ref, leaves_b, dy.float())
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a.float(), b.float(), rtol=rtol, atol=atol * 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, cl, affine", [((3, 5, 7), False, True), ((2, 3, 5, 3), True, True),
                                                ((5, 2), False, False), ((2, 3, 2, 3, 2), True, True)])
def test_batch_norm_training_forward_grads_and_running_stats(shape, cl, affine, dtype):
    C = shape[1]
    x = _x(shape, dtype, cl)
    w, b = _params(C, affine)
    rm, rv = torch.randn(C) * 0.1, torch.rand(C) + 0.5
    rm2, rv2 = rm.clone(), rv.clone()
    xa, xb = x.clone().requires_grad_(), x.float().clone().requires_grad_()
    wb = (w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()) if affine else (None, None)
    y = wops.batch_norm(xa, rm, rv, w, b, training=True, momentum=0.3)
    yr = F.batch_norm(xb, rm2, rv2, *wb, training=True, momentum=0.3)
    assert y.dtype == dtype and y.shape == x.shape and (not cl or y.stride(1) == 1)
    leaves_a = [xa] + ([w, b] if affine else [])
    leaves_b = [xb] + (list(wb) if affine else [])
    _grads_match(y, yr, leaves_a, leaves_b, dtype)
    torch.testing.assert_close(rm, rm2, rtol=1e-3 if dtype != torch.float32 else 1e-5, atol=1e-3)
    torch.testing.assert_close(rv, rv2, rtol=1e-3 if dtype != torch.float32 else 1e-5, atol=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm_inference_uses_running_stats_and_leaves_them(dtype):
    x = _x((2, 3, 4, 5), dtype, True)
    w, b = _params(3, True)
    rm, rv = torch.randn(3) * 0.1, torch.rand(3) + 0.5
    before = (rm.clone(), rv.clone())
    xa, xb = x.clone().requires_grad_(), x.float().clone().requires_grad_()
    wb = (w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_())
    y = wops.batch_norm(xa, rm, rv, w, b, training=False)
    yr = F.batch_norm(xb, rm.clone(), rv.clone(), *wb, training=False)
    _grads_match(y, yr, [xa, w, b], [xb, *wb], dtype)
    assert torch.equal(rm, before[0]) and torch.equal(rv, before[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, groups, cl, affine", [((2, 6, 7), 3, False, True), ((3, 4, 3, 5), 2, True, False),
                                                        ((1, 5, 2, 2, 3), 5, True, True), ((2, 3, 1), 1, False, True)])
def test_group_norm_forward_and_grads(shape, groups, cl, affine, dtype):
    x = _x(shape, dtype, cl)
    w, b = _params(shape[1], affine)
    xa, xb = x.clone().requires_grad_(), x.float().clone().requires_grad_()
    wb = (w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()) if affine else (None, None)
    y = wops.group_norm(xa, groups, w, b)
    yr = F.group_norm(xb, groups, *wb)
    _grads_match(y, yr, [xa] + ([w, b] if affine else []), [xb] + (list(wb) if affine else []), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_with_running_stats(use_input_stats, dtype):
    x = _x((3, 4, 5, 3), dtype, use_input_stats)
    w, b = _params(4, True)
    rm, rv = torch.randn(4) * 0.1, torch.rand(4) + 0.5
    rm2, rv2 = rm.clone(), rv.clone()
    xa, xb = x.clone().requires_grad_(), x.float().clone().requires_grad_()
    wb = (w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_())
    y = wops.instance_norm(xa, rm, rv, w, b, use_input_stats=use_input_stats, momentum=0.2)
    yr = F.instance_norm(xb, rm2, rv2, *wb, use_input_stats=use_input_stats, momentum=0.2)
    _grads_match(y, yr, [xa, w, b], [xb, *wb], dtype)
    torch.testing.assert_close(rm, rm2, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(rv, rv2, rtol=1e-3, atol=1e-3)


def test_large_mean_small_spread_keeps_precision():
    """Two-pass statistics: a mean 1e4 times the spread loses nothing a one-pass E[x^2] - E[x]^2 would."""
    x = 1e4 + torch.randn(4, 3, 50, generator=torch.Generator().manual_seed(3))
    y = wops.batch_norm(x, None, None, training=True)
    torch.testing.assert_close(y, F.batch_norm(x.double(), None, None, training=True).float(), rtol=1e-3, atol=1e-3)


def test_bad_arguments_are_refused():
    x = torch.randn(2, 6, 4)
    with pytest.raises(InvalidInputError, match="num_groups"):
        wops.group_norm(x, 4)
    with pytest.raises(InvalidInputError, match="running"):
        wops.batch_norm(x, None, None, training=False)
    with pytest.raises(InvalidInputError, match="one value"):
        wops.batch_norm(torch.randn(1, 3), None, None, training=True)
    with pytest.raises(InvalidInputError, match="weight"):
        wops.batch_norm(x, None, None, torch.randn(5), training=True)
