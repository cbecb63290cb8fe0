"""`warpsmith check`, red team: settings that are not cheats, side streams, and tests that kill
planted bugs in the verifier's own code (``scripts/mutate.py``).

- Settings a candidate may change in its own process (deterministic algorithms, tf32, the float32
  matmul precision, the default dtype) are not patches: the guard does not report them, and they
  cannot blind what the child's own harness code computes (:mod:`warpsmith.check.guards`).
- A side stream is rejected for its own class (``async_work``): on a GPU when work is left on it
  after the call's current stream has finished; on a CPU when the candidate asks for one (creating
  it raises there), and only then.
"""
import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest
import torch

from warpsmith.check import check
from warpsmith.check.compare import as_bytes, bitwise_equal, judge, shares_memory, snapshot
from warpsmith.check.guards import PatchGuard, PoisonEmpty, poison_allocator, side_stream_attempt
from warpsmith.core.error_contract import ErrorContract

ZOO = Path(__file__).parents[1] / "verify" / "zoo"
RMSNORM = ZOO / "rmsnorm"
SOFTMAX = (ZOO / "softmax.py", ["batch_size=6", "dim=40"])
GPU = torch.cuda.is_available()


def softmax(candidate):
    return check(SOFTMAX[0], ZOO / candidate, overrides=SOFTMAX[1])


def rmsnorm(candidate):
    return check(RMSNORM, RMSNORM / "solutions" / candidate)


def failed(report):
    return [c.text for c in report.checks if c.status == "failed"]


# ---- settings that change only the candidate's own numbers -------------------------------------
# the quick tier checks one (each is a sandboxed check of about 8 s); every setting is also in
# softmax_flags_late_worker.py (below) and in the guard's own tests (SETTINGS)
@pytest.mark.parametrize("candidate", [pytest.param("softmax_flag_deterministic.py", marks=pytest.mark.slow),
                                       pytest.param("softmax_flag_tf32.py", marks=pytest.mark.slow),
                                       pytest.param("softmax_flag_precision.py", marks=pytest.mark.slow),
                                       "softmax_flag_default_dtype.py"])
def test_numeric_settings_at_import_are_not_patches(candidate):
    report = softmax(candidate)
    assert report.verdict == "accepted", failed(report)
    assert report.check("no_patching").text == "passed" and not failed(report)


def test_numeric_settings_do_not_blind_the_harness():
    """Every unreported setting at once, and outputs zeroed after they were returned: still caught."""
    report = softmax("softmax_flags_late_worker.py")
    assert report.reason == "async_work", failed(report)


SETTINGS = [
    ("deterministic", lambda: torch.use_deterministic_algorithms(True)),
    ("tf32", lambda: (setattr(torch.backends.cuda.matmul, "allow_tf32", True),
                      setattr(torch.backends.cudnn, "allow_tf32", True))),
    ("precision", lambda: torch.set_float32_matmul_precision("medium")),
    ("default_dtype", lambda: torch.set_default_dtype(torch.float64)),
    ("default_dtype_half", lambda: torch.set_default_dtype(torch.bfloat16)),
]


