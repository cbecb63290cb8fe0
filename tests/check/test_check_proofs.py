"""`warpsmith check`'s memory_safe check: the candidate's observed Triton launches, proved (issue 26, part 9).

A split-K race is exact under the interpreter (programs run one after another), an over-read whose
values are discarded changes no output: only the prover, on the launches the harness observed, sees
them. A kernel that is not plain Triton DSL is not proved (its source would have to run here): skipped,
never a rejection. Candidates live in tests/verify/zoo/.
"""
import json
from pathlib import Path

import pytest

from warpsmith.check import check, launches
from warpsmith.verify.symbolic.observed import Module, refusals

ZOO = Path(__file__).parents[1] / "verify" / "zoo"
SOFTMAX = (ZOO / "softmax.py", ["batch_size=6", "dim=40"])


def _line_of(path, text):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _softmax(candidate):
    return check(SOFTMAX[0], ZOO / candidate, overrides=SOFTMAX[1])


def test_a_split_k_race_exact_under_the_interpreter_is_rejected_naming_kernel_line_and_writers():
    cand = ZOO / "matmul_relu_splitk_race.py"
    report = check(ZOO / "matmul_relu.py", cand, overrides=["M=9", "N=12", "K=20"])
    assert report.verdict == "rejected" and report.reason == "unsafe_kernel", report.failed_codes()
    assert report.failed_codes() == ["unsafe_kernel"]  # every value check passes: only the proof sees it
    msg = report.check("memory_safe").message
    assert "splitk_kernel" in msg and f"line {_line_of(cand, 'tl.store(c_ptrs')}" in msg and "a race" in msg, msg
    assert "programs (0, 0, 0) and (0, 0, 1) both store" in msg, msg  # the two splits of one tile


def test_an_over_read_whose_values_are_discarded_is_rejected_with_the_address():
    cand = ZOO / "softmax_over_read.py"
    report = check(SOFTMAX[0], cand, overrides=SOFTMAX[1])
    assert report.failed_codes() == ["unsafe_kernel"], [c.text for c in report.checks if c.status == "failed"]
    msg = report.check("memory_safe").message
    assert "softmax_kernel" in msg and f"line {_line_of(cand, 'no mask: BLOCK')}" in msg and "out of bounds" in msg
    assert "program (5)" in msg and "where the last is 239" in msg, msg  # 6 x 40: the last row reads past x


def test_the_correct_triton_softmax_is_proved():
    report = _softmax("softmax_triton.py")
    assert report.verdict == "accepted"
    ms = report.check("memory_safe")
    assert ms.status == "passed" and ms.observations >= 1, ms.text


def test_a_kernel_that_is_not_plain_dsl_is_skipped_with_the_construct_not_rejected():
    report = _softmax("softmax_not_dsl.py")
    assert report.verdict == "accepted", report.failed_codes()
    ms = report.check("memory_safe")
    assert ms.status == "skipped" and "fill_value" in ms.message and "not plain Triton DSL" in ms.message, ms.text


# ---- the parts, without a check run -------------------------------------------------------------------
def _record(path, function, grid, args):
    line = _line_of(path, f"def {function}") - 1  # its @triton.jit line: the code's first line
    return {"file": str(path), "function": function, "line": line, "grid": grid, "args": args}


def _t(shape, strides=None, extent=None):
    strides = strides or [shape[1], 1] if len(shape) == 2 else [1]
    n = 1
    for s in shape:
        n *= s
    return {"tensor": {"shape": shape, "strides": strides, "dtype": "torch.float32", "numel": n,
                       "extent": n if extent is None else extent}}


def test_the_prover_process_judges_recorded_launches_without_a_child():
    path = ZOO / "softmax_over_read.py"
    args = {"x_ptr": _t([6, 40]), "y_ptr": _t([6, 40]), "n_cols": {"int": 40}, "stride_x": {"int": 40},
            "stride_y": {"int": 40}, "BLOCK": {"int": 64}}
    status, msg, _ = launches.prove([_record(path, "softmax_kernel", [6], args)], path)
    assert status == "failed" and "out of bounds" in msg and "program (5)" in msg, msg
    # the same kernel reading a view whose storage runs on past the last row: no fault, nothing to reject
    args["x_ptr"] = _t([6, 40], extent=6 * 40 + 24)
    status, msg, proved = launches.prove([_record(path, "softmax_kernel", [6], args)], path)
    assert status == "passed" and proved == 1, msg
    ok = ZOO / "softmax_triton.py"
    status, msg, proved = launches.prove([_record(ok, "softmax_kernel", [6], {**args, "x_ptr": _t([6, 40])})], ok)
    assert status == "passed" and proved == 1, msg
    assert launches.prove([], ok)[:2] == ("skipped", "no Triton kernel launch was observed")


def test_a_record_of_a_file_outside_the_candidate_is_not_provable():
    ok = ZOO / "softmax_triton.py"
    rec = _record(ok, "softmax_kernel", [1], {})
    rec["file"] = "/usr/lib/python3/some_library.py"
    status, msg, _ = launches.prove([rec], ok)
    assert status == "skipped" and "not one of the candidate's files" in msg


def test_forged_or_malformed_records_are_dropped():
    into = {}
    good = {"file": "k.py", "function": "k", "line": 3, "grid": [2, 1], "args": {}}
    launches.merge(into, [good, dict(good), {"file": 1}, {**good, "grid": [-1]}, {**good, "grid": []}, "x"])
    assert list(into.values()) == [good]
    launches.merge(into, {"not": "a list"})
    assert len(into) == 1


