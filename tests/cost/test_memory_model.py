"""The memory-bound cost model: the effects it claims to model move predictions the right way."""
import math

from warpsmith.cost.memory_model import MemoryWork, predict_ms, programs_per_sm
from warpsmith.targets import get_target

H100 = get_target("h100")
ROW = 4096 * 2  # one bf16 row of 4096


def rows(n: int, **kw) -> MemoryWork:
    base = dict(bytes_moved=2.0 * n * ROW, programs=n, num_warps=4, block_bytes=ROW, regs_per_thread=48)
    return MemoryWork(**{**base, **kw})


def test_large_streams_approach_the_bandwidth_bound():
    t = predict_ms(rows(65536), H100)
    ideal = 2.0 * 65536 * ROW / (H100.hbm_tbps * 1e12) * 1e3
    assert ideal < t < 1.25 * ideal


def test_more_bytes_cost_more():
    assert predict_ms(rows(8192, bytes_moved=3.0 * 8192 * ROW), H100) > predict_ms(rows(8192), H100)


def test_too_few_bytes_in_flight_are_latency_bound():
    # the same bytes in 16x smaller blocks (four times the dependent steps) is slower
    small = rows(8192, block_bytes=ROW / 16, steps=4)
    assert predict_ms(small, H100) > 1.5 * predict_ms(rows(8192), H100)


def test_occupancy_limits():
    assert programs_per_sm(rows(1, num_warps=32, regs_per_thread=32), H100) == 2  # 64 warps per SM
    assert programs_per_sm(rows(1, regs_per_thread=255, num_warps=8), H100) == 1
    assert math.isinf(predict_ms(rows(1, smem_bytes=H100.smem_per_sm + 1), H100))


def test_one_more_program_than_a_wave_costs_a_tail():
    slots = programs_per_sm(rows(1), H100) * H100.sms
    assert predict_ms(rows(slots + 1), H100) > predict_ms(rows(slots), H100)


def test_each_launch_and_the_math_floor_count():
    assert predict_ms(rows(64, launches=2), H100) - predict_ms(rows(64), H100) == \
        pytest_approx(H100.launch_us * 1e-3)
    heavy = rows(64, flops=1e12, math_kind="bf16")
    assert predict_ms(heavy, H100) > 1e12 / (H100.peak("bf16") * 1e12) * 1e3


def pytest_approx(x):
    import pytest

    return pytest.approx(x, rel=1e-9)
