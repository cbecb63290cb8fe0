"""The parent's side of the candidate's process: spawn it, talk to it with a deadline, kill it.

``spawn`` starts a small **launcher** (``python -c``, no torch) in a new session; the launcher starts
the child (:mod:`.child`) and reports the child's exit status on its own stdout. The child's parent
is therefore the launcher, not the harness: a candidate that kills ``os.getppid()`` kills the
launcher, and the harness sees it. Every process of the session carries a random token in its
environment; at the end (and on any failure) the whole process group is SIGKILLed and any process
still carrying the token (one that left the group with ``setsid``) is found in ``/proc`` and killed
too, before the parent writes anything. Launcher and child also ask Linux to SIGKILL them when their
parent ends (``PR_SET_PDEATHSIG``), so a harness that is itself killed (a time limit around
``warpsmith check`` or ``solve``) leaves no orphan computing (Linux ties this to the thread that
started the launcher: ``check`` runs it from the calling thread, which outlives the check).

A request that gets no reply within its deadline is a ``timeout`` (SIGKILL, not SIGTERM, so a
candidate that ignores SIGTERM is still stopped). A reply channel that closes is ``exited`` (the
child ended with a status >= 0, e.g. ``sys.exit``/``os._exit`` at import, in ``__init__`` or in a
call) or ``crashed`` (a signal: SIGABRT from a heap-corrupting kernel, SIGSEGV, SIGKILL when out of
memory, or the launcher killed).
"""
from __future__ import annotations

import json
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

TOKEN_VAR = "WARPSMITH_CHECK_SESSION"

_LAUNCHER = """
import ctypes, os, signal, subprocess, sys
def die_with_parent():  # Linux: SIGKILL when the parent ends, even by SIGKILL (no orphan keeps computing)
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        pass
die_with_parent()
if os.getppid() != int(sys.argv[4]):
    sys.exit(1)  # the harness ended before the line above took effect
fds = (int(sys.argv[1]), int(sys.argv[2]))
log = open(os.path.join(sys.argv[3], "child.log"), "wb")
p = subprocess.Popen([sys.executable, "-m", "warpsmith.check.child", *sys.argv[1:4]], pass_fds=fds,
                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
for fd in fds:
    os.close(fd)
sys.stdout.write(str(p.wait()) + "\\n")
sys.stdout.flush()
"""


class ChildGone(Exception):
    """The child did not answer: ``code`` is ``timeout``, ``exited`` or ``crashed``."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


@dataclass
class Child:
    launcher: subprocess.Popen
    ctrl_w: int
    reply_r: int
    token: str
    buf: bytes = b""

    def send(self, doc: dict[str, Any]) -> None:
        data = (json.dumps(doc) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.ctrl_w, data):]
        except (BrokenPipeError, OSError):
            raise self._gone("while the harness was sending it a request") from None

    def recv(self, timeout_s: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ChildGone("timeout", f"{what} did not return within {timeout_s:g} s (killed with SIGKILL)")
            ready, _, _ = select.select([self.reply_r], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self.reply_r, 1 << 16)
            if not chunk:
                raise self._gone(f"during {what}")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:  # the launcher only ends after the child: ended now, it was killed (by the candidate)
            self.launcher.wait(timeout=0.02)
        except subprocess.TimeoutExpired:
            pass
        else:
            self.kill()
            raise ChildGone("crashed", f"the candidate's parent process (the harness's launcher) was killed during "
                                       f"{what}")
        try:
            doc = json.loads(line)
        except ValueError:
            self.kill()
            raise ChildGone("crashed", f"the harness channel carried garbage during {what}") from None
        if not isinstance(doc, dict):
            self.kill()
            raise ChildGone("crashed", f"the harness channel carried garbage during {what}")
        return doc

    def request(self, doc: dict[str, Any], timeout_s: float, what: str) -> dict[str, Any]:
        self.send(doc)
        return self.recv(timeout_s, what)

    def _gone(self, when: str) -> ChildGone:
        status = self._status()
        self.kill()
        if status is None:
            return ChildGone("crashed", f"the candidate's process went away {when}, and its launcher was killed "
                                        "(a candidate that kills its parent)")
        if status < 0:
            name = signal.Signals(-status).name if -status in signal.valid_signals() else str(-status)
            hint = {"SIGKILL": " (out of memory, or killed)", "SIGABRT": " (abort: e.g. heap corruption)",
                    "SIGSEGV": " (invalid memory access)", "SIGXCPU": " (CPU time limit)",
                    "SIGXFSZ": " (file size limit)"}.get(name, "")
            return ChildGone("crashed", f"the candidate's process was killed by {name}{hint} {when}")
        return ChildGone("exited", f"the candidate's process exited with status {status} {when}")

    def _status(self) -> int | None:
        """The child's exit status as the launcher reported it (None: the launcher was killed first)."""
        try:
            out, _ = self.launcher.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            return None
        text = (out or b"").decode(errors="replace").strip().splitlines()
        try:
            return int(text[-1]) if text else None
        except ValueError:
            return None

    def kill(self) -> None:
        """SIGKILL the session's process group and every process that still carries the token."""
        try:
            os.killpg(self.launcher.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in _carrying(self.token):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.launcher.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        for fd in (self.ctrl_w, self.reply_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.ctrl_w = self.reply_r = -1

    def close(self, timeout_s: float = 5.0) -> None:
        if self.ctrl_w >= 0:
            try:
                self.send({"op": "bye"})
            except ChildGone:
                pass
            try:
                self.launcher.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


def _carrying(token: str) -> list[int]:
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def spawn(exchange: str, env_extra: dict[str, str] | None = None) -> Child:
    """Start the launcher and the child; the child waits for its setup message."""
    ctrl_r, ctrl_w = os.pipe()
    reply_r, reply_w = os.pipe()
    token = secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR}
    env[TOKEN_VAR] = token
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds warpsmith/
    env["PYTHONPATH"] = os.pathsep.join([src] + [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                 if p])
    tmp = os.path.join(exchange, "tmp")  # the child's temporary files go where the parent removes them
    os.makedirs(tmp, exist_ok=True)
    env["TMPDIR"] = tmp
    env.update(env_extra or {})
    launcher = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(ctrl_r), str(reply_w), exchange, str(os.getpid())],
                                pass_fds=(ctrl_r, reply_w), env=env, stdout=subprocess.PIPE,
                                start_new_session=True, cwd=exchange)
    os.close(ctrl_r)
    os.close(reply_w)
    return Child(launcher, ctrl_w, reply_r, token)
