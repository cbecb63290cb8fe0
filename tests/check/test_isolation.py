"""`warpsmith check`: the candidate's process has no power over the harness, the report or the reference.

Issue 26, part 2. The red team's findings, each a test here: a candidate that ptraced the harness
and made it exit 0; a process started in a new session (out of reach of a sweep) that rewrote the
``--json`` report after the harness had exited. Plus: writes to the reference, the report and
anything else; links planted in the exchange folder; the process tree outliving ``kill``; the
fallback where the machine does not allow the sandbox, which must say so.

Tests that need the sandbox are skipped where the machine refuses it (the report then says
``isolated: false``; the fallback tests run everywhere).
"""
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

import warpsmith.check.isolation as isolation
import warpsmith.check.sandbox as sandbox
from warpsmith.check import check
from warpsmith.cli.main import cli

ZOO = Path(__file__).parents[1] / "verify" / "zoo"
SOFTMAX, SETS = ZOO / "softmax.py", ["batch_size=6", "dim=40"]

# Runs inside the sandbox: argv = CTRL REPLY EXCHANGE; replies one JSON line, then waits for the parent.
PROBE = r'''
import ctypes, errno, json, os, socket, stat, sys
ctrl, reply, exchange = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
harness, outside, workdir = int(os.environ["PROBE_HARNESS"]), os.environ["PROBE_OUTSIDE"], os.environ["PROBE_WORKDIR"]
res = {"pid": os.getpid(), "ppid": os.getppid(),
       "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, f):
    try:
        f()
        res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, e.errno)

def ptrace_seize():
    if libc.ptrace(ctypes.c_long(0x4206), ctypes.c_long(harness), None, None) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")

def write(path):
    with open(path, "w") as f:
        f.write("x")

attempt("ptrace_harness", ptrace_seize)
attempt("mem_harness", lambda: open(f"/proc/{harness}/mem", "r+b").close())
attempt("signal_harness", lambda: os.kill(harness, 0))
attempt("write_outside", lambda: write(os.path.join(outside, "written")))
attempt("write_exchange", lambda: write(os.path.join(exchange, "written")))
attempt("write_workdir", lambda: write(os.path.join(workdir, "written")))
attempt("write_log", lambda: write(os.path.join(exchange, "child.log")))
attempt("unlink_log", lambda: os.unlink(os.path.join(exchange, "child.log")))
attempt("write_context", lambda: write(os.path.join(exchange, "context.pt")))
attempt("dev_null", lambda: write("/dev/null"))
attempt("dev_shm", lambda: write("/dev/shm/x"))
attempt("unix_socket", lambda: socket.socket(socket.AF_UNIX).close())
for var in ("TMPDIR", "HOME", "XDG_CACHE_HOME", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
    attempt("env_" + var, lambda: write(os.path.join(os.environ[var], "written")))
res["block_devices"] = [n for n in os.listdir("/dev") if stat.S_ISBLK(os.lstat("/dev/" + n).st_mode)]
res["status"] = {l.split(":")[0]: l.split(":")[1].strip() for l in open("/proc/self/status")
                 if l.startswith(("Cap", "NoNewPrivs"))}
res["env"] = {k: v for k, v in os.environ.items() if k.startswith("WARPSMITH")}
res["places"] = {v: os.environ[v] for v in ("TMPDIR", "HOME", "XDG_CACHE_HOME", "TRITON_CACHE_DIR")}
os.write(reply, (json.dumps(res) + "\n").encode())
os.read(ctrl, 1)
'''

# Starts a grandchild in a new session (it outlives its parent), tells the parent, waits.
FORKER = r'''
import os, subprocess, sys
ctrl, reply = int(sys.argv[1]), int(sys.argv[2])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # " + os.environ["PROBE_TOKEN"]],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, env={k: v for k, v in os.environ.items() if k != "PROBE_TOKEN"})
os.write(reply, b'{"ok": true}\n')
os.read(ctrl, 1)
'''


