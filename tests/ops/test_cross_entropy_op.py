"""warpsmith.ops.cross_entropy / fused_linear_cross_entropy: forward and gradients against the specs under
their contracts, in-place backward, torch.compile, dispatch from the DB, peak memory, bad input."""
import pytest
import torch
import torch.nn.functional as F

import warpsmith.ops as wops
from warpsmith.db import TuningDB, TuningRecord
from warpsmith.errors import InvalidInputError
from warpsmith.ops import get_variant
from warpsmith.dispatch import clear_cache, select
from warpsmith.ops.cross_entropy import VARIANTS
from warpsmith.ops.cross_entropy.op import ce_problem, flce_problem
from warpsmith.core.settings import settings
from warpsmith.core.opspec import as_tuple
from warpsmith.ops import get_op
from warpsmith.targets import fingerprint


def check(op, inputs, attrs, outs, dtype, shape):
    spec = get_op(op)
    p = spec.problem(shape, dtype, attrs)
    ref64, scale = (as_tuple(r) for r in spec.oracle(inputs, p.attrs))
    refs = as_tuple(spec.reference(inputs, p.attrs))
    for out, r, s, rr, c in zip(as_tuple(outs), ref64, scale, refs, as_tuple(spec.contract(p))):
        ok, msg = c.check(out.detach().reshape(r.shape), r, s, rr)
        assert ok, (op, msg)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_forward_and_gradient(dtype, reduction):
    logits = torch.randn(2, 3, 37, dtype=dtype, requires_grad=True)  # leading dims flattened to 6 rows
    target = torch.randint(0, 37, (2, 3))
    target[1, 0] = -100
    attrs = {"reduction": reduction, "label_smoothing": 0.1}
    loss = wops.cross_entropy(logits, target, label_smoothing=0.1, reduction=reduction)
    assert loss.dtype == dtype and loss.shape == (() if reduction != "none" else (2, 3))
    x, t = logits.detach().reshape(6, 37), target.reshape(6)
    check("cross_entropy", {"logits": x, "target": t}, attrs, (loss,), dtype, {"M": 6, "V": 37})
    g = torch.randn_like(loss)
    loss.backward(g)
    full = get_op("cross_entropy").problem({"M": 6, "V": 37}, dtype, attrs).attrs
    stats = get_op("cross_entropy").reference({"logits": x, "target": t}, full)[1]
    check("cross_entropy_backward", {"logits": x, "target": t, "stats": stats, "grad": g.reshape(-1) if
                                     reduction == "none" else g}, attrs, (logits.grad.reshape(6, 37),), dtype,
          {"M": 6, "V": 37})


def test_non_contiguous_inputs_and_one_row():
    base = torch.randn(40, 5)
    logits = base.t()  # (5, 40), column stride 5: read through its strides
    target = torch.randint(0, 40, (10,))[::2]
    loss = wops.cross_entropy(logits, target, reduction="none")
    torch.testing.assert_close(loss, F.cross_entropy(logits, target, reduction="none"))
    one = torch.randn(11)
    torch.testing.assert_close(wops.cross_entropy(one, torch.tensor(4)), F.cross_entropy(one, torch.tensor(4)))


def test_inplace_backward_is_opt_in_and_safe():
    t = torch.randint(0, 40, (6,))
    z = torch.randn(6, 40, requires_grad=True)
    logits = z * 2
    before = logits.detach().clone()
    wops.cross_entropy(logits, t).backward()
    assert torch.equal(logits.detach(), before)  # default: the logits are never written
    z2 = z.detach().clone().requires_grad_()
    logits = z2 * 2
    wops.cross_entropy(logits, t, inplace_backward=True).backward()
    ref = before.clone().requires_grad_()
    F.cross_entropy(ref, t).backward()
    torch.testing.assert_close(logits.detach(), ref.grad)  # the gradient now lives in the logits' memory
    torch.testing.assert_close(z2.grad, z.grad)
    leaf = before.clone().requires_grad_()
    wops.cross_entropy(leaf, t, inplace_backward=True).backward()
    assert torch.equal(leaf.detach(), before)  # a user's leaf tensor is never overwritten
    z3 = z.detach().clone().requires_grad_()
    logits = z3 * 2
    loss = (logits ** 2).sum() + wops.cross_entropy(logits, t, inplace_backward=True)  # pow saved the logits
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_under_torch_compile_without_graph_break():
    def f(x, t):
        return wops.cross_entropy(x, t, label_smoothing=0.1) * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    x = torch.randn(5, 30, requires_grad=True)
    t = torch.randint(0, 30, (5,))
    out = compiled(x, t)
    out.backward()
    x2 = x.detach().clone().requires_grad_()
    ref = f(x2, t)
    ref.backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, x2.grad)
    assert hasattr(torch.ops.warpsmith, "cross_entropy") and hasattr(torch.ops.warpsmith, "fused_linear_cross_entropy")


