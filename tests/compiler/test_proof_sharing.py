"""Proofs shared between generated kernels that are one kernel up to names (compiler/canonical.py,
compiler/proofs.py): the emitter names values after the program's nodes, so a repeated block gives
kernels that differ in names and in sizes the symbolic contract leaves free. A proof of every
obligation is shared; a bounded or unknown verdict (which depends on the shapes tried) is not; each
kernel's own launch is still checked."""
from __future__ import annotations

from pathlib import Path

import pytest

from warpsmith.compiler import compile_problem
from warpsmith.compiler import proofs as P
from warpsmith.compiler.canonical import canonical_kernel, launch_shape
from warpsmith.compiler.proofs import prove_text

HERE = Path(__file__).parent / "problems"
BUDGET = 1500

A = '''@triton.jit
def _ws_fused_1(in0_ptr, out0_ptr, NUMEL, BLOCK: tl.constexpr):
    """pointwise over 6x32: relu_a=relu"""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v_relu_a = tl.maximum(tl.load(in0_ptr + offs, mask=offs < NUMEL), 0.0)
    tl.store(out0_ptr + offs, v_relu_a, mask=offs < NUMEL)
'''


def test_kernels_equal_up_to_names_have_one_canonical_form():
    b = A.replace("_ws_fused_1", "_ws_fused_7").replace("relu_a", "relu_b_x12").replace("6x32", "10x32")
    assert canonical_kernel(A, "_ws_fused_1") == canonical_kernel(b, "_ws_fused_7")
    assert "relu_a" not in canonical_kernel(A, "_ws_fused_1")
    # a different operation, a different parameter or a different global is a different kernel
    for other in (A.replace("tl.maximum", "tl.minimum"), A.replace("NUMEL", "N"), A.replace("0.0)", "1.0)")):
        assert canonical_kernel(other, "_ws_fused_1") != canonical_kernel(A, "_ws_fused_1")
    # any consistent renaming of the locals is the same kernel; reading one local where another was is not
    assert canonical_kernel(A.replace("offs", "o2"), "_ws_fused_1") == canonical_kernel(A, "_ws_fused_1")
    swapped = A.replace("tl.store(out0_ptr + offs, v_relu_a", "tl.store(out0_ptr + v_relu_a, offs")
    assert canonical_kernel(swapped, "_ws_fused_1") != canonical_kernel(A, "_ws_fused_1")

def test_the_launch_shape_keeps_what_the_contract_binds():
    spec = {"kernel": "_ws_fused_3", "launcher": "_ws_fused_3_launch", "kind": "pointwise", "domain": [10, 64, 32],
            "red": [], "looped": False, "fixed": [1], "reverse": False,
            "slots": [{"node": "x", "operand": [10, 32, 32], "shape": [10, 32, 32], "mode": "elem",
                       "dims": [0, None, 2]}],
            "outputs": [{"node": "cat", "shape": [10, 64, 32], "form": "flat"}]}
    free = launch_shape(spec, sized=False)
    assert free["domain"] == [None, 64, None]  # a fixed dim is bound by the contract
    assert free["slots"] == [{"shape": [None, 32, None], "mode": "elem", "dims": [0, None, 2]}]
    other = {**spec, "kernel": "_ws_fused_9", "domain": [4, 64, 8],
             "slots": [{**spec["slots"][0], "node": "y", "operand": [4, 32, 8], "shape": [4, 32, 8]}]}
    assert launch_shape(other, sized=False) == free and launch_shape(other) != launch_shape(spec)
    assert launch_shape({**spec, "fixed": []}, sized=False) != free


@pytest.fixture(scope="module")
def repeated():
    return compile_problem(HERE / "repeated_norms.py")[2].text


def test_a_repeated_block_at_another_size_reuses_the_proof(repeated, monkeypatch):
    monkeypatch.setattr(P, "_CACHE", {})
    res = prove_text(repeated, "r.py", BUDGET)
    by = {k.kernel: k for k in res.kernels}
    reused = [k for k in res.kernels if k.reused_from]
    assert reused, res.lines()
    for k in reused:
        first = by[k.reused_from]
        assert k.domain != first.domain  # another size: shared through the size-free key
        assert k.status == first.status == "proved"
        assert k.obligations[0].name == "launch" and k.obligations[0].subject.endswith(str(k.domain))
        assert [(o.name, o.status) for o in k.obligations[1:]] == [(o.name, o.status) for o in first.obligations[1:]]


def test_a_verdict_short_of_proved_is_not_shared_across_sizes(repeated, monkeypatch):
    monkeypatch.setattr(P, "_CACHE", {})
    real, calls = P.prove, []

    def weaker(c, **kw):  # every kernel gets one bounded verdict, as if the solver ran out
        out = real(c, **kw)
        out[0].obligations[0].status = "bounded(3 shapes)"
        calls.append(c.name)
        return out

    monkeypatch.setattr(P, "prove", weaker)
    res = prove_text(repeated, "r.py", BUDGET)
    assert not any(k.reused_from for k in res.kernels), res.lines()
    assert len(calls) == len(res.kernels)
