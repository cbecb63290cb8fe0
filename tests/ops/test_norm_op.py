"""warpsmith.ops.rms_norm / layer_norm: forward and gradients against the specs' references under
their contracts, leading dims and strides, torch.compile, dispatch from the DB, bad inputs."""
import pytest
import torch
import torch.nn.functional as F

import warpsmith.ops as wops
from warpsmith.db import TuningDB, TuningRecord
from warpsmith.errors import InvalidInputError
from warpsmith.ops import get_variant
from warpsmith.dispatch import clear_cache, select
from warpsmith.ops.norm import VARIANTS
from warpsmith.ops.norm.op import problem_of
from warpsmith.core.settings import settings
from warpsmith.core.opspec import as_tuple
from warpsmith.ops import get_op
from warpsmith.targets import fingerprint

DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def check(op, outs, inputs, attrs):
    spec = get_op(op)
    p = spec.problem({"M": inputs["x"].shape[0], "N": inputs["x"].shape[1]}, inputs["x"].dtype, attrs)
    ref64, scale = spec.oracle(inputs, p.attrs)
    refs, contracts = spec.reference(inputs, p.attrs), spec.contract(p)
    for i, out in enumerate(as_tuple(outs)):
        ok, msg = contracts[i].check(out.reshape(ref64[i].shape), ref64[i], scale[i], refs[i])
        assert ok, f"{op} output {i}: {msg}"


