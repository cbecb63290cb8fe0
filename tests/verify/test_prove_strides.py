"""In-bounds index by index (verify/symbolic/termwise.py) and selects made by float data (lang.py).

A flat offset split into a 3-d index by division and remainder, read through free strides, is
beyond z3 as one claim (products of unbounded symbols) and proved index by index; the rule must
not prove an access that is out of bounds.
"""
import importlib.util
import sys

import pytest
import z3

from warpsmith.verify.symbolic import LaunchContract, Tensor, cdiv, prove, sizes

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def gather3(x_ptr, y_ptr, NUMEL, D0, D1, D2, s0, s1, s2, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    i2 = offs % D2
    r = offs // D2
    i1 = r % D1
    i0 = r // D1
    x = tl.load(x_ptr + (i0 + SHIFT) * s0 + i1 * s1 + i2 * s2, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x, mask=mask)


@triton.jit
def data_select(x_ptr, y_ptr, N, BLOCK: tl.constexpr, INDEX: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.where(x != x, 0.0, tl.where(x > 0, x, 0.0))  # NaN-propagating selects on float data
    if INDEX:  # an address chosen by data: either index, no telling which
        j = tl.where(x > 0, offs, offs + 1)
        y = tl.load(x_ptr + j, mask=mask, other=0.0)
    tl.store(y_ptr + offs, y, mask=mask)
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("strides") / "stride_kernels.py"
    path.write_text(KERNELS)
    spec = importlib.util.spec_from_file_location("stride_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["stride_kernels"] = module
    spec.loader.exec_module(module)
    return module


def _gather(kernels, shift):
    D0, D1, D2, NUMEL, s0, s1, s2 = sizes("D0 D1 D2 NUMEL s0 s1 s2")
    return LaunchContract(
        kernel=kernels.gather3, grid=lambda c: (cdiv(NUMEL, c["BLOCK"]),),
        args={"x_ptr": Tensor((D0, D1, D2), (s0, s1, s2)), "y_ptr": Tensor((NUMEL,), (1,), output=True),
              "NUMEL": NUMEL, "D0": D0, "D1": D1, "D2": D2, "s0": s0, "s1": s1, "s2": s2},
        constexprs=[{"SHIFT": shift, "BLOCK": 128}],
        domain=[NUMEL == D0 * D1 * D2, NUMEL < 2**31, s0 < 2**31, s1 < 2**31, s2 < 2**31])


def test_a_3d_index_through_free_strides_is_proved_index_by_index(kernels):
    obs = [o for r in prove(_gather(kernels, 0), timeout_ms=1500) for o in r.obligations]
    load = [o for o in obs if o.name == "in_bounds" and "x_ptr" in o.subject]
    assert load and load[0].status == "proved" and "index by index" in load[0].detail, obs


def test_the_split_does_not_prove_an_index_one_past_its_dim(kernels):
    obs = [o for r in prove(_gather(kernels, 1), timeout_ms=1500) for o in r.obligations]
    load = [o for o in obs if o.name == "in_bounds" and "x_ptr" in o.subject][0]
    assert load.status == "failed" and load.counterexample["offset"] > load.counterexample["span"], load


def test_selects_made_by_float_data(kernels):
    N = z3.Int("N")

    def contract(index):
        return LaunchContract(kernel=kernels.data_select, grid=lambda c: (cdiv(N, c["BLOCK"]),),
                              args={"x_ptr": Tensor((N,), (1,)), "y_ptr": Tensor((N,), (1,), output=True), "N": N},
                              constexprs=[{"BLOCK": 64, "INDEX": index}], domain=[N < 2**30])

    obs = [o for r in prove(contract(False), timeout_ms=1500) for o in r.obligations]
    assert obs and all(o.status == "proved" for o in obs), [(o.name, o.status, o.detail) for o in obs]
    # the data may pick offs + 1 = N: out of bounds, found as such
    obs = [o for r in prove(contract(True), timeout_ms=1500) for o in r.obligations]
    gather = [o for o in obs if o.name == "in_bounds" and o.subject.startswith("load #1")][0]
    assert gather.status == "failed", gather
