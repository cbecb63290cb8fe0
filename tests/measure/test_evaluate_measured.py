"""The measured evaluator on the CPU, with the GPU-only pieces replaced (device synchronisation, the
timer, inputs made on the CPU): the rotated input sets are built once before the compile threads
start, and a batch starts no candidate once its deadline has passed."""
import math
import time as real_time
from types import SimpleNamespace

import pytest
import torch

from warpsmith.measure import Evaluator, Timing
from warpsmith.measure import evaluate as ev_mod
from warpsmith.measure import timing as timing_mod
from warpsmith.ops import get_op, variants
from warpsmith.space import JointSpace
from warpsmith.tune import search
from warpsmith.targets import get_target

H100 = get_target("h100")
OP = "cross_entropy"


class Clock:
    """A fake ``time`` module for the evaluator: time passes only when a fake timing says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def setup(monkeypatch):
    spec = get_op(OP)
    p = spec.problem({"M": 4, "V": 16}, "float32", {"reduction": "none"})
    vs = variants(OP)
    made = []
    make = spec.make_inputs

    def make_inputs(problem, gen, dist="normal", device="cpu"):
        assert device == "cuda"  # what the evaluator asks for on a GPU; made on the CPU here
        real_time.sleep(0.05)  # a large input set takes a while: other compile threads get to run
        made.append(1)
        return make(problem, gen, dist, device="cpu")

    monkeypatch.setattr(spec, "make_inputs", make_inputs)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    clock = Clock()
    monkeypatch.setattr(ev_mod, "time", SimpleNamespace(perf_counter=clock.perf_counter), raising=False)
    timed = []

    def fake_time_gpu(fn, arg_sets, **kw):  # one launch, and 2 s of (fake) time per candidate
        fn(arg_sets[0])
        clock.now += 2.0
        timed.append(1)
        return Timing(1.0, 1.0, 1.0, 1.0, 1)

    monkeypatch.setattr(ev_mod, "time_gpu", fake_time_gpu)
    space = JointSpace({n: v.space(p, H100) for n, v in vs.items()})
    ev = Evaluator(spec, p, vs, H100, measured=True, seed=3, compile_workers=8)
    points = [pt for pt in space.enumerate() if ev.predict(pt).error is None][:8]
    assert len(points) == 8
    return SimpleNamespace(spec=spec, p=p, vs=vs, ev=ev, points=points, made=made, timed=timed, clock=clock,
                           space=space, make=make)


def test_inputs_built_once_before_the_compile_threads(setup):
    s = setup
    scores = s.ev.evaluate(s.points)
    assert all(sc.error is None and sc.measured_ms == 1.0 for sc in scores), [sc.error for sc in scores]
    sets = max(1, min(4, ev_mod._ROTATE_BYTES // int(s.spec.min_bytes(s.p))))
    assert sets == 4 and len(s.made) == sets  # once per rotated set, not once per compile thread
    s.ev.evaluate(s.points)
    assert len(s.made) == sets  # and kept for later batches
    gen = torch.Generator().manual_seed(3)  # deterministic for the seed: the sets, in order
    for got in s.ev.inputs():
        want = s.make(s.p, gen, device="cpu")
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_deadline_stops_a_batch_midway(setup):
    s = setup
    scores = s.ev.evaluate(s.points, deadline=5.0)  # candidates timed at t = 0, 2, 4; none from t = 6
    assert len(s.timed) == 3
    assert [math.isfinite(sc.ms) for sc in scores] == [True] * 3 + [False] * 5
    assert all(sc.error == "deadline" and sc.measured_ms == math.inf for sc in scores[3:])


def test_deadline_passed_before_compilation_starts_nothing(setup, monkeypatch):
    s = setup
    launched = []
    for v in s.vs.values():
        monkeypatch.setattr(v, "launch", lambda *a, **k: launched.append(1))
    s.clock.now = 10.0
    scores = s.ev.evaluate(s.points, deadline=5.0)
    assert not launched and not s.timed
    assert all(sc.error == "deadline" and sc.ms == math.inf for sc in scores)


def test_search_passes_its_deadline_to_the_batch(setup):
    s = setup
    scores = search(s.space, s.ev, "random", budget=16, seed=0, initial=s.points, batch=8, deadline=5.0)
    assert len(scores) == 8 and len(s.timed) == 3  # the first batch is cut short, and no second one starts
    assert sum(sc.error == "deadline" for sc in scores) == 5


class FakeEvent:
    """A CUDA event on a fake clock (ms)."""
    clock = [0.0]

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = FakeEvent.clock[0]

    def elapsed_time(self, end):
        return end.t - self.t


@pytest.mark.parametrize("call_ms, max_ms, calls, runs", [
    (2000.0, 100.0, 2, 1),  # a very slow candidate: its first call and one timed probe, whatever max_ms
    (30.0, 100.0, 5, 3),  # first call, probe, no more warm-up (a quarter of max_ms is < one call), 3 runs
    (1.0, 100.0, 29, 25),  # fast: the full warm-up (3 calls in all), probe, 25 runs
])
def test_time_gpu_bounds_slow_calls(monkeypatch, call_ms, max_ms, calls, runs):
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(timing_mod, "_flush", lambda: None)
    made = []

    def fn(_):
        made.append(1)
        FakeEvent.clock[0] += call_ms

    t = timing_mod.time_gpu(fn, [None, None], max_ms=max_ms)
    assert (len(made), t.runs, t.median_ms) == (calls, runs, call_ms)
