"""warpsmith.ops.softmax / log_softmax: forward and gradients against the specs' references, any
leading dims and strides, dispatch, torch.compile, bad input."""
import pytest
import torch

import warpsmith.ops as wops
from warpsmith.db import TuningDB, TuningRecord
from warpsmith.errors import InvalidInputError
from warpsmith.ops import get_variant
from warpsmith.dispatch import clear_cache, select
from warpsmith.ops.softmax import VARIANTS
from warpsmith.ops.softmax.op import problem_of
from warpsmith.core.settings import settings
from warpsmith.ops import get_op
from warpsmith.targets import fingerprint

FNS = {"softmax": wops.softmax, "log_softmax": wops.log_softmax}


def check(op, out, inputs):
    """``out`` (any leading dims) against the spec's reference under its contract."""
    spec = get_op(op)
    rows = {k: v.reshape(-1, v.shape[-1]) for k, v in inputs.items()}
    p = spec.problem({"M": next(iter(rows.values())).shape[0], "N": out.shape[-1]}, out.dtype)
    ref64, scale = spec.oracle(rows, {})
    c = spec.contract(p)
    ok, msg = c.check(out.reshape(-1, out.shape[-1]), ref64, scale, spec.reference(rows, {}),
                      spec.perturbed_oracle(rows, {}, c.u_acc))
    assert ok, msg


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_forward_and_gradient_every_dtype(op, dtype):
    x = torch.randn(2, 3, 37, dtype=dtype, requires_grad=True)
    y = FNS[op](x)
    assert y.shape == x.shape and y.dtype == dtype and y.is_contiguous()
    check(op, y, {"x": x.detach()})
    dy = torch.randn_like(y)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert dx.shape == x.shape and dx.dtype == dtype
    # against the backward spec (the saved output and the upstream gradient) under its contract
    check(op + "_backward", dx, {"y": y.detach(), "dy": dy})
    # and end to end against torch.autograd through the float64 reference
    x64 = x.detach().double().requires_grad_()
    (dx64,) = torch.autograd.grad(get_op(op).reference({"x": x64}, {}), x64, dy.double())
    # bounded by the op's contracts, not a blanket tolerance: the backward's contract at the exact y,
    # plus the forward's contract bound E on y propagated through the exact backward
    fwd, bwd = get_op(op), get_op(op + "_backward")
    dt = str(dtype).replace("torch.", "")
    x64r, dy64 = x64.detach().reshape(-1, 37), dy.double().reshape(-1, 37)
    y64 = fwd.reference({"x": x64r}, {})
    e = fwd.contract(fwd.problem({"M": 6, "N": 37}, dt)).allowed(y64, fwd.error_scale({"x": x64r}, {}))
    if op == "softmax":  # dx = y (dy - sum(y dy))
        prop = e * (dy64.abs() + (y64 * dy64).sum(-1, keepdim=True).abs()) + \
            y64.abs() * (e * dy64.abs()).sum(-1, keepdim=True)
    else:  # dx = dy - exp(y) sum(dy)
        prop = y64.exp() * (e.exp() - 1) * dy64.sum(-1, keepdim=True).abs()
    bwd_allowed = bwd.contract(bwd.problem({"M": 6, "N": 37}, dt)).allowed(
        dx64.reshape(-1, 37), bwd.error_scale({"y": y64, "dy": dy64}, {}))
    allowed = bwd_allowed + prop
    err = (dx.double() - dx64).abs().reshape(-1, 37)
    assert bool((err <= allowed).all()), float((err / allowed).max())


@pytest.mark.parametrize("n", [1, 2, 131, 300])
def test_odd_row_lengths(n):
    x = torch.randn(5, n).half()
    check("softmax", wops.softmax(x), {"x": x})
    check("log_softmax", wops.log_softmax(x), {"x": x})


