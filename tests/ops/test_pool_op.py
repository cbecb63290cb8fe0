"""The public pooling ops against torch.nn.functional: forward, indices and gradients, every
dtype, both memory formats, every option (ceil_mode's last-window rule, count_include_pad,
divisor_override, dilation, padding), 1-D/2-D/3-D, unbatched input, argument errors."""
import pytest
import torch
import torch.nn.functional as F

import warpsmith.ops as wops
from warpsmith.errors import InvalidInputError

TOL = {torch.float32: (1e-5, 1e-6), torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}


def _fmt(x, channels_last):
    if not channels_last:
        return x
    if x.dim() == 3:
        return x.transpose(1, 2).contiguous().transpose(1, 2)
    return x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)


def _compare(fn, ref, x, dtype, grad=True):
    xa = x.clone().requires_grad_(grad)
    xb = x.detach().float().clone().requires_grad_(grad)
    ya, yb = fn(xa), ref(xb)
    ya0 = ya[0] if isinstance(ya, tuple) else ya
    yb0 = yb[0] if isinstance(yb, tuple) else yb
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(ya0.float(), yb0, rtol=rtol, atol=atol)
    if isinstance(ya, tuple):
        assert torch.equal(ya[1], yb[1])
    if grad:
        dy = torch.randn(yb0.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
        (ga,) = torch.autograd.grad(ya0, xa, dy)
        (gb,) = torch.autograd.grad(yb0, xb, dy.float())
        assert ga.dtype == dtype and ga.shape == x.shape
        torch.testing.assert_close(ga.float(), gb, rtol=rtol, atol=atol)
    return ya0


# (shape, kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [
    ((2, 3, 11), 3, 2, 1, 2, True),
    ((1, 5, 7, 9), (3, 2), (2, 1), (1, 1), (1, 2), True),
    ((2, 2, 5, 5), 2, None, 0, 1, False),
    ((1, 1, 1, 1), 1, 1, 0, 1, False),
    ((1, 2, 3, 5, 7), (2, 3, 3), (1, 2, 2), (1, 1, 0), 1, True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(MAX_CASES)))
def test_max_pool_forward_indices_and_gradient(case, dtype):
    shape, k, s, p, d, ceil = MAX_CASES[case]
    dims = len(shape) - 2
    x = _fmt(torch.randn(shape, generator=torch.Generator().manual_seed(case)).to(dtype), case % 2 == 1)
    ref = getattr(F, f"max_pool{dims}d")
    _compare(lambda t: wops.max_pool(t, k, s, p, d, ceil, return_indices=True),
             lambda t: ref(t, k, s, p, d, ceil, return_indices=True), x, dtype)


AVG_CASES = [  # (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 3, 11), 3, 2, 1, True, False, None),
    ((1, 5, 7, 9), (3, 2), (2, 1), (1, 1), True, True, None),
    ((2, 2, 6, 5), 3, 2, 1, True, False, 7),
    ((1, 1, 1, 1), 1, 1, 0, False, True, None),
    ((1, 2, 3, 5, 7), (2, 3, 3), (1, 2, 2), (1, 1, 0), True, False, None),
    ((1, 2, 4, 5, 3), 2, 1, 1, False, True, 3),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(AVG_CASES)))
def test_avg_pool_forward_and_gradient(case, dtype):
    shape, k, s, p, ceil, cip, div = AVG_CASES[case]
    dims = len(shape) - 2
    x = _fmt(torch.randn(shape, generator=torch.Generator().manual_seed(case)).to(dtype), case % 2 == 0)
    ref = getattr(F, f"avg_pool{dims}d")
    extra = {} if dims == 1 else {"divisor_override": div}
    _compare(lambda t: wops.avg_pool(t, k, s, p, ceil, cip, div), lambda t: ref(t, k, s, p, ceil, cip, **extra), x, dtype)


def test_ceil_mode_last_window_rule_and_count_include_pad_matter():
    """L=5, k=2, s=2, p=1: ceil gives 4 windows by the formula, but the 4th would start at 5 >= L + p
    (in the right padding), so torch keeps 3; count_include_pad changes the edge divisors."""
    x = torch.arange(1.0, 6.0).reshape(1, 1, 5)
    y = wops.avg_pool(x, 2, 2, 1, ceil_mode=True, count_include_pad=True)
    assert y.shape == (1, 1, 3)
    torch.testing.assert_close(y, F.avg_pool1d(x, 2, 2, 1, ceil_mode=True, count_include_pad=True))
    y2 = wops.avg_pool(x, 2, 2, 1, ceil_mode=True, count_include_pad=False)
    torch.testing.assert_close(y2, F.avg_pool1d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False))
    assert not torch.equal(y, y2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape, out", [((2, 3, 7), 3), ((1, 2, 5, 7), (3, 9)), ((2, 3, 6, 1), (4, 1)),
                                         ((1, 2, 3, 4, 5), (2, 3, 2))])
def test_adaptive_avg_pool_forward_and_gradient(shape, out, dtype):
    dims = len(shape) - 2
    x = _fmt(torch.randn(shape, generator=torch.Generator().manual_seed(len(shape))).to(dtype), dims == 2)
    ref = getattr(F, f"adaptive_avg_pool{dims}d")
    _compare(lambda t: wops.adaptive_avg_pool(t, out), lambda t: ref(t, out), x, dtype)


def test_nan_and_ties_pick_what_torch_picks():
    x = torch.tensor([[[1.0, 3.0, 3.0, float("nan"), 2.0, float("-inf"), float("-inf")]]])
    y, i = wops.max_pool(x, 2, 1, return_indices=True)
    yr, ir = F.max_pool1d(x, 2, 1, return_indices=True)
    assert torch.equal(i, ir) and torch.equal(y.isnan(), yr.isnan())


def test_unbatched_input_and_channels_last_output():
    x = torch.randn(3, 6, 5)
    torch.testing.assert_close(wops.max_pool(x, 2, dims=2), F.max_pool2d(x, 2))
    xc = torch.randn(2, 4, 6, 6).contiguous(memory_format=torch.channels_last)
    assert wops.avg_pool(xc, 2).is_contiguous(memory_format=torch.channels_last)


def test_bad_arguments_are_refused():
    x = torch.randn(1, 2, 5, 5)
    with pytest.raises(InvalidInputError, match="half"):
        wops.max_pool(x, 2, padding=2)
    with pytest.raises(InvalidInputError, match="kernel_size"):
        wops.avg_pool(x, 0)
    with pytest.raises(InvalidInputError, match="divisor_override"):
        wops.avg_pool(torch.randn(1, 2, 5), 2, divisor_override=3)
    with pytest.raises(InvalidInputError, match="dtype"):
        wops.max_pool(x.double(), 2)
    with pytest.raises(InvalidInputError, match="empty"):
        wops.max_pool(x, 6)
