"""`warpsmith check`: the harness part of the bug zoo.

The planted candidates live in ``tests/verify/zoo/`` (data, not tests). Correct candidates must
be accepted. Every cheat must be rejected *for its reason code*: remove the check that catches
it and the cheat is either accepted or rejected for another reason, so its test fails.
"""
import json
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import warpsmith.check.compare as compare
from warpsmith.cli.main import cli
from warpsmith.errors import InvalidInputError, UnknownNameError
from warpsmith.check import CHECKS, CODES, check, load_problem

ZOO = Path(__file__).parents[1] / "verify" / "zoo"
RMSNORM = ZOO / "rmsnorm"
PROBLEMS = {
    "softmax": (ZOO / "softmax.py", ["batch_size=6", "dim=40"]),
    "matmul_relu": (ZOO / "matmul_relu.py", ["M=9", "N=12", "K=20"]),
    "layernorm": (ZOO / "layernorm.py", ["batch_size=5", "features=48"]),
    "rmsnorm": (RMSNORM, []),
    "groupnorm_single": (ZOO / "groupnorm_single.py", []),
}


def run(problem, candidate, **kw):
    ref, sets = PROBLEMS[problem]
    return check(ref, ZOO / candidate if problem != "rmsnorm" else RMSNORM / candidate, overrides=sets, **kw)


def invoke(*args):
    return CliRunner().invoke(cli, ["check", *map(str, args)], catch_exceptions=False)


CORRECT = [
    ("softmax", "softmax_triton.py"),          # a real Triton kernel (interpreter on a CPU)
    ("matmul_relu", "matmul_relu_ok.py"),
    ("layernorm", "layernorm_ok.py"),          # parameters equal to the reference's by seeding alone
    ("softmax", "softmax_uses_dim.py"),        # raises unless --set reached its own constants
    ("rmsnorm", "solutions/dps_torch.json"),   # FlashInfer, destination-passing
    ("rmsnorm", "solutions/value_triton"),     # FlashInfer, value-returning Triton, two source files
    ("softmax", "softmax_autotune.py"),        # @triton.autotune under the interpreter: the first config
    ("softmax", "softmax_logsumexp.py"),       # exp(x - logsumexp): the reference criterion's floor
    ("groupnorm_single", "groupnorm_single_bias.py"),  # right and constant: the reference varies by noise only
]


TRITON = {"softmax_triton.py", "solutions/value_triton", "softmax_autotune.py"}  # memory_safe proves their launches

# The quick tier (tests/conftest.py) runs a check of each kind once: these cases, each about 8 s of a
# sandboxed process, run in the full tier (--full) only. Each is covered by a quick test: the correct
# candidates by the test named; the cheats by a quick cheat rejected for the same reason code.
SLOW_CORRECT = {
    "softmax_triton.py": "test_cli_exit_0_when_accepted_and_json_lists_every_check",
    "softmax_uses_dim.py": "test_set_overrides_constants_of_reference_and_candidate",
    "solutions/dps_torch.json": "test_set_overrides_var_axes_of_a_flashinfer_problem",
}
SLOW_CHEATS = {
    "layernorm_reinit.py", "softmax_autocast.py", "softmax_gc_oracle.py", "softmax_library_override.py",
    "softmax_mode_sensing.py",                                              # wrong_result: softmax_off_by_little.py
    "solutions/dps_partial.json",                                           # unwritten_output: softmax_unwritten.py
    "softmax_memo_hash.py", "softmax_memo_version.py",                      # memoized: softmax_memo_ptr.py
    "softmax_lazy.py",                                                      # lazy_output: test_cli_skipped_checks_...
    "softmax_patch_eq.py", "softmax_patch_perf_counter.py", "softmax_patch_harness.py",
    "solutions/hack_timer_patch.json",                                      # monkey_patch: softmax_patch_allclose.py
    "softmax_exit_import.py", "softmax_exit_init.py",                       # exited: softmax_exit_forward.py
    "softmax_late_worker.py", "solutions/hack_side_stream.json", "solutions/hack_thread.json",  # async_work: softmax_thread.py
    "solutions/hack_subclass.json",                                         # tensor_subclass: softmax_subclass.py
}