@pytest.mark.parametrize("name, change", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_the_guard_does_not_report_numeric_settings_and_restores_them(name, change):
    before = (torch.are_deterministic_algorithms_enabled(), torch.get_default_dtype(), torch.Storage,
              torch.backends.cudnn.allow_tf32)
    guard = PatchGuard()
    try:
        change()
        assert guard.changes() == []  # torch.Storage follows the default dtype: not a patch either
    finally:
        guard.restore()
    assert (torch.are_deterministic_algorithms_enabled(), torch.get_default_dtype(), torch.Storage,
            torch.backends.cudnn.allow_tf32) == before


@pytest.mark.parametrize("name, change", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_the_childs_own_comparisons_hold_under_every_numeric_setting(name, change):
    """What the child computes with torch for its observations (snapshots, bytewise comparisons,
    memory overlap, poisoning) gives the same answers whatever the candidate set."""
    guard = PatchGuard()
    try:
        change()
        a = torch.linspace(-3, 3, 48, dtype=torch.float32).reshape(6, 8)
        b = a.clone()
        b.view(-1)[17] = torch.nextafter(b.view(-1)[17], torch.tensor(10.0, dtype=torch.float32))  # one ulp
        assert bitwise_equal(a, a.clone()) and not bitwise_equal(a, b)
        assert not bitwise_equal(a, a.to(torch.float64)) and not bitwise_equal(a, None)
        s = snapshot(a)
        assert s.dtype == torch.float32 and s.stride() == a.stride() and torch.equal(as_bytes(s), as_bytes(a))
        assert shares_memory(a, a[2:]) and not shares_memory(a, s)
        poison_allocator([a.numel() * 4], torch.device("cpu"))
        with PoisonEmpty():
            e = torch.empty(6, 8, dtype=torch.float32)
        assert bool(torch.isnan(e).all())
    finally:
        guard.restore()


def test_the_guard_still_reports_what_can_change_the_verdict():
    guard = PatchGuard()
    original_time, original_elapsed = time.perf_counter, torch.cuda.Event.elapsed_time
    try:
        torch.use_deterministic_algorithms(True)
        time.perf_counter = lambda: 0.0
        torch.cuda.Event.elapsed_time = lambda self, end: 0.0
        torch.Storage = torch.HalfStorage  # not what the default dtype binds
        sys.settrace(lambda *a: None)
        changes = guard.changes()
    finally:
        sys.settrace(None)
        guard.restore()
    assert "time.perf_counter was replaced" in changes
    assert any("Event.elapsed_time was replaced" in c for c in changes)
    assert "torch.Storage was replaced" in changes
    assert any(c.startswith("sys.gettrace()") for c in changes)
    assert not any("deterministic" in c for c in changes)
    assert time.perf_counter is original_time and torch.cuda.Event.elapsed_time is original_elapsed
    assert not torch.are_deterministic_algorithms_enabled()


def test_a_mode_left_on_the_stack_is_still_reported():
    from torch.overrides import TorchFunctionMode

    guard = PatchGuard()
    mode = TorchFunctionMode()
    mode.__enter__()
    try:
        assert any(c.startswith("torch function mode stack changed") for c in guard.changes())
    finally:
        guard.restore()
    assert not any("mode stack" in c for c in guard.changes())


# ---- side streams ----------------------------------------------------------------------------
@pytest.mark.parametrize("candidate", ["hack_side_stream.json", "hack_stream_import.json"])
def test_a_side_stream_is_async_work_on_any_machine(candidate):
    report = rmsnorm(candidate)
    assert report.reason == "async_work", failed(report)
    message = report.check("synchronous").message
    assert "side stream" in message
    if not GPU:
        assert "torch.cuda.Stream" in message and report.check("runs").status != "failed"


def test_only_a_side_stream_is_async_work():
    """Joined to the caller's stream: right on a GPU (nothing left behind); on a CPU the stream it asks
    for cannot exist, which is the side stream's class. A synchronize that raises on a CPU is no side
    stream: candidate_error there, accepted on a GPU."""
    joined, sync = rmsnorm("side_stream_joined.json"), rmsnorm("sync_only.json")
    if GPU:  # pragma: no cover - no GPU in CI
        assert joined.verdict == "accepted", failed(joined)
        assert sync.verdict == "accepted", failed(sync)
    else:
        assert joined.reason == "async_work", failed(joined)
        assert sync.reason == "candidate_error", failed(sync)


def _raised(fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return e
    raise AssertionError("expected the call to raise on a machine without CUDA")


@pytest.mark.skipif(GPU, reason="on a GPU these calls succeed; the streams themselves are watched there")
def test_side_stream_attempts_are_told_from_other_cuda_errors():
    def wrapped():
        try:
            torch.cuda.Stream()
        except RuntimeError:
            raise ValueError("no stream") from None  # the original stays in __context__

    side = [lambda: torch.cuda.Stream(), lambda: torch.cuda.Stream(priority=-1),
            lambda: torch.cuda.ExternalStream(0x1234), wrapped]
    other = [torch.cuda.synchronize, torch.cuda.current_stream, torch.cuda.default_stream, torch.cuda.Event,
             lambda: torch.cuda.ExternalStream(0), lambda: torch.cuda.ExternalStream(2),  # default streams' handles
             lambda: torch.cuda.Stream(stream_id=0, device_index=0, device_type=1),
             lambda: 1 / 0]
    assert all(side_stream_attempt(_raised(f)) for f in side)
    assert [side_stream_attempt(_raised(f)) for f in other] == [None] * len(other)


def _script():
    path = Path(__file__).parents[2] / "scripts" / "check_sol_execbench.py"
    spec = importlib.util.spec_from_file_location("check_sol_execbench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_sol_execbench_script_runs_the_stream_injection_sample_for_its_class(tmp_path):
    (tmp_path / "tests/sol_execbench/samples/rmsnorm").mkdir(parents=True)
    hacks = tmp_path / "tests/samples/rmsnorm"
    hacks.mkdir(parents=True)
    for name in ("stream_injection", "thread_injection", "monkey_patch", "lazy_output", "something_new"):
        (hacks / f"solution_hack_{name}.json").write_text("{}")
    (hacks / "solution_triton.json").write_text("{}")
    problem, found = _script().samples(tmp_path)
    assert problem == tmp_path / "tests/sol_execbench/samples/rmsnorm"
    codes = {h.name: c for h, c in found}
    assert codes["solution_hack_stream_injection.json"] == ("async_work",)
    assert codes["solution_hack_thread_injection.json"] == ("async_work",)
    assert codes["solution_hack_monkey_patch.json"] == ("monkey_patch",)
    assert codes["solution_hack_something_new.json"] == ()
    assert "solution_triton.json" not in codes


# ---- killers of planted bugs (scripts/mutate.py) ------------------------------------------------
def test_an_output_that_cannot_be_reread_as_returned_is_a_late_change():
    """The re-read after the calls gets nothing back for an output that became a subclass after it was
    returned (right, and a plain tensor, at return): that is a change, not an absence of evidence."""
    report = softmax("softmax_late_subclass.py")
    assert report.reason == "async_work", failed(report)
    assert "changed after the calls" in report.check("synchronous").message


def test_the_error_is_measured_against_the_fp64_oracle_not_the_working_dtype_reference():
    d = 2.0**-10
    oracle = torch.ones(4, dtype=torch.float64)
    ref = torch.full((4,), 1 + d, dtype=torch.float32)  # the reference's own error: d
    beyond = torch.full((4,), 1 + 4.5 * d, dtype=torch.float32)  # 4.5 d from the oracle, 3.5 d from ref
    inside = torch.full((4,), 1 - 3.5 * d, dtype=torch.float32)  # 3.5 d from the oracle, 4.5 d from ref
    ok, msg = judge(beyond, ref, oracle)
    assert not ok and "vs the fp64 oracle" in msg
    ok, msg = judge(inside, ref, oracle)
    assert ok, msg


def test_the_error_contract_scales_by_each_elements_own_magnitude():
    """``u_out |y|`` per element: a small element may not take the slack of the largest one."""
    contract = ErrorContract(out_dtype="float32", u_out=2.0**-24, u_acc=2.0**-24, reduction_len=1, ref_factor=None)
    ref64 = torch.tensor([1.0e6, 1.0], dtype=torch.float64)
    scale = torch.zeros(2, dtype=torch.float64)
    assert contract.check(ref64.to(torch.float32), ref64, scale)[0]
    off = torch.tensor([1.0e6, 1.0 + 2.0**-10], dtype=torch.float32)  # 1e-3 off at |y| = 1: far over u_out |y|
    ok, msg = contract.check(off, ref64, scale)
    assert not ok and "at (1,)" in msg