@pytest.mark.parametrize("dtype, reduction, bias", [(torch.bfloat16, "mean", True), (torch.float32, "none", False),
                                                    (torch.float16, "sum", True)])
def test_fused_linear_cross_entropy_forward_and_gradients(dtype, reduction, bias):
    h = torch.randn(2, 5, 16, dtype=dtype, requires_grad=True)
    w = torch.randn(40, 16, dtype=dtype, requires_grad=True)
    b = torch.randn(40, dtype=dtype, requires_grad=True) if bias else None
    t = torch.randint(0, 40, (2, 5))
    t[0, 3] = -100
    attrs = {"reduction": reduction, "bias": bias, "label_smoothing": 0.05}
    loss = wops.fused_linear_cross_entropy(h, w, t, b, label_smoothing=0.05, reduction=reduction)
    assert loss.dtype == dtype and loss.shape == (() if reduction != "none" else (2, 5))
    inputs = {"hidden": h.detach().reshape(10, 16), "weight": w.detach(), "target": t.reshape(10)}
    if bias:
        inputs["bias"] = b.detach()
    shape = {"M": 10, "H": 16, "V": 40}
    check("fused_linear_cross_entropy", inputs, {**attrs, "grads": "none"}, (loss,), dtype, shape)
    g = torch.randn_like(loss)
    loss.backward(g)
    grads = (h.grad.reshape(10, 16), w.grad) + ((b.grad,) if bias else ())
    assert all(x.dtype == dtype for x in grads)
    check("fused_linear_cross_entropy_backward", {**inputs, "grad": g.reshape(-1) if reduction == "none" else g},
          attrs, grads, dtype, shape)


def test_fused_gradients_only_where_needed():
    h = torch.randn(6, 8, requires_grad=True)
    w = torch.randn(20, 8)  # a frozen head: only the hidden states' gradient is computed
    t = torch.randint(0, 20, (6,))
    wops.fused_linear_cross_entropy(h, w, t).backward()
    h2 = h.detach().clone().requires_grad_()
    F.cross_entropy(F.linear(h2, w), t).backward()
    torch.testing.assert_close(h.grad, h2.grad)
    with torch.no_grad():
        loss = wops.fused_linear_cross_entropy(h, w, t)
    assert not loss.requires_grad
    torch.testing.assert_close(loss, F.cross_entropy(F.linear(h, w), t).detach())


def _put(problem, variant, config):
    v = get_variant(problem.op, variant)
    TuningDB().put(TuningRecord(op=problem.op, variant=variant, shape=dict(problem.shape), dtype=problem.dtype_name,
                                attrs=problem.key_attrs, target=settings().target, config=config,
                                fingerprint=fingerprint(v.source_hash()), timing_kind="predicted", time_ms=0.01,
                                baseline_ms=None, verified=True, certificate={"verdict": "accepted"}))
    clear_cache()


def test_dispatch_uses_a_record_for_every_label_smoothing():
    x, t = torch.randn(6, 100), torch.randint(0, 100, (6,))
    p = ce_problem(x, -100, 0.1, "mean")
    assert select(p, VARIANTS).source == "default" and select(p, VARIANTS).variant.name == "single"
    _put(p, "looped", {"ROWS": 2, "BLOCK_V": 64, "num_warps": 2})
    other = ce_problem(x, 5, 0.3, "mean")  # scalars are runtime arguments, not part of the key
    assert (select(other, VARIANTS).source, select(other, VARIANTS).variant.name) == ("db", "looped")
    torch.testing.assert_close(wops.cross_entropy(x, t, ignore_index=5, label_smoothing=0.3),
                               F.cross_entropy(x, t, ignore_index=5, label_smoothing=0.3))