def _params(cases, slow):
    return [pytest.param(*c, id=c[1], marks=[pytest.mark.slow] if c[1] in slow else []) for c in cases]


@pytest.mark.parametrize("problem, candidate", _params(CORRECT, SLOW_CORRECT))
def test_correct_candidates_are_accepted_with_every_check_passed(problem, candidate):
    report = run(problem, candidate)
    assert report.verdict == "accepted", report.first_failure
    want = {name: "passed" for name, _, _ in CHECKS}
    if candidate not in TRITON:  # pure torch: no Triton launch to prove
        want["memory_safe"] = "skipped(no Triton kernel launch was observed)"
    assert {c.name: c.text for c in report.checks} == want
    assert report.timing == {"kind": "not measured", "reason": "no GPU"} or torch.cuda.is_available()


ZOO_CHEATS = [
    ("softmax", "softmax_off_by_little.py", "wrong_result"),
    ("layernorm", "layernorm_reinit.py", "wrong_result"),
    ("softmax", "softmax_unwritten.py", "unwritten_output"),
    ("rmsnorm", "solutions/dps_partial.json", "unwritten_output"),
    ("softmax", "softmax_memo_ptr.py", "memoized"),
    ("softmax", "softmax_memo_hash.py", "memoized"),
    ("softmax", "softmax_alias.py", "aliased_output"),
    ("softmax", "softmax_stale_buffer.py", "stale_buffer"),
    ("matmul_relu", "matmul_relu_mutates.py", "mutated_input"),
    ("softmax", "softmax_subclass.py", "tensor_subclass"),
    ("softmax", "softmax_lazy.py", "lazy_output"),
    ("softmax", "softmax_constant.py", "constant_output"),
    ("softmax", "softmax_wrong_dtype.py", "wrong_dtype"),
    ("softmax", "softmax_wrong_shape.py", "wrong_shape"),
    ("matmul_relu", "matmul_relu_transposed.py", "wrong_layout"),
    ("softmax", "softmax_thread.py", "async_work"),
    ("softmax", "softmax_patch_allclose.py", "monkey_patch"),
    ("softmax", "softmax_patch_eq.py", "monkey_patch"),
    ("softmax", "softmax_patch_perf_counter.py", "monkey_patch"),
    ("softmax", "softmax_patch_harness.py", "monkey_patch"),
    ("softmax", "softmax_noise.py", "nondeterministic"),
    ("softmax", "softmax_raises.py", "candidate_error"),
    # the candidate's own process: what it does to it never reaches the verdict
    ("softmax", "softmax_exit_import.py", "exited"),
    ("softmax", "softmax_exit_init.py", "exited"),
    ("softmax", "softmax_exit_forward.py", "exited"),
    ("softmax", "softmax_abort.py", "crashed"),
    ("softmax", "softmax_autocast.py", "wrong_result"),
    ("softmax", "softmax_gc_oracle.py", "wrong_result"),
    ("softmax", "softmax_library_override.py", "wrong_result"),
    ("softmax", "softmax_mode_sensing.py", "wrong_result"),
    ("softmax", "softmax_memo_version.py", "memoized"),
    ("softmax", "softmax_late_worker.py", "async_work"),
    # the classes of SOL-ExecBench's own hack samples (tests/samples/rmsnorm there), written here
    ("rmsnorm", "solutions/hack_timer_patch.json", "monkey_patch"),
    ("rmsnorm", "solutions/hack_side_stream.json", "async_work"),  # on a CPU: the side stream asked for
    ("rmsnorm", "solutions/hack_thread.json", "async_work"),
    ("rmsnorm", "solutions/hack_subclass.json", "tensor_subclass"),
    # exact under the interpreter (its programs run one after another), a race on a GPU: only the prover sees it
    ("matmul_relu", "matmul_relu_splitk_race.py", "unsafe_kernel"),
]


