"""warpsmith.ops.swiglu / geglu: correctness under the contract, forms, strides, gradients,
torch.compile, errors."""
import pytest
import torch

import warpsmith.ops as wops
from warpsmith.errors import InvalidInputError
from warpsmith.ops.activation.variant import Tiled
from warpsmith.core.opspec import as_tuple
from warpsmith.ops import get_op


def check(op, attrs, inputs, out):
    """``out`` (any leading dims) against the spec's reference on the 2-D view of the inputs."""
    spec = get_op(op)
    flat = {k: v.reshape(-1, v.shape[-1]) for k, v in inputs.items()}
    some = next(iter(flat.values()))
    h = flat["dy"].shape[1] if "dy" in flat else (some.shape[1] // 2 if "x" in flat else some.shape[1])
    p = spec.problem({"M": some.shape[0], "H": h}, some.dtype, attrs)
    ref64, scale = (as_tuple(x) for x in spec.oracle(flat, p.attrs))
    refs = as_tuple(spec.reference(flat, p.attrs))
    for o, c, r64, s, r in zip(as_tuple(out), as_tuple(spec.contract(p)), ref64, scale, refs):
        ok, msg = c.check(o.reshape(r64.shape), r64, s, r)
        assert ok, msg


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_swiglu_and_geglu_any_leading_dims_both_forms(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 2 * 19, generator=g).to(dtype)
    y = wops.swiglu(x)
    assert y.shape == (2, 3, 19) and y.dtype == dtype
    check("swiglu", {"packed": True}, {"x": x}, y)
    gate, up = torch.randn(7, 33, generator=g).to(dtype), torch.randn(7, 33, generator=g).to(dtype)
    for approx in ("none", "tanh"):
        check("geglu", {"approximate": approx}, {"gate": gate, "up": up}, wops.geglu(gate, up, approximate=approx))
    assert torch.equal(wops.swiglu(x[..., :19], x[..., 19:]), y)  # the two forms agree bitwise


def test_strided_rows_run_in_place_and_transposed_inputs_are_copied(monkeypatch):
    seen = []
    real = Tiled.launch

    def spy(self, inputs, problem, config, out=None):
        seen.append({k: v.stride() for k, v in inputs.items()})
        return real(self, inputs, problem, config, out)

    monkeypatch.setattr(Tiled, "launch", spy)
    big = torch.randn(3, 4, 50)
    gate, up = big[..., :20], big[..., 25:45]  # leading dims flatten to one row stride of 50
    check("swiglu", {}, {"gate": gate, "up": up}, wops.swiglu(gate, up))
    assert seen[-1] == {"gate": (50, 1), "up": (50, 1)}
    t = torch.randn(20, 6).t()  # last dim not contiguous: copied
    check("geglu", {}, {"gate": t, "up": t}, wops.geglu(t, t))
    assert seen[-1] == {"gate": (20, 1), "up": (20, 1)}


@pytest.mark.parametrize("op, dtype, packed", [("swiglu", torch.float32, True), ("geglu", torch.bfloat16, False),
                                               ("geglu", torch.float16, True)])
def test_gradients_match_the_backward_reference(op, dtype, packed):
    g = torch.Generator().manual_seed(1)
    fn = getattr(wops, op)
    kw = {"approximate": "tanh"} if dtype == torch.float16 else {}
    if packed:
        x = torch.randn(3, 5, 24, generator=g).to(dtype).requires_grad_()
        y = fn(x, **kw)
    else:
        gate = torch.randn(4, 17, generator=g).to(dtype).requires_grad_()
        up = torch.randn(4, 17, generator=g).to(dtype).requires_grad_()
        y = fn(gate, up, **kw)
    dy = torch.randn(y.shape, generator=g).to(dtype)
    y.backward(dy)
    attrs = {"packed": packed, **kw}
    if packed:
        check(op + "_backward", attrs, {"dy": dy, "x": x.detach()}, x.grad)
    else:
        check(op + "_backward", attrs, {"dy": dy, "gate": gate.detach(), "up": up.detach()}, (gate.grad, up.grad))


def test_custom_ops_under_torch_compile_without_graph_break():
    def f(x, gate, up):
        return wops.swiglu(x) * 2 + wops.geglu(gate, up, approximate="tanh")

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    x, gate, up = torch.randn(5, 24).half(), torch.randn(5, 12).half(), torch.randn(5, 12).half()
    torch.testing.assert_close(compiled(x, gate, up), f(x, gate, up))
    assert hasattr(torch.ops.warpsmith, "swiglu_backward") and hasattr(torch.ops.warpsmith, "geglu")


@pytest.mark.parametrize("call, fragment", [
    (lambda: wops.swiglu(torch.randn(4, 5)), "even size 2H"),
    (lambda: wops.swiglu(torch.randn(4, 6), torch.randn(4, 5)), r"shape of up: expected \(4, 6\)"),
    (lambda: wops.swiglu(torch.randn(4, 6).half(), torch.randn(4, 6)), "dtype of up"),
    (lambda: wops.swiglu(torch.randn(4, 6, dtype=torch.float64)), "dtype of gate"),
    (lambda: wops.swiglu(torch.randn(0, 6)), "non-empty"),
    (lambda: wops.swiglu([[1.0, 2.0]]), "torch.Tensor"),
    (lambda: wops.geglu(torch.randn(4, 6), approximate="erf"), "approximate"),
    (lambda: wops.geglu(torch.randn(4, 6), torch.randn(4, 6, device="meta")), "device of up"),
])
def test_bad_input_is_refused_with_a_clear_message(call, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        call()
