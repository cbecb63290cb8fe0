"""The search with the memory-bound cost model, end to end on predicted times (no kernel runs):
it finds configs near the roofline where the variants allow it, and picks the variant the shape needs."""
import math
import random

import pytest

from warpsmith.ops import variants
from warpsmith.measure import Evaluator
from warpsmith.cost.roofline import roofline
from warpsmith.tune import _prescreen, search
from warpsmith.space import JointSpace
from warpsmith.ops import get_op
from warpsmith.targets import get_target

H100 = get_target("h100")


def best(op: str, shape: str):
    spec = get_op(op)
    p = spec.problem(shape, "bfloat16")
    vs = variants(op)
    space = JointSpace({n: v.space(p, H100) for n, v in vs.items()})
    ev = Evaluator(spec, p, vs, H100, measured=False)
    scores = search(space, ev, "evolutionary", budget=48, seed=0,
                    initial=_prescreen(space, ev, 48, random.Random(0)))
    win = min((s for s in scores if math.isfinite(s.ms)), key=lambda s: s.ms)
    return win, roofline(spec, p, H100).bound_ms / win.ms


@pytest.mark.parametrize("op,shape", [("rms_norm", "M=16384,N=4096"), ("softmax", "M=65536,N=1024"),
                                      ("cross_entropy", "M=8192,V=128256")])
def test_streaming_shapes_reach_most_of_the_roofline(op, shape):
    _, fraction = best(op, shape)
    assert 0.8 <= fraction <= 1.0


def test_long_rows_go_to_the_looped_variants():
    assert best("softmax", "M=64,N=262144")[0].variant == "online"
    assert best("rms_norm", "M=64,N=262144")[0].variant == "looped"
