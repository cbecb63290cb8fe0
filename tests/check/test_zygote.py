"""The zygote (:mod:`warpsmith.check.zygote`): it serves several checks with the verdicts of the exec path,
the candidate finds none of its descriptors and cannot ask it for anything, it dies with the harness,
and the exec path takes over where it is off or broken."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import warpsmith.check.isolation as isolation
import warpsmith.check.zygote as zygote
from warpsmith.check import check

ZOO = Path(__file__).parents[1] / "verify" / "zoo"
SOFTMAX, SETS = ZOO / "softmax.py", ["batch_size=6", "dim=40"]
SRC = str(Path(isolation.__file__).parents[2])


@pytest.fixture
def zygote_on(monkeypatch):
    monkeypatch.delenv("WARPSMITH_CHECK_ZYGOTE", raising=False)
    monkeypatch.setattr(isolation, "ZYGOTE", True)


def _verdicts(candidates):
    reports = [check(SOFTMAX, ZOO / c, overrides=SETS) for c in candidates]
    return [(r.verdict, r.reason, r.protocol["isolation"]["isolated"]) for r in reports], \
        [r.protocol["isolation"].get("start") for r in reports]


def test_the_zygote_serves_several_checks_with_the_exec_paths_verdicts(zygote_on, monkeypatch):
    cands = ["softmax_triton.py", "softmax_constant.py", "softmax_triton.py", "softmax_exit_import.py"]
    on, starts = _verdicts(cands)
    assert starts == ["zygote"] * 4
    server = zygote._STATE["zygote"]
    assert server is not None and server.proc.poll() is None  # one zygote, kept for later spawns
    monkeypatch.setenv("WARPSMITH_CHECK_ZYGOTE", "0")
    off, starts = _verdicts(cands)
    assert all(s == "exec (WARPSMITH_CHECK_ZYGOTE=0)" for s in starts)
    assert on == off
    assert [v for v, _, _ in on] == ["accepted", "rejected", "accepted", "rejected"]
    assert zygote._STATE["zygote"] is server and server.proc.poll() is None


# At import: every descriptor it can find, what it is, and whether it can talk to it (a zygote's socket
# would accept a request with "isolate": false); reported in its error (the verdict is candidate_error).
FDSPY = '''
import errno, json, os, socket, stat

found, sent = {}, []
names = set(os.listdir("/proc/self/fd"))
for fd in range(3, 1001):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    kind = {stat.S_IFIFO: "pipe", stat.S_IFSOCK: "socket", stat.S_IFREG: "file", stat.S_IFCHR: "char",
            stat.S_IFDIR: "dir"}.get(stat.S_IFMT(st.st_mode), "other")
    try:
        link = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        link = "?"
    found[fd] = kind + ":" + ("pipe" if link.startswith("pipe:") else link.split("/")[-1])
    dup = os.dup(fd)
    try:
        s = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        continue
    try:
        socket.send_fds(s, [json.dumps({"spec": {"isolate": False}, "env": {}}).encode()], [0, 1, 2])
        sent.append(fd)
    except OSError:
        pass
raise RuntimeError("FDSPY" + json.dumps({"fds": found, "listed": sorted(names), "sent": sent}) + "FDSPY")
'''


def _spy(tmp_path, name):
    cand = tmp_path / f"{name}.py"
    cand.write_text(FDSPY)
    report = check(SOFTMAX, cand, overrides=SETS)
    assert report.reason == "candidate_error", report.to_json()
    found = json.loads(re.search(r"FDSPY(.*?)FDSPY", json.dumps(report.to_json()).replace('\\"', '"')).group(1))
    return found, report.protocol["isolation"]


def test_the_candidate_finds_no_descriptor_of_the_zygote_and_reaches_nothing(tmp_path, zygote_on, monkeypatch):
    on, iso_on = _spy(tmp_path, "on")
    monkeypatch.setenv("WARPSMITH_CHECK_ZYGOTE", "0")
    off, iso_off = _spy(tmp_path, "off")
    assert iso_on["start"] == "zygote" and iso_off["start"].startswith("exec")
    # what today's child has, nothing more (the numbers differ: the zygote received them anew)
    assert sorted(on["fds"].values()) == sorted(off["fds"].values()) == ["pipe:pipe"] * 2, (on, off)
    assert len(on["listed"]) == len(off["listed"]), (on, off)
    assert on["sent"] == [] and not any(v.startswith("socket") for v in on["fds"].values()), on
    assert iso_on["isolated"] == iso_off["isolated"]


HARNESS = '''
import json, os, subprocess, sys, tempfile, time
import warpsmith.check.isolation as isolation
import warpsmith.check.zygote as zygote
a, b = tempfile.mkdtemp(), tempfile.mkdtemp()
kids = [isolation.spawn(a)]  # the candidate's child, forked with torch: waits for its setup
kids.append(isolation.spawn(b, {"PROBE_TOKEN": sys.argv[1]}, command=[sys.executable, "-c", """
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # " + os.environ["PROBE_TOKEN"]],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.write(int(sys.argv[2]), b'{"ok": true}\\\\n')
os.read(int(sys.argv[1]), 1)
"""]))
assert kids[1].recv(60, "the forker") == {"ok": True}
print(json.dumps({"zygote": zygote._STATE["zygote"].proc.pid, "starts": [k.isolation["start"] for k in kids]}),
      flush=True)
time.sleep(600)
'''


def _descendants(root):
    """(pid, start time) of every process under ``root``."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                parent[int(entry)] = (int(fields[1]), int(fields[19]))
            except (OSError, IndexError):
                pass
    found, todo = set(), [root]
    while todo:
        p = todo.pop()
        for pid, (ppid, start) in parent.items():
            if ppid == p and (pid, start) not in found:
                found.add((pid, start))
                todo.append(pid)
    return found


