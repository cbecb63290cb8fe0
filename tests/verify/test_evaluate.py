"""The bounded checks' evaluator (verify/symbolic/evaluate.py): traced expressions compiled once into steps
and evaluated block-wide with numpy agree with z3's own evaluation, lane by lane, on random expressions."""
import random

import numpy as np
import z3

from warpsmith.verify.symbolic.evaluate import _program, evaluate
from warpsmith.verify.symbolic.values import lane

M, N = z3.Ints("M N")
L0, L1 = lane(0), lane(1)


def _random(rng, depth=0):
    atoms = [M, N, L0, L1, z3.IntVal(3), z3.IntVal(-7), z3.IntVal(0)]
    if depth > 4 or rng.random() < 0.2:
        return rng.choice(atoms)
    a, b = _random(rng, depth + 1), _random(rng, depth + 1)
    positive = z3.If(b > 0, b, 1 - b)  # z3's div and mod by a negative number are not floor's
    return rng.choice([
        lambda: a + b, lambda: a - b, lambda: a * b, lambda: -a, lambda: a / positive, lambda: a % positive,
        lambda: z3.If(a < b, a, b + 1), lambda: z3.If(z3.And(a >= b, z3.Or(a != 0, z3.Not(b <= 2))), a, b),
        lambda: z3.If(z3.Distinct(a, b), a * 2 - 1, b)])()


def test_compiled_evaluation_agrees_with_z3_lane_by_lane():
    rng = random.Random(7)
    checked = 0
    for _ in range(150):
        e = _random(rng)
        env = {"M": rng.randint(-9, 9), "N": rng.randint(-9, 9)}
        got = evaluate(e, env, (3, 4))
        assert got.shape == (3, 4) and got.dtype == np.int64
        for i in range(3):
            for j in range(4):
                at = z3.substitute(e, (M, z3.IntVal(env["M"])), (N, z3.IntVal(env["N"])), (L0, z3.IntVal(i)),
                                   (L1, z3.IntVal(j)))
                assert got[i, j] == z3.simplify(at).as_long(), (e, env, i, j)
                checked += 1
    assert checked == 150 * 12


def test_an_expression_is_compiled_once_and_an_unknown_symbol_is_named():
    e = (M + L0) * 2
    assert _program(e) is _program(e)
    assert evaluate(e, {"M": 1}, (2,)).tolist() == [2, 4]
    assert evaluate(M > 0, {"M": 1}, ()).item() is True
    try:
        evaluate(e + N, {"M": 1}, (2,))
    except KeyError as err:
        assert "N" in str(err)
    else:
        raise AssertionError("an expression over an unknown symbol was evaluated")