def test_non_contiguous_inputs():
    x = torch.randn(40, 6).T  # (6, 40), column stride 6: handed to the kernel as is
    check("softmax", wops.softmax(x), {"x": x})
    x3 = torch.randn(4, 30, 5, dtype=torch.bfloat16).permute(0, 2, 1)  # (4, 5, 30): reshape copies
    y3 = wops.log_softmax(x3)
    assert y3.shape == (4, 5, 30)
    check("log_softmax", y3, {"x": x3})
    g = torch.randn(5, 4, 30, dtype=torch.bfloat16).transpose(0, 1)  # a non-contiguous upstream gradient
    xr = x3.detach().requires_grad_()
    (dx,) = torch.autograd.grad(wops.log_softmax(xr), xr, g)
    check("log_softmax_backward", dx, {"y": y3, "dy": g})


def test_nan_and_inf_rows_as_torch():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[0.5, inf, 1.0], [0.5, -inf, 1.0], [-inf, -inf, -inf], [nan, 1.0, 2.0]])
    for op, fn in FNS.items():
        out, ref = fn(x), getattr(torch, op)(x, -1)
        assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.isinf(), ref.isinf())
        torch.testing.assert_close(out[1], ref[1])


def test_dispatch_defaults_and_a_tuned_record():
    assert select(get_op("softmax").problem({"M": 64, "N": 1024}, "float16"), VARIANTS).variant.name == "single_pass"
    assert select(get_op("log_softmax").problem({"M": 64, "N": 262144}, "float16"), VARIANTS).variant.name == "online"
    assert select(get_op("softmax_backward").problem({"M": 8, "N": 262144}, "bfloat16"), VARIANTS).variant.name == "online"
    x = torch.randn(3, 40).half()
    p = problem_of("softmax", x)
    assert select(p, VARIANTS).source == "default"
    cfg = {"BLOCK_N": 16, "num_warps": 1}
    rid = TuningDB().put(TuningRecord(
        op="softmax", variant="online", shape=dict(p.shape), dtype=p.dtype_name, attrs={}, target=settings().target,
        config=cfg, fingerprint=fingerprint(get_variant("softmax", "online").source_hash()), timing_kind="predicted",
        time_ms=0.01, baseline_ms=None, verified=True, certificate={"verdict": "accepted"}))
    clear_cache()
    choice = select(p, VARIANTS)
    assert (choice.source, choice.record_id, choice.variant.name) == ("db", rid, "online")
    check("softmax", wops.softmax(x), {"x": x})


def test_custom_ops_under_torch_compile_without_graph_break():
    def f(x):
        return wops.softmax(x) * 2 + wops.log_softmax(x)

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    x = torch.randn(3, 24).half()
    torch.testing.assert_close(compiled(x), f(x))
    xg = torch.randn(2, 24, requires_grad=True)
    compiled(xg).sum().backward()
    x64 = xg.detach().double().requires_grad_()
    (torch.softmax(x64, -1) * 2 + torch.log_softmax(x64, -1)).sum().backward()
    torch.testing.assert_close(xg.grad.double(), x64.grad, rtol=1e-5, atol=1e-5)
    for name in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward"):
        assert hasattr(torch.ops.warpsmith, name)


def test_fake_tensors_give_shapes_without_running():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(2, 7, 50, dtype=torch.bfloat16)
        y = torch.ops.warpsmith.softmax(x)
        dx = torch.ops.warpsmith.log_softmax_backward(y, y)
    assert y.shape == (2, 7, 50) and y.dtype == torch.bfloat16 and dx.shape == (2, 7, 50)


@pytest.mark.parametrize("arg, fragment", [
    ([[1.0, 2.0]], "torch.Tensor"),
    (torch.tensor(1.0), "at least 1 dimension"),
    (torch.empty(3, 0), "non-empty"),
    (torch.randn(2, 3, dtype=torch.float64), "dtype of x"),
    (torch.arange(6).reshape(2, 3), "dtype of x"),
    (torch.randn(2, 3, device="meta"), "device of x"),
])
def test_bad_input_is_refused_with_a_clear_message(arg, fragment):
    for fn in FNS.values():
        with pytest.raises(InvalidInputError, match=fragment):
            fn(arg)