def _alive(proc):
    pid, start = proc
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19]) == start and fields[0] != b"Z"
    except (OSError, IndexError):
        return False


def test_the_harness_dying_ends_the_zygote_and_every_candidate(tmp_path):
    token = f"zygote-probe-{os.getpid()}-{time.time_ns()}"
    env = {k: v for k, v in os.environ.items() if k != "WARPSMITH_CHECK_ZYGOTE"}
    env["PYTHONPATH"] = os.pathsep.join([SRC, env.get("PYTHONPATH", "")])
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, token], stdout=subprocess.PIPE, env=env)
    try:
        doc = json.loads(harness.stdout.readline() or b"{}")
        assert doc.get("starts") == ["zygote", "zygote"], doc
        procs = _descendants(harness.pid)
        # the zygote, two launchers, their inits and children, the grandchild
        assert any(p == doc["zygote"] for p, _ in procs) and len(procs) >= 8, procs
    finally:
        harness.kill()
        harness.wait()
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in procs if _alive(p)] == []


def test_the_exec_path_takes_over_where_the_zygote_is_off_or_broken(zygote_on, monkeypatch):
    monkeypatch.setenv("WARPSMITH_CHECK_ZYGOTE", "0")
    report = check(SOFTMAX, ZOO / "softmax_triton.py", overrides=SETS)
    assert report.verdict == "accepted"
    assert report.protocol["isolation"]["start"] == "exec (WARPSMITH_CHECK_ZYGOTE=0)"
    monkeypatch.delenv("WARPSMITH_CHECK_ZYGOTE")
    monkeypatch.setattr(zygote, "_STATE", {"zygote": None, "broken": None})  # a fresh one, which fails to start
    monkeypatch.setattr(zygote, "READY_TIMEOUT_S", 0.001)
    report = check(SOFTMAX, ZOO / "softmax_triton.py", overrides=SETS)
    iso = report.protocol["isolation"]
    assert report.verdict == "accepted" and iso["start"].startswith("exec (the zygote failed"), iso
    assert zygote._STATE["broken"] and zygote._STATE["zygote"] is None  # and stays off in this process
    assert check(SOFTMAX, ZOO / "softmax_constant.py", overrides=SETS).protocol["isolation"]["start"] == iso["start"]
