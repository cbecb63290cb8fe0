"""The max / avg pooling forward's (ROWS planes, BLOCK positions) tiles (issue 29: KernelBench's pooling
problems timed out under the interpreter, one program per (n, c) plane): the compiler's library launcher
``_ws_pool`` and the ``gather`` variant against torch (1-D/2-D/3-D, padding, stride, dilation,
ceil_mode, count_include_pad, divisor_override, odd sizes, channels-last), max exactly, and the
number of programs a launch takes."""
import pytest
import torch
import torch.nn.functional as F

from warpsmith.compiler import library
from warpsmith.ops import get_op, get_variant
from warpsmith.ops.pool import kernel as K
from warpsmith.targets import get_target

H100 = get_target("h100")


class _Counting:
    """``pool_fwd_kernel`` as the launcher sees it, recording each launch's grid and constexprs."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        def run(*args, **meta):
            self.launches.append((grid, meta))
            return K.pool_fwd_kernel[grid](*args, **meta)
        return run


def _launcher(emulate=True):
    """The library's pool launcher text, run as an emitted file runs it."""
    import triton

    ns = {"torch": torch, "triton": triton, "pool_fwd_kernel": _Counting(), "_EMULATE": emulate}
    exec(library.POOL, ns)
    return ns


# (input shape, kernel, stride, padding, dilation, ceil_mode): odd sizes, every option of the launcher
CASES = [
    ((3, 5, 17), [3], [2], [1], [2], True),
    ((2, 7, 9, 11), [3, 2], [2, 1], [1, 1], [1, 2], True),
    ((2, 3, 7, 7), [2, 2], [2, 2], [0, 0], [1, 1], False),
    ((1, 3, 5, 6, 7), [2, 3, 2], [1, 2, 2], [1, 1, 0], [2, 1, 1], True),
    ((33, 31, 17), [8], [1], [4], [3], False),  # KernelBench's 41 in small: many planes, few positions
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_library_launcher_max_pool_is_exact(case):
    shape, k, s, p, d, ceil = CASES[case]
    nd = len(shape) - 2
    x = torch.randn(shape, generator=torch.Generator().manual_seed(case))
    ns = _launcher()
    y = ns["_ws_pool"](x, nd, k, s, p, d, ceil, True, True, 0)
    assert torch.equal(y, getattr(F, f"max_pool{nd}d")(x, k, s, p, d, ceil))


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("count_pad, divisor", [(True, 0), (False, 0), (True, 5)])
def test_library_launcher_avg_pool(case, count_pad, divisor):
    shape, k, s, p, _, ceil = CASES[case]
    nd = len(shape) - 2
    p = [min(pp, kk // 2) for pp, kk in zip(p, k)]  # avg pooling: padding at most half the kernel, no dilation
    x = torch.randn(shape, generator=torch.Generator().manual_seed(10 + case))
    ns = _launcher()
    y = ns["_ws_pool"](x, nd, k, s, p, [1] * nd, ceil, False, count_pad, divisor)
    args = (x, k, s, p, ceil, count_pad) + ((divisor or None,) if nd > 1 else ())
    ref = getattr(F, f"avg_pool{nd}d")(*args)
    if nd == 1 and divisor:
        ref = F.avg_pool2d(x.unsqueeze(2), [1] + k, [1] + s, [0] + p, ceil, count_pad, divisor).squeeze(2)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)


def test_library_launcher_takes_few_programs():
    """KernelBench's capped 42_Max_Pooling_2D (32 x 32 planes of 32 x 32): one launch, at most 16 programs
    under the interpreter (it was 1024, one a plane); a config given is what it launches."""
    x = torch.rand(32, 32, 32, 32)
    ns = _launcher()
    y = ns["_ws_pool"](x, 2, [4, 4], [1, 1], [1, 1], [1, 1], False, True, True, 0)
    assert torch.equal(y, F.max_pool2d(x, 4, 1, 1))
    (grid, meta), = ns["pool_fwd_kernel"].launches
    assert grid[0] * grid[1] <= 16 and meta["ROWS"] * meta["BLOCK"] <= 65536
    x1 = torch.rand(32, 32, 32)  # 41: every plane in one program
    ns["_ws_pool"](x1, 1, [8], [1], [4], [3], False, True, True, 0)
    assert ns["pool_fwd_kernel"].launches[-1][0] == (1, 1)
    y = ns["_ws_pool"](x1, 1, [8], [1], [4], [3], False, True, True, 0, (32, 4))
    assert ns["pool_fwd_kernel"].launches[-1][0] == (1, 256) and torch.equal(y, F.max_pool1d(x1, 8, 1, 4, 3))


@pytest.mark.parametrize("op, attrs, channels_last", [
    ("max_pool", {"kernel_h": 3, "kernel_w": 2, "stride_h": 2, "stride_w": 1, "padding_h": 1, "dilation_w": 2, "ceil_mode": True,
                  "return_indices": True}, True),
    ("avg_pool", {"kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2, "padding_h": 1, "padding_w": 1,
                  "ceil_mode": True, "count_include_pad": False}, False),
])
@pytest.mark.parametrize("rows", [1, 4, 8])
def test_variant_rows_configs(op, attrs, channels_last, rows):
    """The ``gather`` variant at several ROWS (the last block of planes partial: 3 x 5 planes)."""
    p = get_op(op).problem({"N": 3, "C": 5, "D": 1, "H": 7, "W": 9}, "float32", {**attrs, "channels_last": channels_last})
    v = get_variant(op, "gather")
    cfg = {"BLOCK": 32, "num_warps": 1, "ROWS": rows}
    assert v.rejection(p, cfg, H100) is None
    x = torch.randn(3, 5, 7, 9, generator=torch.Generator().manual_seed(rows))
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    out = v.launch({"x": x}, p, cfg)
    k, s, pad = (3, 2), (2, 1), (1, 0)
    if op == "max_pool":
        y, i = F.max_pool2d(x, k, s, pad, (1, 2), True, return_indices=True)
        assert torch.equal(out[0], y) and torch.equal(out[1], i)
    else:
        y = F.avg_pool2d(x, 3, 2, 1, True, False)
        torch.testing.assert_close(out[0], y, rtol=1e-5, atol=1e-6)


def test_variant_rows_space_and_validity():
    """ROWS is a knob of the max / avg forward only, priced by the cost model (fewer programs), and
    refused where it idles most of the tile, leaves the grid's axis over its limit or another op."""
    v = get_variant("max_pool", "gather")
    p = get_op("max_pool").problem({"N": 32, "C": 32, "D": 1, "H": 8, "W": 8}, "float32", {"kernel_h": 4, "kernel_w": 4})
    d = v.default_config(p, H100)
    assert d["ROWS"] == 8 and d["BLOCK"] == 32  # 4 positions a plane: the default fills its block with planes
    assert "ROWS" in v.space(p, H100).names() and v.programs(p, {**d, "ROWS": 8}) == 128
    assert v.work(p, {**d, "ROWS": 8}, H100).programs < v.work(p, {**d, "ROWS": 1}, H100).programs
    assert "tile limit" in v.rejection(p, {"BLOCK": 1024, "num_warps": 4, "ROWS": 8}, H100)
    small = get_op("max_pool").problem({"N": 1, "C": 3, "D": 1, "H": 8, "W": 8}, "float32")
    assert "idle" in v.rejection(small, {"BLOCK": 32, "num_warps": 1, "ROWS": 8}, H100)
    big = get_op("max_pool").problem({"N": 4096, "C": 64, "D": 1, "H": 2, "W": 2}, "float32")
    assert "axis limit" in v.rejection(big, {"BLOCK": 32, "num_warps": 1, "ROWS": 2}, H100)
    assert v.rejection(big, v.default_config(big, H100), H100) is None
    bwd = get_variant("max_pool_backward", "gather")
    assert "ROWS" not in bwd.space(p, H100).names()
    assert "only the max / avg forward" in bwd.rejection(p, {"BLOCK": 32, "num_warps": 1, "ROWS": 2}, H100)
