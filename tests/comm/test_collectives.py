"""The collectives on CPU worlds of 2, 3 and 4 processes (shared-memory symmetric buffers, Triton
kernels under the interpreter) against torch.distributed with gloo."""
import pytest
import torch

import comm_workers as cw
from warpsmith import comm
from warpsmith.comm.local import run_world
from warpsmith.errors import InvalidInputError, UnknownNameError


@pytest.fixture(scope="module")
def worlds():
    """The spawned worlds, each run once (a spawn costs seconds): ``worlds(2)``, ``worlds(3)`` (also
    the fused kernel and the int8 all-reduce), ``worlds(4)``, ``worlds("fallbacks")``. Module-scoped,
    so pytest-xdist keeps this module's tests on one worker (tests/conftest.py)."""
    cache: dict = {}

    def get(key):
        if key not in cache:
            if key == "fallbacks":
                cache[key] = run_world(cw.fallbacks, 2)
            elif key == 3:
                cache[key] = run_world(cw.collectives_and_fused, 3)
            else:
                cache[key] = [(checks, None, None) for checks in run_world(cw.collectives, key)]
        return cache[key]
    return get


# 4 ranks (a spawn of its own, about 12 CPU-s) in the full tier: the same kernels run on 2 and 3 ranks here
@pytest.mark.parametrize("world", [2, 3, pytest.param(4, marks=pytest.mark.slow)])
def test_collectives_match_gloo(worlds, world):
    assert [r[0] for r in worlds(world)] == [len(cw.DTYPES) * 10] * world


def test_fused_all_reduce_add_rms_norm_matches_unfused(worlds):
    worst = [r[1][0] for r in worlds(3)]
    assert all(0 <= w <= 8 for w in worst), worst


def test_fused_fp8_output_meets_its_error_contract(worlds):
    """The e4m3 output (values + per-row scale) against an fp64 RMSNorm of the new residual, within
    half an e4m3 ulp per element (comm_workers.fp8_out_ratio), using a good part of the bound."""
    worst = [r[1][1] for r in worlds(3)]
    assert all(0.05 < w <= 1.0 for w in worst), worst


@pytest.mark.parametrize("fmt", ["int8", "fp8"])
def test_quantized_all_reduce_meets_its_error_contract(worlds, fmt):
    """Within comm_workers.wire_bound per element (checked on every rank, every dtype), and the
    error is real: the worst element uses a good part of the bound (a test that cannot fail would not)."""
    worst = [r[2][fmt] for r in worlds(3)]
    assert all(0.05 < w <= 1.0 for w in worst), worst


@pytest.mark.parametrize("fmt,qmax", [("int8", 100.0), ("fp8", 600.0)])
def test_the_wire_contract_catches_a_wrong_scale(tmp_path, monkeypatch, fmt, qmax):
    """One rank (no process group): the quantized all-reduce meets comm_workers.wire_bound, and with a
    planted wrong scale (max|x| / qmax: int8 and e4m3 saturate) it does not: the check can fail."""
    from warpsmith.comm import runtime
    from warpsmith.comm.symmetric import SymmetricWorld

    w = SymmetricWorld(tmp_path, 0, 1, 1 << 12).create().map()
    x = torch.randn(300, generator=torch.Generator().manual_seed(0))
    x[5] = 40.0

    def ratio() -> float:
        err = (runtime.all_reduce_quantized(w, x, fmt).double() - x.double()).abs()
        return (err / cw.wire_bound(x.double()[None], fmt, torch.float32)).max().item()
    assert 0.05 < ratio() <= 1.0
    monkeypatch.setitem(runtime.WIRE, fmt, (runtime.WIRE[fmt][0], qmax))
    assert ratio() > 1.0
    w.close()


def test_fallbacks_say_why(worlds):
    reasons = worlds("fallbacks")[0]
    assert "131072 bytes" in reasons[0] and "65536" in reasons[0]
    assert "torch.int64" in reasons[1]
    assert "no symmetric buffers" in reasons[2]


def test_mismatched_collectives_are_named_not_silently_mixed(worlds):
    (m0, b0), (m1, b1) = [r[3:] for r in worlds("fallbacks")]
    assert m0 == ("rank 0: at step 1 this rank issued all_reduce_one_shot of 32 bytes of torch.float32, but "
                  "rank 1 issued all_reduce_one_shot of 24 bytes of torch.float32")
    assert "rank 1: at step 1" in m1 and "rank 0 issued all_reduce_one_shot of 32 bytes" in m1
    assert "unusable after an earlier failure" in b0 and "unusable" in b1


def test_a_dead_rank_is_named_not_waited_for():
    out = run_world(cw.dies_mid_collective, 3, comm_timeout_s=2.0, timeout_s=60)
    assert out[2] is None
    for msg, elapsed in out[:2]:
        assert "rank 2 (its ready flag is at step 0)" in msg and "step 1" in msg, msg
        assert 2.0 <= elapsed < 10.0, elapsed


def test_matmul_reduce_scatter_matches_gloo_on_2_ranks():
    """Every dtype, 37 and 1 output rows (uneven; rank 1 of the 1-row case owns nothing)."""
    out = run_world(cw.matmul_reduce_scatter, 2)
    assert [c for c, _ in out] == [2 * len(cw.DTYPES)] * 2
    assert all(0.001 < w <= 1.0 for _, w in out), out  # within the contract, with real error


