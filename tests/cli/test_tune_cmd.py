"""`warpsmith tune` as a user runs it: a subprocess, whose stderr shows no numpy RuntimeWarning from
Triton's interpreter (the verifier's NaN/Inf inputs make numpy warn there), and whose tuned record
dispatch uses at once, without anyone clearing dispatch's cache."""
import os
import subprocess
import sys

import torch

from warpsmith.cli.common import INTERPRETER_WARNINGS, quiet_interpreter


def test_tune_in_a_subprocess_prints_no_runtime_warning(tmp_path):
    # without the CLI's filter this command prints "RuntimeWarning: invalid value encountered in matmul"
    env = {**os.environ, "WARPSMITH_DB": str(tmp_path / "t.db"), "WARPSMITH_INTERPRET": "1",
           "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, "-m", "warpsmith.cli.main", "tune", "matmul", "--shape", "M=8,N=8,K=8",
                           "--dtype", "float16", "--budget", "4", "--finalists", "1", "--no-prove"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "winner:" in proc.stdout
    assert "RuntimeWarning" not in proc.stderr, proc.stderr[-3000:]
    # piped, the progress bar does not render: the stages are reported line by line instead (issue 27)
    lines = proc.stderr.splitlines()
    assert lines and lines[0].startswith("tuning matmul[M=8,N=8,K=8]"), proc.stderr[-3000:]
    assert "verifying finalist 1 of 1: " in proc.stderr and "  passed (" in proc.stderr, proc.stderr[-3000:]
    assert f"in {tmp_path / 't.db'} (--db or WARPSMITH_DB to change)" in proc.stdout


def test_quiet_interpreter_hides_exactly_numpys_interpreter_warnings(recwarn):
    import warnings

    with quiet_interpreter():
        for text in INTERPRETER_WARNINGS:
            warnings.warn(f"{text} in log", RuntimeWarning)
        warnings.warn("something else", RuntimeWarning)
        warnings.warn("overflow encountered", UserWarning)
    assert sorted(str(w.message) for w in recwarn) == ["overflow encountered", "something else"]


def test_a_written_record_is_dispatched_without_clearing_the_cache(tmp_path):
    from warpsmith.db import TuningDB, TuningRecord
    from warpsmith.dispatch import select
    from warpsmith.ops.matmul import VARIANTS
    from warpsmith.ops.matmul.op import problem_of
    from warpsmith.targets import current_device, fingerprint

    a, b = torch.randn(8, 16).half(), torch.randn(16, 8).half()
    p = problem_of(a, b, None, "none")
    before = select(p, VARIANTS)  # cached as the default
    assert before.source == "default"
    v = before.variant
    rec = TuningRecord(op="matmul", variant=v.name, shape=dict(p.shape), dtype=p.dtype_name, attrs=p.key_attrs,
                       target=current_device().target.name, fingerprint=fingerprint(v.source_hash()),
                       config=dict(before.config), timing_kind="predicted", time_ms=1.0, baseline_ms=None,
                       verified=True,
                       certificate={"verdict": "accepted"})
    rid = TuningDB().put(rec)
    after = select(p, VARIANTS)
    assert (after.source, after.record_id) == ("db", rid)