@pytest.mark.parametrize("problem, candidate, code", _params(ZOO_CHEATS, SLOW_CHEATS))
def test_cheats_are_rejected_for_the_right_reason(problem, candidate, code):
    import sys

    original_allclose, original_judge = torch.allclose, compare.judge
    modules, mode = set(sys.modules), torch._C._len_torch_function_stack()
    report = run(problem, candidate)
    assert report.verdict == "rejected"
    assert report.reason == code, [c.text for c in report.checks if c.status == "failed"]
    failed = next(c for c in report.checks if c.code == code)
    assert failed.text.startswith(f"failed({code}: ") and failed.message
    assert MESSAGES.get(candidate, "") in report.first_failure.message
    # whatever the candidate did, the library's process is as it was (test_patches_are_undone_after_the_check,
    # test_a_library_call_leaves_no_global_state_changed: the same for some cheats in one test each)
    assert torch.allclose is original_allclose and compare.judge is original_judge
    assert "__eq__" not in vars(torch.Tensor) and time.perf_counter() > 0
    assert torch._C._len_torch_function_stack() == mode and not torch.is_autocast_enabled("cpu")
    assert not any("kb_cand" in m or "fi_cand" in m for m in set(sys.modules) - modules)


# what the first failure's message says (test_failure_messages_say_what_happened, in one test)
MESSAGES = {
    "softmax_patch_allclose.py": "after loading the candidate: torch.allclose was replaced",
    "softmax_patch_eq.py": "torch.Tensor.__eq__ was added",
    "softmax_memo_ptr.py": "overwritten in place",
    "softmax_memo_hash.py": "cache keyed on values",
    "softmax_thread.py": "still running after it returned",
    "matmul_relu_transposed.py": "reference's output is contiguous",
}


def test_a_hang_is_killed_at_the_deadline_even_ignoring_sigterm():
    t0 = time.perf_counter()
    report = run("softmax", "softmax_hang.py", call_timeout_s=3)
    assert report.reason == "timeout" and "SIGKILL" in report.first_failure.message
    assert time.perf_counter() - t0 < 60


def test_a_rewritten_reference_is_reported_and_restored(tmp_path, monkeypatch):
    import warpsmith.check.isolation as isolation

    monkeypatch.setattr(isolation, "ISOLATE", False)  # the sandbox refuses the write (test_isolation.py): without it
    for name in ("softmax.py", "softmax_tamper_reference.py"):
        (tmp_path / name).write_text((ZOO / name).read_text())
    before = (tmp_path / "softmax.py").read_bytes()
    report = check(tmp_path / "softmax.py", tmp_path / "softmax_tamper_reference.py", overrides=PROBLEMS["softmax"][1])
    assert report.verdict == "rejected" and report.reason == "tampered_reference", report.failed_codes()
    assert (tmp_path / "softmax.py").read_bytes() == before
    assert report.check("error_contract").status == "failed"  # judged against the snapshot, not the rewrite


def test_the_zoo_covers_every_reason_code():
    """Every reason code has a planted cheat rejected for it: here, in test_verdict.py (the process and
    the protocol), or in its own test (timeout, tampered_reference). ``incomplete`` is the one no
    candidate can cause (every call is judged; a stop always records a failure first): its test is
    test_verdict.py's report-level one."""
    from test_verdict import CHEATS  # the same folder (pytest puts it on sys.path)

    covered = {code for _, _, code in ZOO_CHEATS} | {code for _, code in CHEATS}
    assert covered | {"timeout", "tampered_reference", "incomplete"} == set(CODES.values())
    assert len(ZOO_CHEATS) >= 14


