"""Fused linear cross-entropy: one call's kernel launches are bounded. launch_count (what the memory
cost model charges) equals the launches the launcher really makes, counted on tiny problems, and no
config of the space at Llama-3's vocabulary launches more than MAX_LAUNCHES kernels."""
import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from triton.runtime.interpreter import InterpretedFunction

from warpsmith.cost.cost import predict_ms
from warpsmith.ops import get_op, get_variant
from warpsmith.ops.cross_entropy.fused_variant import MAX_CHUNKS, MAX_LAUNCHES
from warpsmith.targets import get_target

H100 = get_target("h100")
OPS = ("fused_linear_cross_entropy", "fused_linear_cross_entropy_backward")


class CountLaunches(TorchDispatchMode):
    """Triton kernel launches (the interpreter's runs) and torch ops that launch a kernel on a GPU (not
    views, not allocations), outside Triton's own bookkeeping."""

    def __init__(self, monkeypatch):
        super().__init__()
        self.triton, self.torch, self.inside = 0, collections.Counter(), 0
        run = InterpretedFunction.run

        def counted(fn, *args, **kwargs):
            self.triton += not kwargs.get("warmup")
            self.inside += 1
            try:
                return run(fn, *args, **kwargs)
            finally:
                self.inside -= 1

        monkeypatch.setattr(InterpretedFunction, "run", counted)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.inside and not func.is_view and func.overloadpacket not in (
                torch.ops.aten.empty, torch.ops.aten.empty_strided):
            self.torch[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self):
        return self.triton + sum(self.torch.values())


CASES = [(op, attrs) for op in OPS for attrs in (
    {"grads": "all", "bias": True, "reduction": "mean"}, {"grads": "all", "reduction": "sum"},
    {"grads": "all", "bias": True, "reduction": "none"}, {"grads": "hidden", "reduction": "mean"})] + [
    ("fused_linear_cross_entropy", {"grads": "none", "reduction": "mean"}),
    ("fused_linear_cross_entropy", {"grads": "none", "reduction": "none"})]


@pytest.mark.parametrize("op, attrs", CASES)
def test_launch_count_is_what_the_launcher_launches(op, attrs, monkeypatch):
    spec, v = get_op(op), get_variant(op, "chunked")
    p = spec.problem({"M": 13, "H": 8, "V": 40}, "float32", attrs)
    cfg = {"CHUNK": 8, "VCHUNK": 16, "BLOCK_V": 64, "ROWS": 4, "num_warps": 1}  # 2 row chunks, 3 vocabulary chunks
    inputs = spec.make_inputs(p, torch.Generator().manual_seed(0))
    counter = CountLaunches(monkeypatch)
    with counter:
        v.launch(inputs, p, cfg)
    assert counter.total == v.launch_count(p, cfg) == v.work(p, cfg, H100).launches, (counter.triton, counter.torch)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("grads", ["all", "hidden"])
def test_no_config_at_a_128k_vocabulary_launches_more_than_the_cap(op, grads):
    v = get_variant(op, "chunked")
    p = get_op(op).problem({"M": 8192, "H": 4096, "V": 128256}, "bfloat16",
                           {"grads": grads, "bias": True, "reduction": "mean"})
    space = v.space(p, H100)
    worst = max(v.launch_count(p, c) for c in space.enumerate())
    assert worst <= MAX_LAUNCHES == 2243
    if grads == "all":
        assert worst > MAX_LAUNCHES - 100  # the cap is what the space's smallest chunks reach
    d = v.default_config(p, H100)
    assert d == space.default() and v.rejection(p, d, H100) is None
    assert v.launch_count(p, d) <= MAX_LAUNCHES // 4
    # the old space's smallest chunks (1024 row chunks; with the weight's gradient 1024 x 2004 blocks, two
    # GEMMs each): rejected, never predicted
    old = {**d, "CHUNK": 8, "VCHUNK": 64}
    assert v.launch_count(p, old) > (1000 * MAX_LAUNCHES if grads == "all" else MAX_LAUNCHES)
    assert f"at most {MAX_CHUNKS} chunks" in v.rejection(p, old, H100) and predict_ms(v, p, old, H100) == float("inf")
    # the cost model charges launches: fewer, larger chunks predict faster at the same traffic per GEMM
    few, many = {**d, "CHUNK": 1024, "VCHUNK": 8192}, {**d, "CHUNK": 256, "VCHUNK": 4096}
    assert v.rejection(p, few, H100) is None and v.rejection(p, many, H100) is None
    assert v.work(p, many, H100).launches == v.launch_count(p, many) > v.launch_count(p, few)
