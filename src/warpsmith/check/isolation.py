"""The parent's side of the candidate's process: spawn it, talk to it with a deadline, kill it.

``spawn`` starts the **launcher** (:mod:`.sandbox`, run as a plain script: no torch) in a new
session. The launcher puts the candidate's process (the *child*, :mod:`.child`) in a sandbox of its
own: new user, pid, mount, IPC and network namespaces, a read-only filesystem but for the exchange
and work folders, a fresh ``/proc`` that shows only the sandbox's processes, a ``/dev`` with no disk,
no capabilities, no new privileges, no Unix sockets. The child cannot name the harness's process
(no ``ptrace``, no ``/proc/PID/mem``, no signal), cannot write the report or the reference, and
every process it starts lives in the pid namespace, which the kernel empties when it ends.

The launcher's first line on its stdout says what the sandbox achieved; it becomes
:attr:`Child.isolation`, ``{"isolated": bool, "how": "...", "missing": ["..."]}``. Where the
machine does not allow it (no unprivileged user namespaces, a container's masked ``/proc``), the
child still runs, with what could be done (no capabilities, no new privileges, the launcher as
subreaper killing every descendant it gets back) and ``isolated`` is false, with the reasons: the
report and the exit status say so, never silently weaker. :data:`ISOLATE` (``False``) forces that
fallback (tests).

Killing (:meth:`Child.kill`): SIGTERM to the launcher, which SIGKILLs the sandbox's init (its own
child, so no recycled pid is ever hit) and exits only when every process of the namespace has been
reaped; SIGKILL to the launcher's process group only if it does not exit in time. When ``kill``
returns, nothing of the candidate runs (with isolation). The launcher and every process under it
also die with their parent (``PR_SET_PDEATHSIG``), so a harness that is itself killed leaves no orphan
computing (Linux ties this to the thread that started the launcher: ``check`` runs it from the
calling thread, which outlives the check).

The child's environment has no ``WARPSMITH_*`` variable (a candidate cannot tell the harness from
its environment); its ``TMPDIR``, ``HOME``, ``XDG_CACHE_HOME``, ``TRITON_CACHE_DIR`` and
``TORCHINDUCTOR_CACHE_DIR`` point into the exchange folder, the only place besides its working
directory it can write (``PYTHONUSERBASE`` keeps the user's site-packages where they were).

**The zygote** (:mod:`.zygote`): by default the launcher is not exec'd but forked by a per-harness
server that has imported torch once, and init forks the child from it instead of exec'ing
``python -m warpsmith.check.child`` (~1.5 CPU-s saved per check); the sandbox is built the same way.
The harness then holds a :class:`.zygote.Launcher` (a pidfd) instead of a ``Popen``.
``WARPSMITH_CHECK_ZYGOTE=0`` (or :data:`ZYGOTE` ``False``) turns it off; a zygote that cannot start or
fails, and a spawn from a thread other than the main one, use the exec path. ``isolation["start"]``
says which was used (``"zygote"`` or ``"exec (why)"``); the verdict does not depend on it.

A request that gets no reply within its deadline is a ``timeout`` (SIGKILL, not SIGTERM, so a
candidate that ignores SIGTERM is still stopped). A reply channel that closes is ``exited`` (the
child ended with a status >= 0, e.g. ``sys.exit``/``os._exit`` at import, in ``__init__`` or in a
call) or ``crashed`` (a signal: SIGABRT from a heap-corrupting kernel, SIGSEGV, SIGKILL when out of
memory, or the launcher killed).
"""
from __future__ import annotations

import json
import os
import select
import signal
import site
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from . import sandbox, zygote

ISOLATE = True  # False: run the child without the sandbox (reported as not isolated); for tests
ZYGOTE = True  # False: always the exec path (as WARPSMITH_CHECK_ZYGOTE=0 does); for tests
HELLO_TIMEOUT_S = 60.0  # the launcher's first line (what the sandbox achieved)
KILL_TIMEOUT_S = 20.0  # the launcher's own end after a kill (the namespace emptied)
CHILD_COMMAND = (sys.executable, "-m", "warpsmith.check.child")
_SANDBOX = os.path.abspath(sandbox.__file__)
LIVE: set[Any] = set()  # launchers (Popen or zygote.Launcher) whose candidate may still run (see end_all)