@pytest.mark.slow  # the quick tier: each cheat's test asserts the same after its check
def test_patches_are_undone_after_the_check():
    original_allclose, original_judge = torch.allclose, compare.judge
    for candidate in ("softmax_patch_allclose.py", "softmax_patch_eq.py", "softmax_patch_perf_counter.py",
                      "softmax_patch_harness.py"):
        assert run("softmax", candidate).reason == "monkey_patch"
    assert torch.allclose is original_allclose and compare.judge is original_judge
    assert "__eq__" not in vars(torch.Tensor) and time.perf_counter() > 0
    assert not (torch.zeros(2) == torch.ones(2)).any()


def test_torch_own_wrappers_are_not_patches_but_lookalikes_are():
    import functools

    from warpsmith.check.guards import PatchGuard

    guard = PatchGuard()
    import torch._dynamo  # noqa: F401  (on first import, torch wraps torch.manual_seed itself)

    assert guard.changes() == []
    original = torch.manual_seed
    torch.manual_seed = functools.wraps(original)(lambda *a, **k: original(*a, **k))  # defined outside torch
    try:
        assert guard.changes() == ["torch.manual_seed was replaced"]
    finally:
        guard.restore()
    assert torch.manual_seed is original


@pytest.mark.slow  # the quick tier: each cheat's test asserts its message (MESSAGES)
def test_failure_messages_say_what_happened():
    assert "after loading the candidate: torch.allclose was replaced" in \
        run("softmax", "softmax_patch_allclose.py").first_failure.message
    assert "torch.Tensor.__eq__ was added" in run("softmax", "softmax_patch_eq.py").first_failure.message
    assert "overwritten in place" in run("softmax", "softmax_memo_ptr.py").first_failure.message
    assert "cache keyed on values" in run("softmax", "softmax_memo_hash.py").first_failure.message
    assert "still running after it returned" in run("softmax", "softmax_thread.py").first_failure.message
    assert "reference's output is contiguous" in run("matmul_relu", "matmul_relu_transposed.py").first_failure.message


def test_declared_nondeterminism_is_accepted_and_reported():
    report = run("softmax", "softmax_noise_declared.py")
    assert report.verdict == "accepted"
    text = report.check("deterministic").text
    assert text.startswith("skipped(declared nondeterministic; ") and text.endswith("on identical inputs were different)")


def test_inputs_are_drawn_after_the_candidate_is_loaded(monkeypatch):
    """Every input the candidate sees is drawn after its process reported it loaded; the reference's
    probe (run first, before the child starts) is never sent to it."""
    import warpsmith.check.hardened as hardened

    events = []
    real_start, real_draw = hardened._Session.start, hardened._Session.draw
    monkeypatch.setattr(hardened._Session, "start", lambda self, *a: (events.append("load"), real_start(self, *a))[1])
    monkeypatch.setattr(hardened._Session, "draw", lambda self, *a: (events.append("draw"), real_draw(self, *a))[1])
    report = run("softmax", "softmax_triton.py", trials=3)
    assert report.verdict == "accepted"
    assert events[0] == "load" and "draw" in events
    trials, extra = report.protocol["trials"], report.protocol["endurance"]["new_draws"]
    warm = events.count("draw") - trials - extra
    assert warm == report.protocol["warmup_calls"], events
    assert 1 <= warm <= 2 and 3 <= trials <= 5, events  # the counts are drawn at random within ranges
    assert report.protocol["isolation"]["isolated"] and report.protocol["plain_calls"] >= 1  # one repeat at least is plain


@pytest.mark.slow  # the quick tier: test_inputs_are_drawn_after_the_candidate_is_loaded asserts the same of one report
def test_the_protocol_runs_some_calls_with_no_harness_state_and_random_counts():
    reports = [run("softmax", "softmax_triton.py", trials=2) for _ in range(3)]
    assert all(r.verdict == "accepted" and r.protocol["isolation"]["isolated"] for r in reports)
    assert all(r.protocol["plain_calls"] >= 1 for r in reports)  # one repeat at least is plain