def allocations(fn) -> list[int]:
    """The bytes each op allocated while ``fn`` ran (the profiler sees inside custom ops, which a
    dispatch mode would not: it is suspended while the custom op it intercepted runs)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return [e.self_cpu_memory_usage for e in prof.events() if e.self_cpu_memory_usage > 0]


def largest_allocation(fn) -> int:
    return max(allocations(fn))


def test_fused_path_never_allocates_the_logits():
    # the largest allocation is one of the two chunk buffers, (chunk, V) of phase 1 or (M, vchunk) of
    # phase 2 (never both at once), never the (M, V) logits, never a (V, H) fp32 weight-gradient sum
    M, H, V, chunk, vchunk = 64, 12, 96, 16, 32
    t = torch.randint(0, V, (M,))
    for dtype in (torch.float32, torch.bfloat16):
        h = torch.randn(M, H, dtype=dtype, requires_grad=True)
        w = torch.randn(V, H, dtype=dtype, requires_grad=True)
        cfg = {"CHUNK": chunk, "VCHUNK": vchunk, "BLOCK_V": 128, "ROWS": 16, "num_warps": 4}
        for reduction in ("mean", "none"):
            _put(flce_problem(h, w, None, -100, 0.0, reduction, "all" if reduction == "mean" else "none"),
                 "chunked", cfg)
        _put(flce_problem(h, w, None, -100, 0.0, "none", "all", backward=True), "chunked", cfg)
        e = dtype.itemsize
        logits_bytes, phase1, phase2 = M * V * e, chunk * V * e, M * vchunk * e
        for reduction in ("mean", "none"):
            fused = allocations(lambda: wops.fused_linear_cross_entropy(h, w, t, reduction=reduction).sum().backward())
            unfused = largest_allocation(
                lambda: F.cross_entropy(F.linear(h, w), t, reduction=reduction).sum().backward())
            assert unfused >= logits_bytes
            assert max(fused) == max(phase1, phase2) < logits_bytes, (dtype, reduction, max(fused))
            assert phase1 in fused and phase2 in fused, (dtype, reduction, sorted(set(fused)))
            if dtype != torch.float32:  # (in float32 the weight's gradient itself has that size)
                assert V * H * 4 not in fused, (reduction, sorted(set(fused)))  # no (V, H) fp32 sum
        assert select(flce_problem(h, w, None, -100, 0.0, "mean", "all"), VARIANTS).config["CHUNK"] == chunk


@pytest.mark.parametrize("call, fragment", [
    (lambda: wops.cross_entropy(torch.randn(4, 5).double(), torch.zeros(4, dtype=torch.long)), "dtype of logits"),
    (lambda: wops.cross_entropy(torch.randn(4, 5), torch.zeros(4)), "torch.int64 class indices"),
    (lambda: wops.cross_entropy(torch.randn(4, 5), torch.zeros(3, dtype=torch.long)),
     r"shape of target: expected \(4,\)"),
    (lambda: wops.cross_entropy(torch.randn(4, 5), torch.tensor([0, 1, 5, 2])), r"class indices in \[0, 5\)"),
    (lambda: wops.cross_entropy(torch.randn(4, 5), torch.tensor([0, 1, -3, 2])), "-3 at"),
    (lambda: wops.cross_entropy(torch.randn(4, 5), torch.zeros(4, dtype=torch.long), label_smoothing=2.0),
     "label_smoothing"),
    (lambda: wops.cross_entropy(torch.randn(4, 5), torch.zeros(4, dtype=torch.long), reduction="avg"), "reduction"),
    (lambda: wops.cross_entropy(torch.randn(4, 5), torch.zeros(4, dtype=torch.long), ignore_index=True),
     "ignore_index"),
    (lambda: wops.cross_entropy(torch.randn(0, 5), torch.zeros(0, dtype=torch.long)), "non-empty"),
    (lambda: wops.cross_entropy([[1.0]], torch.zeros(1, dtype=torch.long)), "torch.Tensor"),
    (lambda: wops.cross_entropy(torch.randn(4, 5), torch.zeros(4, dtype=torch.long, device="meta")),
     "device of target"),
    (lambda: wops.fused_linear_cross_entropy(torch.randn(4, 8), torch.randn(10, 7), torch.zeros(4, dtype=torch.long)),
     r"weight: expected a 2-D \(V, 8\)"),
    (lambda: wops.fused_linear_cross_entropy(torch.randn(4, 8), torch.randn(10, 8).half(),
                                             torch.zeros(4, dtype=torch.long)), "dtype of weight"),
    (lambda: wops.fused_linear_cross_entropy(torch.randn(4, 8), torch.randn(10, 8), torch.zeros(4, dtype=torch.long),
                                             bias=torch.randn(9)), r"shape of bias: expected \(10,\)"),
    (lambda: wops.fused_linear_cross_entropy(torch.randn(4, 8), torch.randn(10, 8), torch.full((4,), 10)),
     r"class indices in \[0, 10\)"),
])
def test_bad_input_is_refused_with_a_clear_message(call, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        call()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_strided_upstream_gradient_with_reduction_none(dtype):
    """loss (M,) gets a gradient that is a strided view (every other element of a longer tensor, and
    an expanded one of stride 0): the backward must read it through its stride."""
    logits = torch.randn(7, 29, dtype=dtype, requires_grad=True)
    target = torch.randint(0, 29, (7,))
    attrs = {"reduction": "none", "label_smoothing": 0.0}
    full = get_op("cross_entropy").problem({"M": 7, "V": 29}, dtype, attrs).attrs
    x = logits.detach()
    stats = get_op("cross_entropy").reference({"logits": x, "target": target}, full)[1]
    for g in (torch.randn(14, dtype=dtype)[::2], torch.randn(1, dtype=dtype).expand(7)):
        assert g.stride(0) != 1
        logits.grad = None
        wops.cross_entropy(logits, target, reduction="none").backward(g)
        check("cross_entropy_backward", {"logits": x, "target": target, "stats": stats, "grad": g.contiguous()},
              attrs, (logits.grad,), dtype, {"M": 7, "V": 29})
