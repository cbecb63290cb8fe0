"""Library convs (the implicit GEMM) and pools in an emitted program take a tuned config as the GEMMs do
(compiler.library_tune.TUNABLE rows ``conv`` and ``pool``): a problem built from the call's whole
geometry, a config tuned during solve (within what Triton's interpreter runs cheaply here), carried by
the emitted launcher call the check runs, verified and written back after the program is accepted, and
taken from the tuning DB by a later solve; a DB record the variant rejects is skipped and said."""
from pathlib import Path

import torch

from warpsmith.compiler import compile_problem, solve
from warpsmith.compiler import library_tune as LT
from warpsmith.db import TuningDB, TuningRecord
from warpsmith.ops import get_variant
from warpsmith.ops.conv.op import problem_of as conv_problem_of
from warpsmith.ops.conv.spec import CONV
from warpsmith.ops.pool.op import problem_of as pool_problem_of
from warpsmith.targets import fingerprint, get_target

PROBLEMS = Path(__file__).parent / "problems"
H100 = get_target("h100")


def _call(prog, op):
    [n] = [n for n in prog.library_calls if n.op == op]
    return n


def _tuned_solve_written_back_and_reused(tmp_path, problem, op, variant, call_end):
    """Solve ``problem`` (one library ``op`` call): tuned, emitted, accepted, written back; then compiled
    again, the record taken as ``db``. Returns the report entry."""
    res = solve(PROBLEMS / problem, tmp_path / "new.py")
    assert res.status == "accepted", res.verdict
    [lib] = res.to_json()["search"]["library"]
    t = LT.TUNABLE[op]
    assert lib["op"] == op and lib["variant"] == variant and lib["source"] == "tuned" and lib["evaluated"] > 0
    assert lib["config"] != lib["default_config"] == t.default and lib["predicted_ms"] < lib["default_ms"]
    # a config the registry variant accepts for the call's problem, cheap under the interpreter here
    p = LT.db_problem(_call(res.program, op))
    full = {**lib["config"], **t.fixed(p)}
    assert get_variant(p.op, variant).rejection(p, full, H100) is None
    assert LT.cpu_rejection(t, p, lib["config"]) is None
    cap = max(LT.INTERPRETER_STEPS, t.steps(p, t.interpreter(p)))
    assert t.steps(p, lib["config"]) <= cap
    assert lib["detail"].endswith(f"; under the interpreter, only configs of at most {cap} program-steps)")
    # carried by the launcher call of the program the check accepted
    args = LT.launcher_args(lib["config"], op)
    assert f"{call_end}, {args!r})  # library {op}: " in (tmp_path / "new.py").read_text()
    # verified by the tuner's verifier and recorded
    rec = lib["db_record"]
    assert rec["written"] and "verify_candidate" in rec["verified_by"]
    [stored] = TuningDB().list(op=p.op)
    assert stored.id == rec["record_id"] and stored.variant == variant and stored.config == full
    assert stored.verified and stored.certificate["verdict"] == "accepted" and stored.shape == dict(p.shape)
    # the next solve of this shape takes it from the DB (its compile stage: the same launcher call)
    _, _, prog = compile_problem(PROBLEMS / problem)
    [again] = prog.search.library
    assert again["source"] == "db" and again["config"] == lib["config"] and again["evaluated"] == 0
    assert f"{call_end}, {args!r})" in prog.text
    return lib


def test_a_conv_takes_a_tuned_config_verified_written_back_and_reused(tmp_path):
    lib = _tuned_solve_written_back_and_reused(tmp_path, "conv_strided.py", "conv", "implicit_gemm", "'relu'")
    assert lib["config"]["num_stages"] == 3  # pinned to the launcher's own: the gathered loads are not pipelined


def test_a_pool_takes_a_tuned_config_verified_written_back_and_reused(tmp_path):
    _tuned_solve_written_back_and_reused(tmp_path, "max_pool_planes.py", "pool", "gather", "True, True, 0")


def _plant(p, variant, cfg, time_ms=0.001):
    TuningDB().put(TuningRecord(op=p.op, variant=variant, shape=dict(p.shape), dtype=p.dtype_name,
                                attrs=dict(p.key_attrs), target="h100", config=cfg,
                                fingerprint=fingerprint(get_variant(p.op, variant).source_hash()),
                                timing_kind="predicted", time_ms=time_ms, baseline_ms=None, verified=True,
                                certificate={"verdict": "accepted"}))


def test_a_conv_db_record_the_variant_rejects_is_skipped_and_said():
    _, _, prog = compile_problem(PROBLEMS / "conv_strided.py", library_budget=0)
    p = LT.db_problem(_call(prog, "conv"))
    fixed = LT.TUNABLE["conv"].fixed(p)
    _plant(p, "implicit_gemm", {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 8, "num_stages": 1, **fixed})
    _, _, prog = compile_problem(PROBLEMS / "conv_strided.py", library_budget=0)
    [lib] = prog.search.library
    assert lib["source"] == "default" and lib["config"] == LT.TUNABLE["conv"].default
    assert "rejected: tile 16x16 too small for 8 warps" in lib["detail"]
    assert "'relu')  # library conv" in prog.text  # the launcher's own tiles


