import random

import pytest

from warpsmith.space import Bool, Enum, IntRange, JointSpace, Pow2, Space, fixed


def test_fragments_values_and_neighbours():
    p = Pow2(16, 128, 64)
    assert p.values() == [16, 32, 64, 128]
    assert p.neighbours(64) == [32, 128] and p.neighbours(16) == [32]
    assert IntRange(1, 5, 3).values() == [1, 2, 3, 4, 5]
    assert Enum(("a", "b", "c"), "a").neighbours("b") == ["a", "c"]
    assert Bool().values() == [False, True]
    assert fixed(7).values() == [7]
    assert p.encode(16) == 0.0 and p.encode(128) == 1.0
    with pytest.raises(ValueError):
        Pow2(16, 128, 48)
    with pytest.raises(ValueError):
        Enum(("a",), "b")


def test_space_operations_stay_in_domain():
    s = Space({"A": Pow2(16, 256, 64), "B": Enum((1, 2, 4), 2), "C": Bool()})
    rng = random.Random(0)
    assert s.size() == 5 * 3 * 2 == len(list(s.enumerate()))
    for _ in range(50):
        p = s.sample(rng)
        assert s.contains(p) and s.contains(s.mutate(rng, p)) and all(s.contains(n) for n in s.neighbours(p))
    assert s.project({"A": 32, "Z": 1}) == {"A": 32, "B": 2, "C": False}


def test_joint_space_switch_keeps_shared_knobs():
    j = JointSpace({"x": Space({"A": Pow2(16, 64, 16)}), "y": Space({"A": Pow2(16, 64, 16), "S": Enum((2, 4), 2)})})
    p = {"variant": "x", "A": 64}
    assert j.switch(p, "y") == {"variant": "y", "A": 64, "S": 2}
    assert j.size() == 3 + 6
    assert {q["variant"] for q in j.neighbours(p)} == {"x", "y"}
    rng = random.Random(1)
    for _ in range(30):
        assert j.contains(j.mutate(rng, j.sample(rng)))