def _spawn_probe(tmp_path, source, **kw):
    exchange, outside, workdir = (tmp_path / n for n in ("exchange", "outside", "work"))
    for d in (exchange, outside, workdir):
        d.mkdir()
    (exchange / "context.pt").write_bytes(b"from the parent")
    script = tmp_path / "probe.py"
    script.write_text(source)
    env = {"PROBE_HARNESS": str(os.getpid()), "PROBE_OUTSIDE": str(outside), "PROBE_WORKDIR": str(workdir),
           **kw.pop("env", {})}
    return isolation.spawn(str(exchange), env, writable=[str(workdir)], command=[sys.executable, str(script)], **kw)


def _running(token):
    """Host pids whose command line holds ``token`` (a zombie's is empty: it is not running)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def available():
    """What the sandbox achieves on this machine; tests that need it skip where it is refused."""
    folder = tempfile.mkdtemp()
    try:
        child = isolation.spawn(folder, command=[sys.executable, "-c", "import os, sys; os.read(int(sys.argv[1]), 1)"])
        child.close()
        return child.isolation
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def sandboxed(available):
    if not available["isolated"]:
        pytest.skip("this machine does not allow the sandbox: " + "; ".join(available["missing"]))


@pytest.fixture(scope="module")
def probe(tmp_path_factory, available):
    if not available["isolated"]:
        pytest.skip("this machine does not allow the sandbox: " + "; ".join(available["missing"]))
    tmp_path = tmp_path_factory.mktemp("probe")
    child = _spawn_probe(tmp_path, PROBE)
    try:
        return child.isolation, child.recv(60, "the probe"), tmp_path
    finally:
        child.close()


# ---- the sandbox itself ------------------------------------------------------------------------------
def test_the_sandbox_reports_what_it_achieved(probe):
    iso, _, _ = probe
    assert iso["isolated"] is True and iso["missing"] == []
    for part in ("user", "pid", "mount", "read-only filesystem", "/proc", "/dev", "no capabilities", "seccomp"):
        assert part in iso["how"], iso["how"]


def test_inside_the_harness_cannot_be_named_ptraced_or_signalled(probe):
    _, res, _ = probe
    assert res["pid"] != 1 and res["ppid"] == 1  # under the namespace's init
    assert set(res["procs"]) == {1, res["pid"]}, res["procs"]  # /proc shows the namespace only
    assert res["ptrace_harness"] == "ESRCH" and res["signal_harness"] == "ESRCH"
    assert res["mem_harness"] == "ENOENT"


def test_inside_everything_is_read_only_but_the_exchange_and_work_folders(probe):
    _, res, tmp_path = probe
    assert res["write_outside"] == "EROFS" and not (tmp_path / "outside" / "written").exists()
    assert res["write_exchange"] == "ok" and res["write_workdir"] == "ok"
    assert res["write_log"] == "EROFS" and res["unlink_log"] == "EBUSY"  # the files the parent reads stay its own
    assert res["write_context"] == "EROFS"
    assert all(res["env_" + v] == "ok" for v in ("TMPDIR", "HOME", "XDG_CACHE_HOME", "TRITON_CACHE_DIR",
                                                 "TORCHINDUCTOR_CACHE_DIR")), res
    exchange = str((tmp_path / "exchange").resolve())
    assert all(p.startswith(exchange) for p in res["places"].values()), res["places"]


def test_inside_no_disk_no_unix_socket_no_capability_no_warpsmith_variable(probe):
    _, res, _ = probe
    assert res["block_devices"] == []  # a read-only mount does not stop writes through /dev/vda
    assert res["dev_null"] == "ok" and res["dev_shm"] == "ok"
    assert res["unix_socket"] == "EACCES"  # systemd, Docker, tmux: daemons that run commands for root
    caps = res["status"]
    assert all(int(caps[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")), caps
    assert caps["NoNewPrivs"] == "1"
    assert os.environ.get("WARPSMITH_DB") and res["env"] == {}  # conftest sets WARPSMITH_DB in the parent


def test_the_remount_path_of_older_kernels_isolates_as_well(tmp_path, sandboxed, monkeypatch):
    monkeypatch.setattr(sandbox, "USE_MOUNT_SETATTR", False)  # one remount per mount, as before Linux 5.12
    child = _spawn_probe(tmp_path, PROBE)
    try:
        res = child.recv(60, "the probe")
    finally:
        child.close()
    assert child.isolation["isolated"] is True, child.isolation
    assert res["write_outside"] == "EROFS" and res["write_exchange"] == "ok" and res["block_devices"] == []


@pytest.mark.parametrize("isolate", [True, False], ids=["sandbox", "fallback"])
def test_kill_returns_when_every_process_of_the_candidate_is_gone(tmp_path, available, isolate):
    """A grandchild in its own session, its token out of its environment: gone when kill() returns."""
    if isolate and not available["isolated"]:
        pytest.skip("this machine does not allow the sandbox")
    token = f"probe-{uuid.uuid4().hex}"
    child = _spawn_probe(tmp_path, FORKER, env={"PROBE_TOKEN": token}, isolate=isolate)
    try:
        assert child.recv(60, "the forker") == {"ok": True}
        assert _running(token), "the grandchild never started"
    finally:
        child.kill()
    assert _running(token) == []  # at once: no grace period


def test_a_forced_fallback_is_reported_not_silent(tmp_path, monkeypatch):
    child = _spawn_probe(tmp_path, PROBE, isolate=False)
    try:
        child.recv(60, "the probe")
    finally:
        child.close()
    assert child.isolation["isolated"] is False and "forced" in child.isolation["missing"][0]
    monkeypatch.setattr(isolation, "ISOLATE", False)
    report = check(SOFTMAX, ZOO / "softmax_triton.py", overrides=SETS)
    assert report.verdict == "accepted" and report.exit_status() == 3
    iso = report.protocol["isolation"]
    assert iso["isolated"] is False and any("forced" in m for m in iso["missing"]), iso


# ---- candidates ----------------------------------------------------------------------------------------
def test_a_candidate_cannot_ptrace_its_ancestors(sandboxed):
    """The red team's attach: every attempt fails, so the candidate answers right and is accepted; the
    harness (this process) is alive and judged it."""
    report = check(SOFTMAX, ZOO / "softmax_ptrace_parent.py", overrides=SETS)
    assert report.verdict == "accepted", report.first_failure
    assert report.protocol["isolation"]["isolated"] is True


def test_a_candidate_that_kills_its_parent_reaches_nothing_but_without_sandbox_kills_the_launcher(
        sandboxed, monkeypatch):
    assert check(SOFTMAX, ZOO / "softmax_kill_parent.py", overrides=SETS).verdict == "accepted"  # init ignores it
    monkeypatch.setattr(isolation, "ISOLATE", False)
    assert check(SOFTMAX, ZOO / "softmax_kill_parent.py", overrides=SETS).reason == "crashed"


ESCAPEE = '''"""Cheat: at import, starts a process in a new session, without the parent's environment, that waits
for the --json report and rewrites it as accepted 0.3 s after it appears; returns a wrong answer."""
import os, subprocess, sys
import torch
import torch.nn as nn

WAITER = """
import json, os, time
path = {report!r}
deadline = time.time() + 60
while not os.path.exists(path) and time.time() < deadline:
    time.sleep(0.05)