def test_pool_db_records_rejected_or_too_slow_under_the_interpreter_are_skipped_and_said():
    _, _, prog = compile_problem(PROBLEMS / "max_pool_planes.py", library_budget=0)
    p = LT.db_problem(_call(prog, "pool"))
    _plant(p, "gather", {"BLOCK": 1024, "ROWS": 8, "num_warps": 4})  # 8 x 1024 elements: over the tile limit
    _plant(p, "gather", {"BLOCK": 32, "ROWS": 4, "num_warps": 4})  # valid, but 16 programs under the interpreter
    _, _, prog = compile_problem(PROBLEMS / "max_pool_planes.py", library_budget=0)
    [lib] = prog.search.library
    assert lib["source"] == "default" and lib["config"] == {"BLOCK": 128, "ROWS": 1}
    assert "rejected: ROWS x BLOCK = 8 x 1024 over the tile limit 4096" in lib["detail"]
    assert "not taken: 16 program-steps under the interpreter, over 4" in lib["detail"]
    assert "True, True, 0)  # library pool" in prog.text


def test_a_depthwise_conv_takes_a_db_record_emitted_and_checked(tmp_path):
    """The direct depthwise kernel's row: its family model prices these small shapes alike at every
    config (nothing tuned is predicted faster), so a verified DB record is what reaches it."""
    _, _, prog = compile_problem(PROBLEMS / "depthwise_conv.py", library_budget=0)
    n = _call(prog, "conv")
    p = LT.db_problem(n)
    assert LT.row(n) == "conv_depthwise" and p.op == "conv"
    _plant(p, "depthwise", {"BLOCK_P": 16, "BLOCK_C": 4, "num_warps": 2, "ORDER": "pixels"}, 0.0005)  # 8 x 2 x 9 steps
    _plant(p, "depthwise", {"BLOCK_P": 64, "BLOCK_C": 8, "num_warps": 1, "ORDER": "pixels"})  # 2 x 9: as its own
    res = solve(PROBLEMS / "depthwise_conv.py", tmp_path / "new.py")
    assert res.status == "accepted", res.verdict
    [lib] = res.to_json()["search"]["library"]
    assert lib["variant"] == "depthwise" and lib["source"] == "db" and lib["evaluated"] == 0
    assert lib["config"] == {"BLOCK_P": 64, "BLOCK_C": 8, "num_warps": 1}
    assert lib["default_config"] == LT.TUNABLE["conv_depthwise"].default
    assert "not taken: 144 program-steps under the interpreter, over 18" in lib["detail"]
    assert "'relu', (64, 8, 1))  # library conv: BLOCK_P=64" in (tmp_path / "new.py").read_text()


def test_conv_and_pool_problems_carry_the_calls_geometry():
    _, _, prog = compile_problem(PROBLEMS / "conv_variants.py", library_budget=0)
    convs = [n for n in prog.library_calls if n.op == "conv"]
    assert len(convs) == 3
    assert sorted(LT.row(n) for n in convs) == ["conv", "conv", "conv_depthwise"]
    for n in convs:
        p, t = LT.db_problem(n), n.attrs
        x, w = (torch.empty(a.shape) for a in n.args[:2])
        bias = torch.empty(n.args[2].shape) if getattr(n.args[2], "shape", None) is not None else None
        ref = conv_problem_of(x, w, bias, None, t["stride"], t["padding"], t["padding"], t["dilation"],
                              t["output_padding"], t["groups"], t["transposed"], t["activation"], 1.0)
        assert (p.shape, p.attrs, p.dtype) == (ref.shape, ref.attrs, ref.dtype)
        assert CONV.outputs(p)[0][0] == tuple(n.shape)
    _, _, prog = compile_problem(PROBLEMS / "max_pool_planes.py", library_budget=0)
    n = _call(prog, "pool")
    p, t = LT.db_problem(n), n.attrs
    ref = pool_problem_of("max_pool", torch.empty(n.args[0].shape), kernel=t["kernel"], stride=t["stride"],
                          padding=t["padding"], dilation=t["dilation"], ceil_mode=t["ceil_mode"], return_indices=False)
    assert (p.op, p.shape, p.attrs) == (ref.op, ref.shape, ref.attrs)


def test_interpreter_steps_bound_what_is_taken_here():
    """Programs x reduction steps of a launch (the interpreter's cost), bounded by the launcher's own
    interpreter tiles' or INTERPRETER_STEPS, whichever is more."""
    cases = {"conv": ("conv_strided.py", [({"BLOCK_M": 64, "BLOCK_N": 16, "BLOCK_K": 16}, 9, True),  # 50 pixels,
                                          ({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}, 36, False)]),  # 3x3, 4 ch.
             "pool": ("max_pool_planes.py", [({"BLOCK": 512, "ROWS": 2}, 4, True),  # 256 positions, 8 planes
                                             ({"BLOCK": 128, "ROWS": 1}, 16, False)])}
    for op, (problem, configs) in cases.items():
        _, _, prog = compile_problem(PROBLEMS / problem, library_budget=0)
        t = LT.TUNABLE[op]
        p = LT.db_problem(_call(prog, op))
        for config, steps, taken in configs:
            assert t.steps(p, config) == steps
            assert (LT.cpu_rejection(t, p, config) is None) == taken