def test_a_reference_whose_output_is_an_expanded_view_passes_against_itself():
    report = check(ZOO / "expand_ref.py", ZOO / "expand_ref.py")
    assert report.verdict == "accepted", report.first_failure


def test_a_reference_that_raises_on_its_own_inputs_is_exit_2_not_the_candidates_fault():
    from warpsmith.check.hardened import ReferenceUnusable

    with pytest.raises(ReferenceUnusable) as info:
        check(ZOO / "dilated_ref.py", ZOO / "dilated_ref.py", overrides=["length=4"])
    assert info.value.reason == "reference_error" and "raised RuntimeError" in str(info.value)
    assert check(ZOO / "dilated_ref.py", ZOO / "dilated_ref.py").verdict == "accepted"
    result = invoke(ZOO / "dilated_ref.py", ZOO / "dilated_ref.py", "--set", "length=4")
    assert result.exit_code == 2 and "reference_error" in result.output


def test_a_reference_with_dropout_in_training_mode_is_exit_2_with_the_fix():
    from warpsmith.check.hardened import ReferenceUnusable

    with pytest.raises(ReferenceUnusable) as info:
        check(ZOO / "dropout_ref.py", ZOO / "dropout_ref.py")
    assert info.value.reason == "reference_nondeterministic" and "--eval" in str(info.value)
    assert check(ZOO / "dropout_ref.py", ZOO / "dropout_ref.py", eval_mode=True).verdict == "accepted"


def test_workloads_can_be_chosen_and_the_report_states_the_coverage():
    lines = []
    report = run("rmsnorm", "solutions/dps_torch.json", workloads=["1"], progress=lines.append)
    assert report.verdict == "accepted" and report.coverage["workloads_checked"] == 1
    assert report.coverage_line == "covered: 1 of 2 workload(s) (1 selected with --workloads)"
    assert len(lines) == 1 and lines[0].startswith("workload 1/1 rmsnorm-b17")
    report = run("rmsnorm", "solutions/dps_torch.json", budget_s=1e-6)
    assert report.coverage["workloads_checked"] == 1 and "time budget" in report.coverage_line
    with pytest.raises(InvalidInputError, match="--workloads"):
        run("rmsnorm", "solutions/dps_torch.json", workloads=["7"])


@pytest.mark.slow  # the quick tier: each cheat's test asserts the same after its check
def test_a_library_call_leaves_no_global_state_changed():
    import sys

    modules, mode = set(sys.modules), torch._C._len_torch_function_stack()
    for candidate in ("softmax_autocast.py", "softmax_library_override.py", "softmax_patch_allclose.py"):
        run("softmax", candidate)
    assert torch._C._len_torch_function_stack() == mode and not torch.is_autocast_enabled("cpu")
    assert float((torch.ones(3) - torch.ones(3)).abs().sum()) == 0.0  # no aten override leaked
    assert not any("kb_cand" in m or "fi_cand" in m for m in set(sys.modules) - modules)


def test_the_json_report_is_written_last_by_the_harness(tmp_path):
    """A candidate that finds the --json path in its ancestors' command lines and writes an
    'accepted' report there: the harness's own report, written after the child is dead, is what stays."""
    import subprocess
    import sys

    cand = tmp_path / "cand.py"
    cand.write_text(
        "import os, json\nimport torch\nimport torch.nn as nn\n"
        "def _forge():\n"
        "    pid = os.getppid()\n"
        "    for _ in range(6):\n"
        "        args = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')\n"
        "        if b'--json' in args:\n"
        "            path = args[args.index(b'--json') + 1].decode()\n"
        "            open(path, 'w').write(json.dumps({'verdict': 'accepted'}))\n"
        "            return\n"
        "        pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n"
        "        _forge()\n"
        "        return x * 0\n")
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "warpsmith.cli.main", "check", str(ZOO / "softmax.py"), str(cand),
                           "--set", "batch_size=4", "--set", "dim=8", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json.loads(out.read_text())["verdict"] == "rejected"