def test_matmul_reduce_scatter_on_3_ranks_and_a_dead_rank_is_named():
    """3 ranks, uneven K shards, 37 and 2 rows; then the last rank dies before pushing its tiles:
    the others' kernels stop polling its tile flags and raise CommTimeoutError naming it."""
    out = run_world(cw.matmul_reduce_scatter_then_die, 3, comm_timeout_s=2.0, timeout_s=120)
    assert out[2] is None
    for checks, (msg, elapsed) in out[:2]:
        assert checks == 2 * len(cw.DTYPES)
        assert "waiting for tile flags" in msg and "missing rank 2 (its tile flag is at step" in msg, msg
        assert elapsed < 60.0, elapsed


def test_the_in_kernel_flag_all_reduce_matches_gloo_on_3_ranks():
    assert run_world(cw.in_kernel, 3) == [6 * len(cw.DTYPES)] * 3


def test_the_cuda_world_says_why_it_cannot_be_built_here():
    """No GPU here: the CUDA world (torch's symmetric-memory allocator) refuses with the reason; the
    path itself has never run."""
    from warpsmith.comm.cuda import CudaWorld, available

    assert available() == "no CUDA device"
    with pytest.raises(InvalidInputError, match="expected CUDA and torch.distributed._symmetric_memory, got "
                                                "'no CUDA device'"):
        CudaWorld(None, 1 << 16, 1.0, "nvlink")


def test_bad_input_names_expected_and_given():
    with pytest.raises(InvalidInputError, match="expected a torch.Tensor, got 'list'"):
        comm.all_reduce([1.0])
    with pytest.raises(UnknownNameError, match="one of one_shot, ring, two_shot"):
        comm.all_reduce(torch.ones(2), algorithm="tree")
    with pytest.raises(UnknownNameError, match="one of fp8, int8"):
        comm.all_reduce(torch.ones(2), quantize="fp4")
    with pytest.raises(InvalidInputError, match="expected None or one_shot, got 'ring'"):
        comm.all_reduce(torch.ones(2), algorithm="ring", quantize="int8")
    with pytest.raises(InvalidInputError, match=r"expected \[M, K\] and \[N, K\] \(the same K\), got '\(2, 3\) and \(4, 2\)'"):
        comm.matmul_reduce_scatter(torch.ones(2, 3), torch.ones(4, 2))
    with pytest.raises(InvalidInputError, match="weight dtype: expected torch.float32, got torch.float16"):
        comm.matmul_reduce_scatter(torch.ones(2, 3), torch.ones(4, 3, dtype=torch.float16))
    with pytest.raises(InvalidInputError, match="at least one dimension"):
        comm.reduce_scatter(torch.tensor(1.0))
    with pytest.raises(InvalidInputError, match=r"expected at least 3 \(one per rank\), got 2"):
        comm.RowParallelLinear.from_linear(torch.nn.Linear(2, 2), 0, 3)
    with pytest.raises(UnknownNameError, match="one of fp8"):
        comm.all_reduce_add_rms_norm(torch.ones(2, 4), torch.ones(2, 4), torch.ones(4), quantize_output="int8")
    with pytest.raises(InvalidInputError, match=r"weight: expected shape \(4,\)"):
        comm.all_reduce_add_rms_norm(torch.ones(2, 4), torch.ones(2, 4), torch.ones(3))


def test_the_model_picks_one_shot_for_small_and_two_shot_for_large_messages():
    assert comm.choose("all_reduce", 1024, 4) == "one_shot"
    assert comm.choose("all_reduce", 1 << 26, 4) == "two_shot"
    assert comm.choose("all_gather", 1 << 26, 4) == "one_shot"  # the only one implemented
    assert comm.choose("all_reduce", 1 << 26, 8, topology="pcie") == "ring"


def test_the_runtime_executes_the_model_checked_state_machine(tmp_path, monkeypatch):
    """One rank (world 1, no process group needed): the operations the runtime runs for a two-shot
    all-reduce are protocol.program's, in order; and the flags end at the last step."""
    from warpsmith.comm import protocol, runtime
    from warpsmith.comm.symmetric import SymmetricWorld

    w = SymmetricWorld(tmp_path, 0, 1, 1 << 12).create().map()
    seen = []
    monkeypatch.setattr(runtime, "FAULT", lambda world, op: seen.append(op))
    x = torch.randn(5, dtype=torch.bfloat16)
    assert torch.equal(runtime.all_reduce_two_shot(w, x), x)
    assert torch.equal(runtime.all_reduce_one_shot(w, x), x)
    assert seen == protocol.program(0, 1, 3)
    assert w.signal[:2].tolist() == [[3], [3]]
    w.close()


def test_the_runtime_executes_the_model_checked_tile_step(tmp_path, monkeypatch):
    """One rank: matmul_reduce_scatter runs protocol.tile_step_program's operations, in order, for its
    tile count (3 x 2 tiles of 16 for a [37, 19] output), and its result is the GEMM's."""
    from warpsmith.comm import protocol, runtime
    from warpsmith.comm.symmetric import SymmetricWorld

    w = SymmetricWorld(tmp_path, 0, 1, 1 << 14).create().map()
    seen = []
    monkeypatch.setattr(runtime, "FAULT", lambda world, op: seen.append(op))
    x, wt = torch.randn(37, 6), torch.randn(19, 6)
    torch.testing.assert_close(runtime.matmul_reduce_scatter(w, x, wt), x @ wt.T)
    assert seen == protocol.tile_step_program(0, 1, 1, [6]) and len(seen) == 2 * 6 + 2 * 6 + 1  # no done wait at step 1
    assert w.tile_flags[0][0, :7].tolist() == [1] * 6 + [0]
    w.close()


def test_row_parallel_linear_and_the_all_reduce_drop_in():
    for diffs in run_world(cw.tensor_parallel, 2):
        assert max(diffs) < 1e-5, diffs