@pytest.mark.parametrize("body, construct", [
    ("    import os\n", "Import"),
    ("    x = tl.load(p).__class__\n", ".__class__"),
    ("    f = lambda v: v\n", "Lambda"),
    ("    x = helper(p)\n", "a call of helper"),
    ("    x = CONFIG\n", "the global CONFIG"),
    ("    x = p.storage\n", ".storage"),
    ("    x = [v for v in range(3)]\n", "ListComp"),
    ("    x = getattr(p, 'y')\n", "a call of getattr"),
    ("    with p:\n        pass\n", "With"),
])
def test_the_whitelist_refuses_what_is_not_triton_dsl(body, construct):
    src = ("import triton\nimport triton.language as tl\nCONFIG = {'a': 1}\nBLOCK = 64\n\n"
           "def helper(v):\n    return v\n\n"
           f"@triton.jit\ndef k(p, N, B: tl.constexpr):\n{body}")
    why = refusals(Module(src), "k")
    assert why and any(construct in w for w in why), why


def test_the_whitelist_admits_the_dsl_jit_helpers_and_numeric_constants():
    src = ("import triton\nimport triton.language as tl\nBLOCK: tl.constexpr = 64\nSCALE = 2 ** 3\n\n"
           "@triton.jit\ndef add(a, b):\n    return a + b\n\n"
           "@triton.jit\ndef k(x_ptr, y_ptr, N, B: tl.constexpr = BLOCK):\n"
           "    pid = tl.program_id(0)\n    offs = pid * B + tl.arange(0, B)\n"
           "    for i in range(0, tl.cdiv(N, B)):\n        if i > 2:\n            break\n"
           "    x = tl.load(x_ptr + offs, mask=offs < N, other=0.0).to(x_ptr.dtype.element_ty)\n"
           "    tl.store(y_ptr + offs, add(x, SCALE) if B > 1 else x, mask=offs < min(N, triton.cdiv(N, 1) * B))\n")
    assert refusals(Module(src), "k") == []
    bad = src.replace("add(a, b):\n    return a + b", "add(a, b):\n    return a.__add__(b)")
    assert refusals(Module(bad), "k") == ["add: the attribute .__add__ (line 8)"]


def test_the_recorder_records_a_launch_with_its_grid_arguments_and_autotuned_config():
    import torch
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from triton.runtime.autotuner import Autotuner

    from warpsmith.check.interpreter import first_config_autotune

    saved = {cls: cls.__dict__["run"] for cls in (JITFunction, InterpretedFunction)}
    bench = Autotuner.__dict__["_bench"]
    first_config_autotune()  # as the candidate's process does: no GPU to time configs on
    launches.install()
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("ws_autotune_cand", ZOO / "softmax_autotune.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        launches.take()
        x = torch.randn(3, 10)
        mod.ModelNew()(x)
        mod.ModelNew()(x)  # the same launch again: recorded once
        recs = launches.take()
    finally:
        launches.recording(False)
        for cls, run in saved.items():
            cls.run = run
        Autotuner._bench = bench
    assert len(recs) == 1, recs
    r = recs[0]
    assert r["function"] == "_softmax_kernel" and r["grid"] == [3] and Path(r["file"]).name == "softmax_autotune.py"
    assert r["args"]["x_ptr"] == {"tensor": {"shape": [3, 10], "strides": [10, 1], "dtype": "torch.float32",
                                             "numel": 30, "extent": 30}}
    assert r["args"]["n"] == {"int": 10} and "BLOCK" in r["args"]  # the config the autotuner chose
    assert json.loads(json.dumps(recs)) == recs


def test_split_k_with_atomic_adds_is_proved_and_lanes_of_one_program_are_no_race(tmp_path):
    """The same split-K with tl.atomic_add (atomics are exempt), and a store whose lanes all hit one element
    of their program's own row, through a jit helper (one program: not a race between programs)."""
    src = (ZOO / "matmul_relu_splitk_race.py").read_text()
    atomic = src.replace("    c = tl.load(c_ptrs, mask=mask, other=0.0)\n", "").replace(
        "tl.store(c_ptrs, c + acc, mask=mask)", "tl.atomic_add(c_ptrs, acc, mask=mask)")
    atomic += ("\n\n@triton.jit\ndef _same(B: tl.constexpr):\n    return 0 * tl.arange(0, B)\n"  # a jit helper
               "\n\n@triton.jit\ndef row_flag_kernel(f_ptr, B: tl.constexpr):\n"
               "    row = tl.program_id(0)\n    tl.store(f_ptr + row + _same(B), 1.0)\n")
    path = tmp_path / "atomic.py"
    path.write_text(atomic)
    ints = {k: {"int": v} for k, v in dict(M=9, N=12, K=20, sam=20, sak=1, sbk=12, sbn=1, scm=12, scn=1, BM=16, BN=16,
                                             BK=16, SPLIT=2).items()}
    rec = _record(path, "splitk_kernel", [1, 1, 2], {"a_ptr": _t([9, 20]), "b_ptr": _t([20, 12]), "c_ptr": _t([9, 12]),
                                                     **ints})
    flag = _record(path, "row_flag_kernel", [5], {"f_ptr": _t([5]), "B": {"int": 4}})
    status, msg, proved = launches.prove([rec, flag], path)
    assert status == "passed" and proved == 2, msg