# ---- --set ------------------------------------------------------------------------------------
def test_set_overrides_constants_of_reference_and_candidate():
    report = run("softmax", "softmax_uses_dim.py")
    assert report.verdict == "accepted"
    assert report.problem["workloads"][0]["inputs"] == ["float32[6, 40]"]
    assert report.problem["constants"] == {"batch_size": 6, "dim": 40} and report.problem["overrides"] == {
        "batch_size": 6, "dim": 40}


def test_set_refuses_unknown_names_and_wrong_types():
    with pytest.raises(UnknownNameError, match="expected one of batch_size, dim, got 'dimm'"):
        check(ZOO / "softmax.py", ZOO / "softmax_triton.py", overrides=["dimm=3"])
    with pytest.raises(InvalidInputError, match="an integer"):
        check(ZOO / "softmax.py", ZOO / "softmax_triton.py", overrides=["dim=3.5"])
    with pytest.raises(InvalidInputError, match="NAME=VALUE"):
        check(ZOO / "softmax.py", ZOO / "softmax_triton.py", overrides=["dim"])


def test_set_overrides_var_axes_of_a_flashinfer_problem():
    report = check(RMSNORM, RMSNORM / "solutions" / "dps_torch.json", overrides=["batch_size=5"])
    assert report.verdict == "accepted"
    assert [w["axes"] for w in report.problem["workloads"]] == [{"hidden_size": 64, "batch_size": 5}]
    with pytest.raises(UnknownNameError, match="hidden_size is a const axis"):
        check(RMSNORM, RMSNORM / "solutions" / "dps_torch.json", overrides=["hidden_size=8"])
    with pytest.raises(UnknownNameError, match="not an axis"):
        check(RMSNORM, RMSNORM / "solutions" / "dps_torch.json", overrides=["rows=8"])


def test_flashinfer_workloads_both_line_forms_and_a_float64_oracle():
    problem = load_problem(RMSNORM)
    assert [w.label for w in problem.workloads] == ["rmsnorm-b3", "rmsnorm-b17"]
    assert problem.workloads[0].scalars == {"eps": 1e-6}
    gen = torch.Generator().manual_seed(0)
    args = problem.draw_inputs(problem.workloads[1], gen, "normal", torch.device("cpu"))
    (ref,), (oracle,) = problem.run_reference(args), problem.run_oracle(args)
    # the reference casts to float32 itself; the oracle keeps float64 all the same
    assert ref.dtype == torch.float32 and oracle.dtype == torch.float64 and tuple(ref.shape) == (17, 64)
    assert (oracle - ref.double()).abs().max() > 0


# ---- CLI ----------------------------------------------------------------------------------------
def test_cli_exit_0_when_accepted_and_json_lists_every_check(tmp_path):
    out = tmp_path / "report.json"
    r = invoke(ZOO / "softmax.py", ZOO / "softmax_triton.py", "--set", "batch_size=6", "--set", "dim=40",
               "--json", out, "--seed", 3)
    assert r.exit_code == 0, r.output
    assert "verdict: accepted" in r.output and "timing: not measured (no GPU)" in r.output
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "accepted" and doc["reason"] is None and doc["complete"] is True
    assert doc["seed"] == 3 and doc["format"] == "kernelbench"
    assert [c["name"] for c in doc["checks"]] == [name for name, _, _ in CHECKS]
    assert all(c["status"] == "passed" and c["observations"] > 0 for c in doc["checks"])
    assert {c["name"]: c["reason_code"] for c in doc["checks"]} == CODES
    assert doc["timing"] == {"kind": "not measured", "reason": "no GPU"}


