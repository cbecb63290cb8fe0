"""`warpsmith solve --timeout`: stops cleanly (exit 3), the check's processes ended, a partial report
saying where it stopped; progress lines (stage, candidate, check calls) on stderr, none with --quiet."""
import io
import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from warpsmith.check import isolation
from warpsmith.cli.main import cli
from warpsmith.compiler.progress import Progress, SolveTimeout, time_limit

PROBLEM = str(Path(__file__).resolve().parents[1] / "compiler" / "problems" / "softmax.py")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_tiny_timeout_exits_3_with_a_partial_report(tmp_path):
    """In its own process: a stage stuck in C code past the grace period ends the process (os._exit), which
    must not be the test runner's."""
    import subprocess
    import sys

    report = tmp_path / "r.json"
    out = tmp_path / "new.py"
    r = subprocess.run([sys.executable, "-m", "warpsmith.cli.main", "solve", PROBLEM, "--timeout", "0.5", "--json",
                        str(report), "-o", str(out)], capture_output=True, text=True, timeout=600)
    r.output = r.stdout + r.stderr
    assert r.returncode == 3, r.output
    doc = json.loads(report.read_text())
    assert doc["status"] == "timeout" and doc["timeout_s"] == 0.5 and doc["written"] is None
    assert doc["stopped"]["stage"] in ("capture", "search", "emit", "prove", "check")
    assert doc["stopped"]["candidate"] == 1 and doc["stopped"]["candidates"] == 3
    assert "timeout: stopped after" in r.output and not out.exists()


def test_a_timeout_during_the_check_ends_its_processes(tmp_path, monkeypatch):
    """The check's child is started, then the protocol stalls: the time limit stops it, the candidate's
    processes are gone, and the report names the check stage and the calls made."""
    from warpsmith.check import hardened

    started = []
    real_start = hardened._Session.start

    def start(self, setup, load_timeout_s):
        real_start(self, setup, load_timeout_s)
        started.append(self.child.launcher.pid)

    def stall(self, *args, **kwargs):
        time.sleep(120)

    monkeypatch.setattr(hardened._Session, "start", start)
    monkeypatch.setattr(hardened._Session, "run", stall)
    report = tmp_path / "r.json"
    t0 = time.monotonic()
    r = CliRunner().invoke(cli, ["solve", PROBLEM, "--timeout", "40", "--json", str(report), "--no-prove"],
                           catch_exceptions=False)
    assert r.exit_code == 3, r.output
    assert time.monotonic() - t0 < 100
    doc = json.loads(report.read_text())
    assert doc["stopped"]["stage"] == "check" and doc["stopped"]["check_calls"] >= 1, doc
    assert started and not any(_alive(pid) for pid in started)
    assert not isolation.LIVE
    assert "check candidate 1/3, check call 1" in r.output  # the progress lines (stderr, mixed in by the runner)


def test_progress_prints_one_line_per_event_off_a_terminal():
    buf = io.StringIO()
    p = Progress(stream=buf)
    p.candidate(1, 3)
    p.stage("check")
    p.check_call("call 1")
    p.check_call("call 2")
    p("workload 1/1 done")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in buf.getvalue()
    assert lines[0].endswith("check candidate 1/3") and lines[2].endswith("check call 2: call 2")
    assert p.where()["check_calls"] == 2 and p.where()["stage"] == "check"


def test_quiet_prints_no_progress(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "warpsmith.cli.main", "solve", PROBLEM, "--quiet", "--timeout", "0.5"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)  # own process: see above
    assert r.returncode == 3 and "[" not in r.stderr.split("timeout:")[0], r.stdout + r.stderr


def test_time_limit_raises_in_the_block_and_is_off_after_it():
    p = Progress()
    p.stage("search")
    with pytest.raises(SolveTimeout) as e:
        with time_limit(0.05, p):
            time.sleep(5)
    assert e.value.where["stage"] == "search"
    with time_limit(0.05, p):
        pass
    time.sleep(0.1)  # the timer was cancelled: nothing fires here
