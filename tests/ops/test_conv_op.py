"""The public conv ops, their custom ops and autograd against torch (forward and gradients, 1-D/2-D/3-D,
direct and transposed, groups, channels-last, every dtype), the aten.convolution-shaped entry, the
nn drop-ins, batch-norm folding, and argument errors."""
import pytest
import torch
import torch.nn.functional as F

import warpsmith.nn as wnn
import warpsmith.ops as wops
from warpsmith.core.errors import InvalidInputError
from warpsmith.core.dtypes import UNIT_ROUNDOFF_OF

TORCH_FWD = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
TORCH_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def close_to_oracle(ours, theirs_same_dtype, oracle, scale):
    """Our error vs the fp64 oracle within 4x torch's own error in the same dtype, plus a few units
    of the dtype's rounding on the error scale (both outputs round to that dtype)."""
    u = UNIT_ROUNDOFF_OF[ours.dtype]
    err = (ours.double() - oracle).abs().max().item()
    ref_err = (theirs_same_dtype.double() - oracle).abs().max().item()
    bound = 4 * ref_err + 4 * u * scale.max().item() + 1e-30
    assert err <= bound, (err, ref_err, bound)


def grads(fn, inputs, go):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    return (out, *torch.autograd.grad(out, leaves, go))


CASES = [  # (nd, x shape, w shape, kwargs)
    (1, (2, 4, 11), (6, 2, 3), dict(stride=2, padding=1, dilation=2, groups=2)),
    (2, (2, 3, 7, 6), (5, 3, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    (2, (1, 4, 5, 5), (4, 1, 3, 3), dict(padding="same", groups=4)),
    (2, (1, 3, 6, 5), (2, 3, 4, 2), dict(padding="same")),
    (3, (1, 2, 4, 5, 3), (3, 2, 2, 3, 1), dict(stride=(1, 2, 1), padding=1, dilation=(2, 1, 1))),
]


@pytest.mark.parametrize("nd, xs, ws, kw", CASES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv_forward_and_gradients_fp32(nd, xs, ws, kw, channels_last):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(xs, generator=g), torch.randn(ws, generator=g)
    b = torch.randn(ws[0], generator=g)
    if channels_last and nd >= 2:
        x = x.contiguous(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    ref = TORCH_FWD[nd](x, w, b, **kw)
    go = torch.randn(ref.shape, generator=g)
    ours = grads(lambda x, w, b: wops.conv(x, w, b, **kw), (x, w, b), go)
    theirs = grads(lambda x, w, b: TORCH_FWD[nd](x, w, b, **kw), (x, w, b), go)
    for o, t in zip(ours, theirs):
        torch.testing.assert_close(o, t, rtol=1e-5, atol=1e-5)
    if channels_last and nd == 2:
        assert ours[0].stride() == ref.stride()  # the input's memory format, as torch
    if channels_last and nd == 3:  # torch's CPU conv3d returns NCDHW here; its CUDA (cuDNN) path keeps NDHWC
        assert ours[0].is_contiguous(memory_format=torch.channels_last_3d)


T_CASES = [
    (1, (2, 4, 5), (4, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    (2, (1, 3, 4, 3), (3, 2, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2))),
    (2, (1, 2, 3, 3), (2, 1, 2, 3), dict(stride=1, dilation=2, output_padding=1)),
    (3, (1, 2, 2, 3, 2), (2, 3, 2, 2, 3), dict(stride=(2, 1, 1), padding=(0, 1, 1), output_padding=(1, 0, 0))),
]


@pytest.mark.parametrize("nd, xs, ws, kw", T_CASES)
def test_conv_transpose_forward_and_gradients_fp32(nd, xs, ws, kw):
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(xs, generator=g), torch.randn(ws, generator=g)
    b = torch.randn(ws[1] * kw.get("groups", 1), generator=g)
    ref = TORCH_T[nd](x, w, b, **kw)
    go = torch.randn(ref.shape, generator=g)
    ours = grads(lambda x, w, b: wops.conv_transpose(x, w, b, **kw), (x, w, b), go)
    theirs = grads(lambda x, w, b: TORCH_T[nd](x, w, b, **kw), (x, w, b), go)
    for o, t in zip(ours, theirs):
        torch.testing.assert_close(o, t, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("transposed", [False, True])
def test_half_precision_forward_and_gradients(dtype, transposed):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 4, 6, 5, generator=g).contiguous(memory_format=torch.channels_last)
    w = torch.randn((4, 3, 3, 2) if transposed else (6, 2, 3, 2), generator=g)
    kw = dict(stride=2, padding=1, groups=2)
    fn = (lambda x, w: TORCH_T[2](x, w, output_padding=1, **kw)) if transposed else (lambda x, w: F.conv2d(x, w, **kw))
    mine = (lambda x, w: wops.conv_transpose(x, w, output_padding=1, **kw)) if transposed else \
        (lambda x, w: wops.conv(x, w, **kw))
    go = torch.randn(fn(x, w).shape, generator=g)
    oracle = grads(fn, (x.double(), w.double()), go.double())
    absolute = grads(fn, (x.double().abs(), w.double().abs()), go.double().abs())
    ours = grads(mine, (x.to(dtype), w.to(dtype)), go.to(dtype))
    theirs = grads(fn, (x.to(dtype), w.to(dtype)), go.to(dtype))
    for o, t, r, s in zip(ours, theirs, oracle, absolute):
        assert o.dtype == dtype
        close_to_oracle(o, t, r, s)


def test_fused_epilogue_and_its_gradients():
    g = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(2, 3, 5, 5, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(4, generator=g)
    res = torch.randn(2, 4, 5, 5, generator=g)
    for act, fn in (("relu", F.relu), ("gelu", F.gelu), ("silu", F.silu)):
        go = torch.randn(2, 4, 5, 5, generator=g)
        ours = grads(lambda x, w, b, r: wops.conv(x, w, b, padding=1, activation=act, residual=r, scale=0.5),
                     (x, w, b, res), go)
        theirs = grads(lambda x, w, b, r: fn(0.5 * F.conv2d(x, w, None, padding=1) + b[:, None, None] + r),
                       (x, w, b, res), go)
        for o, t in zip(ours, theirs):
            torch.testing.assert_close(o, t, rtol=1e-5, atol=1e-5)


def test_aten_convolution_signature():
    x, w = torch.randn(1, 4, 6, 6), torch.randn(4, 2, 3, 3)
    out = wops.convolution(x, w, None, [2, 1], [1, 1], [1, 1], False, [0, 0], 2)
    torch.testing.assert_close(out, torch.ops.aten.convolution(x, w, None, [2, 1], [1, 1], [1, 1], False, [0, 0], 2))
    wt = torch.randn(4, 3, 2, 2)
    out = wops.convolution(x, wt, None, [2, 2], [0, 1], [1, 1], True, [1, 0], 1)
    torch.testing.assert_close(out, torch.ops.aten.convolution(x, wt, None, [2, 2], [0, 1], [1, 1], True, [1, 0], 1))


@pytest.mark.parametrize("cls, args, xs", [
    ("Conv1d", (3, 5, 3), (2, 3, 9)),
    ("Conv2d", (4, 6, 3), (1, 4, 7, 6)),
    ("Conv3d", (2, 3, (1, 2, 2)), (1, 2, 3, 4, 5)),
    ("ConvTranspose1d", (3, 4, 3), (1, 3, 5)),
    ("ConvTranspose2d", (2, 4, 3), (1, 2, 4, 3)),
    ("ConvTranspose3d", (2, 2, 2), (1, 2, 2, 3, 2)),
])
def test_nn_drop_ins(cls, args, xs):
    torch.manual_seed(0)
    extra = {"stride": 2, "padding": 1}
    if cls.startswith("ConvTranspose"):
        extra["output_padding"] = 1
    theirs = getattr(torch.nn, cls)(*args, **extra)
    ours = getattr(wnn, cls)(*args, **extra)
    ours.load_state_dict(theirs.state_dict())
    assert isinstance(ours, getattr(torch.nn, cls))
    x = torch.randn(xs)
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


def test_conv_padding_modes_other_than_zeros():
    torch.manual_seed(0)
    for mode in ("reflect", "replicate", "circular"):
        theirs = torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode=mode)
        ours = wnn.Conv2d(3, 4, 3, padding=1, padding_mode=mode)
        ours.load_state_dict(theirs.state_dict())
        x = torch.randn(1, 3, 5, 6)
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_fold_batch_norm_matches_conv_then_bn_eval(dtype):
    from warpsmith.ops.conv.spec import CONV

    g = torch.Generator().manual_seed(4)
    conv = torch.nn.Conv2d(4, 6, 3, padding=1).double()
    bn = torch.nn.BatchNorm2d(6).double().eval()
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(6, generator=g))
        bn.running_var.copy_(torch.rand(6, generator=g) + 0.5)
        bn.weight.copy_(torch.randn(6, generator=g))
        bn.bias.copy_(torch.randn(6, generator=g))
    x = torch.randn(2, 4, 5, 7, generator=g, dtype=torch.float64)
    with torch.no_grad():
        w, b = wops.fold_batch_norm(conv.weight.to(dtype), conv.bias.to(dtype), bn.running_mean, bn.running_var,
                                    bn.weight, bn.bias, bn.eps)
    out = wops.conv(x.to(dtype), w, b, padding=1, activation="relu")
    with torch.no_grad():
        ref = F.relu(bn(conv(x.to(dtype).double())))
    # the contract of the folded conv, on the folded (rounded) weights: the fold's own rounding of
    # w and b is one more rounding of each operand, counted as u_operand-sized relative error
    p = CONV.problem({"N": 2, "C": 4, "K": 6, "H": 5, "W": 7, "KH": 3, "KW": 3}, dtype,
                     {"pad_h": 1, "pad_end_h": 1, "pad_w": 1, "pad_end_w": 1, "bias": True, "activation": "relu"})
    from dataclasses import replace

    contract = replace(CONV.contract(p), u_operand=UNIT_ROUNDOFF_OF[dtype])
    inputs64 = {"x": x.to(dtype).double(), "w": w.double(), "bias": b.double()}
    scale = CONV.error_scale(inputs64, p.attrs)
    ok, msg = contract.check(out, ref, scale)
    assert ok, msg


def test_errors_name_what_was_expected():
    x, w = torch.randn(1, 4, 5, 5), torch.randn(3, 2, 3, 3)
    with pytest.raises(InvalidInputError, match="channels"):
        wops.conv(x, w)  # C_in 4 vs w's 2 with groups=1
    with pytest.raises(InvalidInputError, match="same"):
        wops.conv(x, torch.randn(3, 4, 3, 3), padding="same", stride=2)
    with pytest.raises(InvalidInputError, match="output_padding"):
        wops.conv_transpose(x, torch.randn(4, 2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(InvalidInputError, match="dtype"):
        wops.conv(x.double(), torch.randn(3, 4, 3, 3).double())
    with pytest.raises(InvalidInputError, match="geometry"):
        wops.conv(torch.randn(1, 4, 2, 2), torch.randn(3, 4, 3, 3))


# ---- an empty batch (issue 27, item 4) -----------------------------------------------------------------------
@pytest.mark.parametrize("transposed", [False, True])
def test_empty_batch_gives_an_empty_output_and_zero_weight_gradients_without_a_launch(monkeypatch, transposed):
    """nn.Conv2d takes N = 0 (an empty output, zero weight and bias gradients); warpsmith refused it ("every
    dimension >= 1"). Now the same, with no kernel launched (forward or backward)."""
    import importlib

    conv_op = importlib.import_module("warpsmith.ops.conv.op")

    monkeypatch.setattr(conv_op, "launch", lambda *a, **k: pytest.fail("a kernel was launched"))
    monkeypatch.setattr(conv_op, "launch_wgrad", lambda *a, **k: pytest.fail("a kernel was launched"))
    torch.manual_seed(0)
    t = (torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1) if transposed
         else torch.nn.Conv2d(4, 6, 3, stride=2, padding=1))
    mod = (wnn.ConvTranspose2d(4, 6, 3, stride=2, padding=1) if transposed
           else wnn.Conv2d(4, 6, 3, stride=2, padding=1))
    mod.load_state_dict(t.state_dict())
    for layout in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(0, 4, 9, 9).to(memory_format=layout).requires_grad_()
        y, ref = mod(x), t(x)
        assert y.shape == ref.shape and y.dtype == ref.dtype
        gx, gw, gb = torch.autograd.grad(y.sum(), (x, mod.weight, mod.bias))
        assert gx.shape == x.shape and torch.equal(gw, torch.zeros_like(t.weight)) and torch.equal(gb, torch.zeros(6))
    fn = wops.conv_transpose if transposed else wops.conv
    x = torch.randn(0, 4, 9, 9)
    wt = t.weight.detach()
    y = fn(x, wt, t.bias.detach(), stride=2, padding=1, activation="silu",
           residual=torch.zeros(ref.shape))
    assert y.shape == ref.shape
    with pytest.raises(InvalidInputError, match="sizes"):  # other empty dimensions are still refused
        fn(torch.randn(1, 4, 0, 9), wt, stride=2, padding=1)
