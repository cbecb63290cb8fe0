"""The flag protocol (warpsmith.comm.protocol) model-checked: every interleaving of N ranks over S
consecutive steps, for every (N, S) in modelcheck.BOUNDS (N 1..4 with 12 steps, 5 with 8): no
deadlock, no bad read; and planted bugs (a missing wait, a wait for the wrong step) found."""
import pytest

from warpsmith.comm import protocol
from warpsmith.comm.modelcheck import BOUNDS, TILE_BOUNDS, check


@pytest.mark.parametrize("world,steps", BOUNDS)
def test_protocol_has_no_deadlock_and_no_bad_read(world, steps):
    res = check(world, steps)
    assert res.ok, (res.summary(), res.bad_reads[:3], res.deadlocks[:3], res.trace)
    assert res.states > world * steps  # it explored interleavings, not one schedule


def test_missing_ready_wait_is_found_as_read_before_write():
    res = check(2, 1, bug="no_wait_ready")
    assert not res.ok and not res.deadlocks
    assert any("read before write" in b for b in res.bad_reads)
    assert res.trace[-1].startswith("rank ") and "read step 1" in res.trace[-1]


def test_missing_done_wait_is_found_as_overwrite_before_read():
    """Without WAIT_DONE a fast rank overwrites its buffer for step 2 while a peer still reads step 1:
    it takes two steps to show, so one step finds nothing."""
    assert check(3, 1, bug="no_wait_done").ok
    res = check(3, 2, bug="no_wait_done")
    assert any("overwritten before read" in b for b in res.bad_reads), res.summary()


def test_waiting_for_the_wrong_step_is_found_as_deadlock():
    res = check(2, 1, bug="wait_ready_ahead")
    assert res.deadlocks and not res.bad_reads
    assert res.trace[-1] == "deadlock"


def test_program_is_the_documented_state_machine():
    ops = protocol.step_program(1, 3, 2)
    assert [o.kind for o in ops] == ["wait_done", "write", "raise_ready", "wait_ready", "read", "read", "read",
                                     "raise_done"]
    assert [o.peer for o in ops if o.kind == "read"] == [1, 2, 0]
    assert protocol.step_program(0, 2, 1)[0].kind == "write"  # no previous step to wait for
    with pytest.raises(ValueError):
        protocol.step_program(0, 2, 1, bug="nonsense")


@pytest.mark.parametrize("world,steps,kinds,tiles", TILE_BOUNDS)
def test_tile_steps_mixed_with_plain_steps_have_no_deadlock_and_no_bad_read(world, steps, kinds, tiles):
    res = check(world, steps, kinds=kinds, tiles=tiles)
    assert res.ok, (res.summary(), res.bad_reads[:3], res.deadlocks[:3], res.trace)
    assert res.states > world * steps


@pytest.mark.parametrize("bug", ["no_wait_tile", "tile_flag_before_write"])
def test_a_missing_tile_wait_or_a_flag_raised_before_its_tile_is_a_read_before_write(bug):
    res = check(2, 1, bug=bug, kinds="t", tiles=1)
    assert not res.deadlocks and any("read_tile" in b and "read before write" in b for b in res.bad_reads), \
        res.summary()


def test_a_tile_step_without_the_done_wait_overwrites_a_plain_steps_buffer_before_it_is_read():
    assert check(3, 2, kinds="ft", tiles=1).ok
    res = check(3, 2, bug="no_wait_done", kinds="ft", tiles=1)
    assert any("overwritten before read" in b for b in res.bad_reads), res.summary()


def test_tile_program_is_the_documented_state_machine():
    ops = protocol.tile_step_program(1, 2, 3, tiles=2)
    assert [(o.kind, o.peer, o.tile) for o in ops] == [
        ("wait_done", -1, -1),
        ("write_tile", 0, 0), ("raise_tile", 0, 0), ("write_tile", 0, 1), ("raise_tile", 0, 1),
        ("write_tile", 1, 0), ("raise_tile", 1, 0), ("write_tile", 1, 1), ("raise_tile", 1, 1),
        ("wait_tile", 0, 0), ("read_tile", 0, 0), ("wait_tile", 1, 0), ("read_tile", 1, 0),
        ("wait_tile", 0, 1), ("read_tile", 0, 1), ("wait_tile", 1, 1), ("read_tile", 1, 1),
        ("raise_done", -1, -1)]
