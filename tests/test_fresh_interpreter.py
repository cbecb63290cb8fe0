"""tests/fresh_interpreter.py: code run as ``python -c`` runs it, in a fork of a server that imported torch,
Triton and z3 only (the proofs claimed "as `warpsmith prove` runs them" depend on it)."""

import fresh_interpreter


def test_a_fork_is_a_new_interpreter_with_the_callers_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("WARPSMITH_TEST_MARK", "here")
    monkeypatch.chdir(tmp_path)
    code = """
import json, os, sys
import z3
fresh = z3.z3._main_ctx is None  # no z3 term built before the code's own
print(json.dumps([fresh, os.environ.get("WARPSMITH_TEST_MARK"), os.getcwd(), sys.argv, "warpsmith" in sys.modules]))
"""
    fresh, mark, cwd, argv, imported = fresh_interpreter.last_json(code)
    assert fresh and mark == "here" and cwd == str(tmp_path) and argv == ["-c"] and not imported
    r = fresh_interpreter.run("import sys; print('out'); sys.exit(3)")
    assert (r.returncode, r.stdout) == (3, "out\n")
    r = fresh_interpreter.run("raise ValueError('planted')")
    assert r.returncode == 1 and "ValueError: planted" in r.stderr
    # the exec path gives the same answers
    monkeypatch.setenv("WARPSMITH_TEST_FRESH", "exec")
    assert fresh_interpreter.last_json(code) == [True, "here", str(tmp_path), ["-c"], False]