class ChildGone(Exception):
    """The child did not answer: ``code`` is ``timeout``, ``exited`` or ``crashed``."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


@dataclass
class Child:
    launcher: Any  # subprocess.Popen (exec path) or zygote.Launcher (the same interface, through a pidfd)
    ctrl_w: int
    reply_r: int
    isolation: dict[str, Any] = field(default_factory=lambda: {"isolated": False, "how": "",
                                                               "missing": ["not started"]})
    buf: bytes = b""
    out: bytes = b""  # what the launcher wrote on its stdout and was not parsed yet

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
        try:  # the launcher ends after the child only, and then reports the child's exit status last
            self.launcher.wait(timeout=0.02)
        except subprocess.TimeoutExpired:
            pass
        else:
            # Ended with no status: it was killed (a candidate that kills its parent). With a status, the child
            # ended right after this reply (a candidate that exits, or the child after a load it refused):
            # the reply stands, and the next request finds the child gone.
            if self._status() is None:
                self.kill()
                raise ChildGone("crashed", f"the candidate's parent process (the harness's launcher) was killed "
                                           f"during {what}")
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
                    "SIGXFSZ": " (file size limit)", "SIGSYS": " (a forbidden system call)"}.get(name, "")
            return ChildGone("crashed", f"the candidate's process was killed by {name}{hint} {when}")
        return ChildGone("exited", f"the candidate's process exited with status {status} {when}")

    def _read_out(self, timeout_s: float) -> bool:
        """Read the launcher's stdout for up to ``timeout_s``; False at its end (EOF)."""
        fd = self.launcher.stdout.fileno() if self.launcher.stdout is not None else -1
        if fd < 0:
            return False
        ready, _, _ = select.select([fd], [], [], max(timeout_s, 0.0))
        if not ready:
            return True
        chunk = os.read(fd, 1 << 16)
        self.out += chunk
        return bool(chunk)

    def _hello(self, timeout_s: float) -> None:
        """The launcher's first line: what the sandbox achieved (not isolated if it says nothing)."""
        deadline = time.monotonic() + timeout_s
        open_ = True
        while b"\n" not in self.out and open_ and time.monotonic() < deadline:
            open_ = self._read_out(deadline - time.monotonic())
        line, sep, self.out = self.out.partition(b"\n")
        try:
            doc = json.loads(line)["isolation"] if sep else None
        except (ValueError, KeyError, TypeError):
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("isolated"), bool):
            missing = [str(m) for m in doc.get("missing") or []]
            self.isolation = {"isolated": doc["isolated"] and not missing, "how": str(doc.get("how", "")),
                              "missing": missing}
        else:
            self.isolation = {"isolated": False, "how": "", "missing": [
                "the launcher did not report the sandbox " + ("in time" if open_ else "(it ended)")]}

    def _status(self) -> int | None:
        """The child's exit status as the launcher reported it (None: the launcher was killed first)."""
        try:
            self.launcher.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None
        while self._read_out(0.5):
            pass
        text = self.out.decode(errors="replace").strip().splitlines()
        try:
            return int(text[-1]) if text else None
        except ValueError:
            return None

    def kill(self) -> None:
        """End the candidate's processes, all of them, and return once they are gone (see the module docstring)."""
        if self.launcher.poll() is None:
            try:
                self.launcher.send_signal(signal.SIGTERM)  # the launcher SIGKILLs the sandbox and reaps it all
            except ProcessLookupError:
                pass
            try:
                self.launcher.wait(timeout=KILL_TIMEOUT_S)
            except subprocess.TimeoutExpired:  # pragma: no cover - a launcher that cannot end
                _kill_hard(self.launcher)
                self.launcher.wait(timeout=5)
                self.isolation = dict(self.isolation, isolated=False, missing=[
                    *self.isolation.get("missing", []), "the launcher did not confirm the end of the candidate's "
                                                        "processes"])
        LIVE.discard(self.launcher)
        if isinstance(self.launcher, zygote.Launcher):
            self.launcher.release()
        for fd in (self.ctrl_w, self.reply_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.ctrl_w = self.reply_r = -1
        if self.launcher.stdout is not None:
            self.launcher.stdout.close()

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


def end_all(timeout_s: float = 10.0) -> int:
    """End every candidate process a check started and did not end yet (a solve stopped by its time
    limit, possibly between a launcher's start and its first reply); returns how many launchers."""
    left = list(LIVE)
    for launcher in left:
        if launcher.poll() is None:
            try:
                launcher.send_signal(signal.SIGTERM)  # the launcher SIGKILLs the sandbox and reaps it all
            except ProcessLookupError:
                pass
    for launcher in left:
        try:
            launcher.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_hard(launcher)
        LIVE.discard(launcher)
    return len(left)


def _kill_hard(launcher: Any) -> None:
    """SIGKILL a launcher that did not end: its process group (exec path: the harness's own child, not
    reaped yet), or the launcher through its pidfd (zygote path: never a bare pid)."""
    try:
        if isinstance(launcher, zygote.Launcher):
            launcher.kill()
        else:
            os.killpg(launcher.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def child_env(exchange: str) -> dict[str, str]:
    """The child's environment: the harness's, without ``WARPSMITH_*``, with writable places in ``exchange``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARPSMITH_")}
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds warpsmith/
    env["PYTHONPATH"] = os.pathsep.join([src] + [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                 if p])
    env.setdefault("PYTHONUSERBASE", site.getuserbase())  # HOME moves: the user's site-packages do not
    places = {"TMPDIR": "tmp", "HOME": "home", "XDG_CACHE_HOME": "cache", "TRITON_CACHE_DIR": "cache/triton",
              "TORCHINDUCTOR_CACHE_DIR": "cache/inductor"}
    for var, rel in places.items():
        path = os.path.join(exchange, rel)
        os.makedirs(path, exist_ok=True)
        env[var] = path
    env["TMP"] = env["TEMP"] = env["TMPDIR"]
    return env


def spawn(exchange: str, env_extra: dict[str, str] | None = None, *, writable: tuple[str, ...] | list[str] = (),
          command: tuple[str, ...] | list[str] | None = None, isolate: bool | None = None) -> Child:
    """Start the launcher and the child; the child waits for its setup message.

    ``writable``: folders the child may write besides ``exchange`` (its working directory).
    ``command``: the child's command line (default :data:`CHILD_COMMAND`), to which the control and
    reply descriptors and ``exchange`` are appended. ``isolate``: default :data:`ISOLATE`.
    """
    exchange = os.path.realpath(exchange)
    env = child_env(exchange)
    env.update(env_extra or {})
    protect = sorted(os.path.join(exchange, n) for n in os.listdir(exchange)
                     if os.path.isfile(os.path.join(exchange, n)) and not os.path.islink(os.path.join(exchange, n)))
    ctrl_r, ctrl_w = os.pipe()
    reply_r, reply_w = os.pipe()
    spec = {"ctrl": ctrl_r, "reply": reply_w, "exchange": exchange, "harness": os.getpid(),
            "isolate": ISOLATE if isolate is None else bool(isolate),
            "writable": [exchange] + [os.path.realpath(p) for p in writable],
            "protect": sorted(set(protect) | {os.path.join(exchange, "child.log")}),
            "command": list(command or CHILD_COMMAND), "mount_setattr": sandbox.USE_MOUNT_SETATTR,
            "zygote_child": command is None or tuple(command) == CHILD_COMMAND}
    why_not = "turned off (isolation.ZYGOTE)" if not ZYGOTE else zygote.enabled()
    launcher: Any = None
    if why_not is None:
        try:
            launcher = zygote.spawn_launcher(spec, env, ctrl_r, reply_w)
            start = "zygote"
        except OSError as e:
            why_not = str(e)
    if launcher is None:
        start = f"exec ({why_not})"
        launcher = subprocess.Popen([sys.executable, "-I", _SANDBOX], pass_fds=(ctrl_r, reply_w), env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
                                    cwd=exchange)
    LIVE.add(launcher)
    os.close(ctrl_r)
    os.close(reply_w)
    if isinstance(launcher, subprocess.Popen):
        try:  # on stdin, not in the command line the sandbox's processes can read (it names the harness's pid)
            launcher.stdin.write(json.dumps(spec).encode())
            launcher.stdin.close()
        except OSError:
            pass
    child = Child(launcher, ctrl_w, reply_r)
    child._hello(HELLO_TIMEOUT_S)
    child.isolation["start"] = start
    return child
