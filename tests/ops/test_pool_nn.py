"""warpsmith.nn's pooling and channel-norm modules: drop-ins for torch's (subclasses, same state,
same outputs, gradients and running statistics, momentum=None's cumulative average)."""
import pytest
import torch

import warpsmith.nn as wnn


@pytest.mark.parametrize("name, args, shape", [
    ("MaxPool1d", (3, 2, 1), (2, 3, 9)), ("MaxPool2d", ((3, 2), 2, 1, 1, False, True), (1, 2, 7, 6)),
    ("MaxPool3d", (2,), (1, 1, 4, 4, 5)), ("AvgPool1d", (3, 2, 1, True, False), (2, 3, 9)),
    ("AvgPool2d", (3, 2, 1, True, True, 4), (1, 2, 7, 6)), ("AvgPool3d", (2, 1), (1, 2, 3, 4, 3)),
    ("AdaptiveAvgPool1d", (4,), (2, 3, 9)), ("AdaptiveAvgPool2d", ((3, None),), (1, 2, 7, 6)),
    ("AdaptiveAvgPool3d", (2,), (1, 1, 3, 5, 4)),
])
def test_pool_modules_match_torch(name, args, shape):
    ours, ref = getattr(wnn, name)(*args), getattr(torch.nn, name)(*args)
    assert isinstance(ours, getattr(torch.nn, name))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    a, b = ours(x.clone().requires_grad_()), ref(x)
    if isinstance(b, tuple):
        assert torch.equal(a[1], b[1])
        a, b = a[0], b[0]
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name, shape", [("BatchNorm1d", (4, 3)), ("BatchNorm2d", (2, 3, 4, 5)),
                                         ("BatchNorm3d", (2, 3, 2, 3, 2))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_modules_train_and_eval_like_torch(name, shape, momentum):
    ours, ref = getattr(wnn, name)(3, momentum=momentum), getattr(torch.nn, name)(3, momentum=momentum)
    ref.load_state_dict(ours.state_dict())
    g = torch.Generator().manual_seed(1)
    for step in range(2):
        x = torch.randn(shape, generator=g) * 2 + step
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[k], v, rtol=1e-5, atol=1e-6)
    ours.eval()
    ref.eval()
    x = torch.randn(shape, generator=g)
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, shape", [("InstanceNorm1d", (3, 5)), ("InstanceNorm2d", (2, 3, 4, 5)),
                                         ("InstanceNorm3d", (1, 3, 2, 3, 2))])
def test_instance_norm_modules(name, shape):
    ours = getattr(wnn, name)(3, affine=True, track_running_stats=True)
    ref = getattr(torch.nn, name)(3, affine=True, track_running_stats=True)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.running_var, ref.running_var)


def test_group_norm_module():
    ours, ref = wnn.GroupNorm(2, 6), torch.nn.GroupNorm(2, 6)
    x = torch.randn(2, 6, 3, 3).contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