def rows(t):
    return t.detach().reshape(-1, t.shape[-1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_forward_and_gradients(dtype):
    x = torch.randn(2, 3, 45, dtype=dtype, requires_grad=True)
    r = torch.randn(2, 3, 45, dtype=dtype, requires_grad=True)
    w = torch.randn(45, dtype=dtype, requires_grad=True)
    y, s = wops.rms_norm(x, w, eps=1e-5, residual=r)
    assert y.shape == s.shape == x.shape and y.dtype == s.dtype == dtype
    attrs = {"residual": True, "eps": 1e-5}
    spec = get_op("rms_norm")
    p = spec.problem({"M": 6, "N": 45}, dtype, attrs)
    inputs = {"x": rows(x), "residual": rows(r), "weight": w.detach()}
    check("rms_norm", (y, s), inputs, attrs)
    dy, ds = torch.randn_like(y), torch.randn_like(s)
    torch.autograd.backward((y, s), (dy, ds))
    assert x.grad.dtype == dtype and torch.equal(x.grad, r.grad)  # the residual's gradient is dx
    xs = rows(s)
    rstd = spec.reference(inputs, p.attrs)[2]
    bwd = {"dy": rows(dy), "x": xs, "weight": w.detach(), "rstd": rstd, "ds": rows(ds)}
    check("rms_norm_backward", (rows(x.grad), w.grad), bwd, {"residual": True, "eps": 1e-5})


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_forward_and_gradients_with_fp32_parameters(dtype):
    x = torch.randn(5, 38, dtype=dtype, requires_grad=True)
    w = torch.randn(38, requires_grad=True)
    b = torch.randn(38, requires_grad=True)
    y = wops.layer_norm(x, w, b)
    assert y.dtype == dtype
    attrs = {"weight_dtype": "float32"}
    spec = get_op("layer_norm")
    p = spec.problem({"M": 5, "N": 38}, dtype, attrs)
    inputs = {"x": x.detach(), "weight": w.detach(), "bias": b.detach()}
    ref64, scale = spec.oracle(inputs, p.attrs)
    refs = spec.reference(inputs, p.attrs)
    assert spec.contract(p)[0].check(y.detach(), ref64[0], scale[0], refs[0])[0]
    dy = torch.randn_like(y)
    y.backward(dy)
    assert w.grad.dtype == b.grad.dtype == torch.float32
    bwd = {"dy": dy, "x": x.detach(), "weight": w.detach(), "mean": refs[1], "rstd": refs[2]}
    check("layer_norm_backward", (x.grad, w.grad, b.grad), bwd, attrs)
    # and the values agree with PyTorch's own layer norm
    torch.testing.assert_close(y.float(), F.layer_norm(x.detach().float(), (38,), w.detach(), b.detach()),
                               rtol=2e-2, atol=2e-2)


def test_without_parameters_and_bias_only():
    x = torch.randn(4, 17, requires_grad=True)
    y = wops.rms_norm(x)
    torch.testing.assert_close(y, F.rms_norm(x.detach(), (17,), eps=1e-6))
    y.sum().backward()  # an expanded upstream gradient (row stride 0)
    x64 = x.detach().double().requires_grad_()
    F.rms_norm(x64, (17,), eps=1e-6).sum().backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-4, atol=1e-5)
    b = torch.randn(17, requires_grad=True)
    x.grad = None
    y = wops.layer_norm(x, bias=b)
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(b.grad, torch.full((17,), 4.0))


def test_strided_and_sliced_inputs_match_contiguous_ones():
    base = torch.randn(3, 4, 50).half()
    x = base[..., 5:45]  # rows with a gap: read in place
    xt = torch.randn(40, 6).half().T  # columns strided: copied
    w = torch.randn(80).half()[::2]  # strided weight: copied
    for t in (x, xt):
        torch.testing.assert_close(wops.rms_norm(t, w), wops.rms_norm(t.contiguous(), w.contiguous()), rtol=0, atol=0)
        torch.testing.assert_close(wops.layer_norm(t, w, w), wops.layer_norm(t.contiguous(), w.contiguous(),
                                                                             w.contiguous()), rtol=0, atol=0)


def test_custom_ops_under_torch_compile_without_graph_break():
    def f(x, w, r):
        y, s = wops.rms_norm(x, w, residual=r)
        return y * 2 + s

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    x, w, r = torch.randn(3, 24).bfloat16(), torch.randn(24).bfloat16(), torch.randn(3, 24).bfloat16()
    torch.testing.assert_close(compiled(x, w, r), f(x, w, r))
    # and through the backward op: same gradients as eager
    leaves = [t.clone().requires_grad_() for t in (x, w, r)]
    compiled(*leaves).float().sum().backward()
    eager = [t.clone().requires_grad_() for t in (x, w, r)]
    f(*eager).float().sum().backward()
    for a, b in zip(leaves, eager):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
    for name in ("rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward"):
        assert hasattr(torch.ops.warpsmith, name)


def test_dispatch_uses_a_verified_record_for_the_shape():
    x = torch.randn(6, 40).half()
    w = torch.randn(40).half()
    p = problem_of("rms_norm", x, True, False, torch.float16, False, 1e-6)
    assert select(p, VARIANTS).source == "default" and select(p, VARIANTS).variant.name == "row"
    v = get_variant("rms_norm", "looped")
    cfg = {"BLOCK_N": 16, "num_warps": 1}
    rec = TuningRecord(op="rms_norm", variant="looped", shape=dict(p.shape), dtype="float16", attrs=p.key_attrs,
                       target=settings().target, config=cfg, fingerprint=fingerprint(v.source_hash()),
                       timing_kind="predicted", time_ms=0.001, baseline_ms=None, verified=True,
                       certificate={"verdict": "accepted"})
    rid = TuningDB().put(rec)
    clear_cache()
    choice = select(problem_of("rms_norm", x, True, False, torch.float16, False, 0.5), VARIANTS)  # another eps: same key
    assert (choice.source, choice.record_id, choice.variant.name) == ("db", rid, "looped")
    check("rms_norm", wops.rms_norm(x, w), {"x": x, "weight": w}, {})


@pytest.mark.parametrize("fn, args, kwargs, fragment", [
    ("rms_norm", ([[1.0]],), {}, "torch.Tensor"),
    ("rms_norm", (torch.randn(0, 4),), {}, "non-empty"),
    ("rms_norm", (torch.randn(3, 4, dtype=torch.float64),), {}, "dtype of x"),
    ("rms_norm", (torch.randn(3, 4), torch.randn(5)), {}, r"shape of weight: expected \(4,\)"),
    ("rms_norm", (torch.randn(3, 4).half(), torch.randn(4).bfloat16()), {}, "float16 \\(as x\\) or float32"),
    ("rms_norm", (torch.randn(3, 4),), {"eps": -1.0}, "eps"),
    ("rms_norm", (torch.randn(3, 4),), {"eps": True}, "eps"),
    ("rms_norm", (torch.randn(3, 4),), {"residual": torch.randn(3, 5)}, "shape of residual"),
    ("rms_norm", (torch.randn(3, 4).half(),), {"residual": torch.randn(3, 4)}, "dtype of residual"),
    ("rms_norm", (torch.randn(3, 4), torch.randn(4, device="meta")), {}, "device of weight"),
    ("layer_norm", (torch.randn(3, 4).half(), torch.randn(4), torch.randn(4).half()), {}, "dtype of bias"),
    ("layer_norm", (torch.randn(3, 4),), {"bias": torch.randn(4, 1)}, "shape of bias"),
])
def test_bad_input_is_refused_with_a_clear_message(fn, args, kwargs, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        getattr(wops, fn)(*args, **kwargs)