time.sleep(0.3)
with open(path, "w") as f:
    json.dump({{"verdict": "accepted", "forged": True}}, f)
with open({marker!r}, "w") as f:
    f.write("escaped")
"""
subprocess.Popen([sys.executable, "-c", WAITER + "# {token}"], start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 env={{k: v for k, v in os.environ.items() if not k.startswith("WARPSMITH")}})


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0
'''


def test_an_escaped_process_dies_with_the_candidate_and_the_report_stays(tmp_path, sandboxed):
    token = f"escapee-{uuid.uuid4().hex}"
    report, marker = tmp_path / "report.json", tmp_path / "escaped"
    cand = tmp_path / "cand.py"
    cand.write_text(ESCAPEE.format(report=str(report), marker=str(marker), token=token))
    result = CliRunner().invoke(cli, ["check", str(SOFTMAX), str(cand), *(a for s in SETS for a in ("--set", s)),
                                      "--json", str(report)], catch_exceptions=False)
    assert _running(token) == []  # gone before the harness wrote its report
    assert result.exit_code == 1, result.output
    time.sleep(2.0)
    doc = json.loads(report.read_text())
    assert doc["verdict"] == "rejected" and "forged" not in doc
    assert not marker.exists() and _running(token) == []


WRITER = '''"""Cheat: at import, tries to write the reference, the --json report and a file beside them, and
plants links to the reference in the exchange folder under the names the harness writes next
(in_N.pt); answers right only if all of it failed."""
import os, sys
import torch
import torch.nn as nn

DONE = []
for path in ({reference!r}, {report!r}, {marker!r}):
    try:
        with open(path, "a") as f:
            f.write("# owned")
        DONE.append(path)
    except OSError:
        pass
exchange = sys.argv[3]  # the child's command line: CTRL REPLY EXCHANGE
for n in range(1, 100):
    for name in (f"in_{{n}}.pt", "timing_inputs.pt"):
        try:
            os.symlink({reference!r}, os.path.join(exchange, name))
        except OSError:
            pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0 if DONE else torch.softmax(x, dim=-1)
'''


def test_writes_to_the_reference_the_report_and_elsewhere_fail(tmp_path, sandboxed):
    reference, report, marker = tmp_path / "softmax.py", tmp_path / "report.json", tmp_path / "marker"
    reference.write_text(SOFTMAX.read_text())
    before = reference.read_bytes()
    cand = tmp_path / "cand.py"
    cand.write_text(WRITER.format(reference=str(reference), report=str(report), marker=str(marker)))
    result = CliRunner().invoke(cli, ["check", str(reference), str(cand), *(a for s in SETS for a in ("--set", s)),
                                      "--json", str(report)], catch_exceptions=False)
    doc = json.loads(report.read_text())
    checks = {c["name"]: c for c in doc["checks"]}
    assert result.exit_code == 0 and doc["verdict"] == "accepted", result.output
    assert checks["reference_intact"]["status"] == "passed"  # never changed: not "restored"
    assert reference.read_bytes() == before and not marker.exists()


def test_a_reply_stands_when_the_child_exits_right_after_it_and_a_killed_launcher_is_a_crash(tmp_path):
    """The launcher ends only after the child, and then writes the child's exit status: a reply followed by the
    child's normal end (the child after a load it refused, which the zygote's fork ends at once) is a reply, and
    the next request finds the child gone; a launcher that ends with no status was killed during the call."""
    child = _spawn_probe(tmp_path, "import os, sys\nos.write(int(sys.argv[2]), b'{\"ok\": false, \"kind\": \"x\"}\\n')\n")
    try:
        deadline = time.monotonic() + 30
        while child.launcher.poll() is None and time.monotonic() < deadline:  # the child and its launcher ended
            time.sleep(0.05)
        assert child.recv(10, "loading the candidate") == {"ok": False, "kind": "x"}
        with pytest.raises(isolation.ChildGone, match="exited with status 0") as gone:
            child.request({"op": "call"}, 10, "a call")
        assert gone.value.code == "exited"
    finally:
        child.kill()
    (tmp_path / "again").mkdir()
    child = _spawn_probe(tmp_path / "again", "import os, sys, time\nos.write(int(sys.argv[2]), b'{\"ok\": true}\\n')\n"
                                             "time.sleep(60)\n")
    try:
        time.sleep(0.5)
        child.launcher.kill()  # SIGKILL: no status line
        child.launcher.wait(timeout=30)
        with pytest.raises(isolation.ChildGone, match="launcher\\) was killed") as gone:
            child.recv(10, "a call")
        assert gone.value.code == "crashed"
    finally:
        child.kill()