def test_cli_exit_1_when_rejected_with_the_reason_in_json(tmp_path):
    out = tmp_path / "report.json"
    r = invoke(RMSNORM, RMSNORM / "solutions" / "dps_partial.json", "--json", out, "--trials", 3)
    assert r.exit_code == 1
    assert "rejected (unwritten_output:" in " ".join(r.output.split())
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "rejected" and doc["reason"] == "unwritten_output" and doc["trials"] == 3
    status = {c["name"]: c["status"] for c in doc["checks"]}
    assert status["fully_written"].startswith("failed(unwritten_output: ") and status["no_aliasing"] == "passed"


def test_cli_skipped_checks_after_a_fatal_failure(tmp_path):
    out = tmp_path / "r.json"
    assert invoke(ZOO / "softmax.py", ZOO / "softmax_lazy.py", "--set", "batch_size=6", "--set", "dim=40",
                  "--json", out).exit_code == 1
    status = {c["name"]: c["status"] for c in json.loads(out.read_text())["checks"]}
    assert status["materialized"].startswith("failed(lazy_output: output 0 is a Deferred")
    assert status["error_contract"] == "skipped(not reached: the check stopped at lazy_output)"


def _solution(tmp_path, **changes):
    doc = json.loads((RMSNORM / "solutions" / "dps_torch.json").read_text())
    doc["spec"].update(changes.pop("spec", {}))
    doc.update(changes)
    path = tmp_path / "solution.json"
    path.write_text(json.dumps(doc))
    return path


def test_cli_exit_2_on_unusable_input(tmp_path):
    no_model = tmp_path / "cand.py"
    no_model.write_text("import torch\n")
    bad_workload = tmp_path / "problem"
    bad_workload.mkdir()
    (bad_workload / "definition.json").write_text((RMSNORM / "definition.json").read_text())
    (bad_workload / "workload.jsonl").write_text(json.dumps(
        {"uuid": "x", "axes": {"batch_size": 2}, "inputs": {"hidden_states": {"type": "safetensors", "path": "a",
                                                                              "tensor_key": "k"}}}) + "\n")
    broken_json = tmp_path / "broken.json"
    broken_json.write_text("{")
    cases = [
        ([ZOO / "softmax.py", ZOO / "softmax_triton.py", "--set", "nope=1"], "unknown size constant"),
        ([ZOO / "softmax.py", no_model, "--set", "dim=4"], "defining class ModelNew"),
        ([RMSNORM, _solution(tmp_path, spec={"language": "cuda"})], "compiled CUDA/C++ is not supported"),
        ([RMSNORM, broken_json], "valid JSON"),
        ([bad_workload, RMSNORM / "solutions" / "dps_torch.json"], "safetensors"),
        ([RMSNORM, RMSNORM / "solutions" / "dps_torch.json", "--set", "batch_size=0"], "a positive integer"),
        # the other format's candidate is refused by its form, before the reference runs
        ([ZOO / "softmax.py", RMSNORM / "solutions" / "dps_torch.json"], "KernelBench .py file defining ModelNew"),
        ([RMSNORM, ZOO / "softmax_triton.py"], "a solution.json, or a folder holding one"),
        ([ZOO / "softmax.py", ZOO / "softmax_triton.py", "--trials", "0"], "--trials"),
    ]
    for args, fragment in cases:
        r = invoke(*args)
        assert r.exit_code == 2, (args, r.output)
        assert fragment in " ".join(r.output.split()), (args, r.output)


def test_solution_json_variants(tmp_path):
    sol = _solution(tmp_path, spec={"languages": ["pytorch"]}, nondeterministic=True)  # SOL-ExecBench spelling
    report = check(RMSNORM, sol, trials=2)
    assert report.verdict == "accepted" and report.check("deterministic").status == "skipped"
    wrong = _solution(tmp_path, definition="gemm_n4096")
    with pytest.raises(InvalidInputError, match="the definition's name"):
        check(RMSNORM, wrong)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_timing_is_measured_with_cuda_events():  # pragma: no cover - no GPU in CI
    report = run("softmax", "softmax_triton.py")
    assert report.verdict == "accepted" and report.timing["kind"] == "measured" and report.timing["speedup"] > 0
