"""The zygote: a process that has imported torch once and forks ready launchers for ``warpsmith check``.

Starting the candidate's process costs ~1.5-2 CPU-s, most of it ``import torch``. The zygote pays it
once per harness process: :func:`spawn_launcher` (called by :func:`.isolation.spawn`) starts it lazily
as ``python -I zygote.py FD`` (the standard library and torch only: it never imports warpsmith, never
sees the harness's data or a reference output, never initialises CUDA), with the environment the
candidate gets minus the per-check folders. It serves requests on a Unix ``SOCK_SEQPACKET`` socketpair:

- harness -> zygote: ``{"spec": ..., "env": ...}`` (the launcher's spec of :mod:`.sandbox`, the child's
  environment) with three descriptors by ``SCM_RIGHTS``: the child's control read end, its reply write
  end, and the write end of the pipe that plays the launcher's stdout;
- the zygote forks. The fork (single-threaded, so ``unshare(CLONE_NEWUSER)`` works although torch
  started a thread in the zygote) closes the zygote's socket and every descriptor but those three,
  calls ``setsid``, dies with the zygote (``PR_SET_PDEATHSIG``), and runs :func:`.sandbox.launcher`
  unchanged but for one step: where init would exec ``python -m warpsmith.check.child``, it forks and
  the fork does what that exec did (new session, die with init, stdin ``/dev/null``, stdout and stderr
  to ``child.log``, the exchange as working directory, only the control and reply descriptors open,
  the spawn's environment, ``sys.path`` and ``sys.argv``, ``tempfile.tempdir`` reset) and runs
  ``warpsmith.check.child`` as ``__main__``. Any other command (tests' probes) is exec'd as before;
- zygote -> harness: ``{"pid": N}`` and a pidfd of the launcher (``os.pidfd_open``). The harness signals
  it with ``pidfd_send_signal`` and learns its end from the pidfd's readiness (:class:`Launcher`), so no
  pid that could be reused is ever signalled; the zygote reaps it.

The candidate cannot reach the zygote: the socket and every other descriptor of the zygote are closed
in the launcher's fork before anything else runs, the sandbox's seccomp filter refuses new Unix
sockets, and the zygote (outside the pid namespace) cannot be named. The zygote dies with the harness
(``PR_SET_PDEATHSIG``, checked with ``getppid``), and every launcher with the zygote; the harness also
closes the socket at exit, which ends it. It is only started from the harness's main thread (Linux
ties ``PR_SET_PDEATHSIG`` to the thread that started the process: a worker thread's end would kill
it); other threads, ``WARPSMITH_CHECK_ZYGOTE=0`` and any failure use the launcher's exec path, and
:attr:`.isolation.Child.isolation` ``["start"]`` says which was used, and why.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

READY_TIMEOUT_S = 120.0  # the zygote's start: torch's import (slow on a shared machine)
REQUEST_TIMEOUT_S = 30.0  # one fork and its pidfd
MAX_MESSAGE = 1 << 20
CHILD_MODULE = "warpsmith.check.child"


# ---- the harness's side -----------------------------------------------------------------------------
class Launcher:
    """A launcher forked by the zygote, seen through a pidfd: the part of ``subprocess.Popen`` that
    :mod:`.isolation` uses (``poll``, ``wait``, ``send_signal``, ``kill``, ``stdout``, ``pid``)."""

    def __init__(self, pid: int, pidfd: int, stdout_r: int) -> None:
        self.pid, self.pidfd = pid, pidfd
        self.stdout = os.fdopen(stdout_r, "rb", buffering=0)
        self.returncode: int | None = None  # 0 once ended (the zygote reaps it; its status is on stdout)

    def poll(self) -> int | None:
        if self.returncode is None and (self.pidfd < 0 or select.select([self.pidfd], [], [], 0)[0]):
            self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"launcher {self.pid}", timeout)
            select.select([self.pidfd], [], [], left)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.pidfd < 0:
            raise ProcessLookupError(self.pid)
        signal.pidfd_send_signal(self.pidfd, sig)  # ProcessLookupError once it has ended: never another process

    def kill(self) -> None:
        try:
            self.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass

    def release(self) -> None:
        if self.pidfd >= 0:
            self.poll()
            os.close(self.pidfd)
            self.pidfd = -1

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit
            pass


class Zygote:
    """The harness's handle on its zygote process (one per harness process; see :func:`spawn_launcher`)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, start_new_session=True, cwd="/")
        finally:
            theirs.close()
        self.sock.settimeout(READY_TIMEOUT_S)
        self.sock.send(json.dumps({"harness": os.getpid()}).encode())  # not on its command line
        doc = json.loads(self.sock.recv(MAX_MESSAGE) or b"{}")
        if not doc.get("ready"):
            raise OSError(f"the zygote did not start: {doc.get('error', 'it ended')}")
        self.sock.settimeout(REQUEST_TIMEOUT_S)

    def fork(self, spec: dict, env: dict[str, str], fds: tuple[int, int, int]) -> tuple[int, int]:
        """A launcher for ``spec``: its pid and a pidfd of it."""
        socket.send_fds(self.sock, [json.dumps({"spec": spec, "env": env}).encode()], list(fds))
        msg, got, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 1)
        doc = json.loads(msg or b"{}")
        if "pid" not in doc or len(got) != 1:
            for fd in got:
                os.close(fd)
            raise OSError(f"the zygote did not fork: {doc.get('error', 'it ended')}")
        return int(doc["pid"]), got[0]

    def close(self) -> None:
        self.sock.close()  # the zygote ends at EOF
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_LOCK = threading.Lock()
_STATE: dict = {"zygote": None, "broken": None}


def base_env() -> dict[str, str]:
    """The zygote's environment: the harness's without ``WARPSMITH_*`` (what every child gets, but its
    folders, which the spawn's environment sets in each fork)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("WARPSMITH_")}


def enabled() -> str | None:
    """None when the zygote may be used here, else why not."""
    if os.environ.get("WARPSMITH_CHECK_ZYGOTE", "1").strip().lower() in ("0", "off", "false", "no"):
        return "WARPSMITH_CHECK_ZYGOTE=0"
    if threading.current_thread() is not threading.main_thread():
        return "not the harness's main thread"
    if not (hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal") and hasattr(socket, "send_fds")):
        return "no pidfd or SCM_RIGHTS support in this Python"
    return _STATE["broken"]


def spawn_launcher(spec: dict, env: dict[str, str], ctrl_r: int, reply_w: int) -> Launcher:
    """Fork a launcher for ``spec`` from the zygote (started at the first call). Raises ``OSError`` when
    the zygote cannot start or serve: the caller uses the exec path, and later calls do too."""
    with _LOCK:
        if _STATE["broken"]:
            raise OSError(_STATE["broken"])
        out_r, out_w = os.pipe()
        try:
            if _STATE["zygote"] is None:
                _STATE["zygote"] = Zygote(base_env())
            spec = {k: v for k, v in spec.items() if k not in ("harness", "ctrl", "reply")}  # the fork's own
            pid, pidfd = _STATE["zygote"].fork(spec, env, (ctrl_r, reply_w, out_w))
        except (OSError, ValueError) as e:
            os.close(out_r)
            _STATE["broken"] = f"the zygote failed ({type(e).__name__}: {e})"
            _shutdown()
            raise OSError(_STATE["broken"]) from None
        finally:
            os.close(out_w)
        return Launcher(pid, pidfd, out_r)


def _shutdown() -> None:
    z, _STATE["zygote"] = _STATE["zygote"], None
    if z is not None:
        try:
            z.close()
        except OSError:
            pass


def _at_exit() -> None:
    with _LOCK:
        _shutdown()


if __name__ != "__main__":
    import atexit

    atexit.register(_at_exit)


# ---- the zygote's side (standard library and torch only) ----------------------------------------------
def _keep_only(keep: set[int]) -> None:
    """Close every descriptor but ``keep`` (``close_range`` between them)."""
    start = 0
    for fd in sorted(keep) + [1 << 30]:
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1


def _child_path(env: dict[str, str], cwd: str, base: list[str]) -> list[str]:
    """The ``sys.path`` that ``python -m`` started in ``cwd`` with ``env`` would have (``base``: the
    zygote's, which ``-I`` left without ``PYTHONPATH`` and the user's site-packages)."""
    import site

    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sites = [p for p in base if p.endswith(("site-packages", "dist-packages"))]
    std = [p for p in base if p not in sites]
    user = []
    if env.get("PYTHONUSERBASE") and not env.get("PYTHONNOUSERSITE"):
        site.USER_BASE = env["PYTHONUSERBASE"]
        site.USER_SITE = None
        path = site.getusersitepackages()
        if os.path.isdir(path):
            user = [path]
    return [cwd] + extra + std + user + sites


def _fork_child(sandbox, env: dict[str, str], base_path: list[str]):
    """init's ``start_child``: fork the child with torch imported (``spec["zygote_child"]``), else exec."""
    def start(spec: dict, log_fd: int) -> int:
        if not spec.get("zygote_child"):
            return sandbox.exec_child(spec, log_fd)
        pid = os.fork()
        if pid:
            return pid
        code = 1
        try:
            os.setsid()
            sandbox._die_with_parent()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            ctrl, reply, exchange = spec["ctrl"], spec["reply"], spec["exchange"]
            _keep_only({0, 1, 2, ctrl, reply})
            os.set_inheritable(ctrl, True)
            os.set_inheritable(reply, True)
            os.chdir(exchange)
            sandbox._prctl(sandbox.PR_SET_DUMPABLE, 1)  # as after an exec (init made itself non-dumpable)
            for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                        signal.SIGUSR2, signal.SIGALRM):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            os.environ.clear()
            os.environ.update(env)
            import importlib
            import runpy
            import tempfile

            tempfile.tempdir = None  # TMPDIR is the exchange's now
            sys.path[:] = _child_path(env, exchange, base_path)
            importlib.invalidate_caches()
            sys.argv = ["-m", str(ctrl), str(reply), exchange]
            runpy.run_module(CHILD_MODULE, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - as python -m would: the traceback to child.log, status 1
            import traceback

            traceback.print_exc()
        finally:
            for f in (sys.stdout, sys.stderr):
                try:
                    f.flush()
                except Exception:  # noqa: BLE001
                    pass
            os._exit(code)
    return start


def _launch(sandbox, sock: socket.socket, doc: dict, fds: list[int], base_path: list[str]) -> None:
    """In the zygote's fork: become the launcher of ``doc["spec"]`` (never returns)."""
    code = 125
    try:
        zygote = os.getppid()
        sock.close()
        os.setsid()
        sandbox._die_with_parent()
        if os.getppid() != zygote:
            os._exit(1)
        ctrl, reply, out = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        _keep_only({0, 1, 2, ctrl, reply})  # the zygote's socket, the pipes' other ends: gone
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        spec, env = doc["spec"], doc["env"]
        spec.update(ctrl=ctrl, reply=reply, harness=zygote)  # the launcher's parent is the zygote
        os.environ.clear()
        os.environ.update(env)  # what the launcher's exec path passes on to the child
        os.chdir(spec["exchange"])
        del doc, sock
        code = sandbox.launcher(spec, start_child=_fork_child(sandbox, env, base_path))
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(code)


def _reap_all(limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.01)
        except ChildProcessError:
            return


def _serve(fd: int) -> int:
    import importlib.util

    sock = socket.socket(fileno=fd)
    sock.set_inheritable(False)
    here = os.path.dirname(os.path.abspath(__file__))
    load = importlib.util.spec_from_file_location("_warpsmith_sandbox", os.path.join(here, "sandbox.py"))
    sandbox = importlib.util.module_from_spec(load)
    load.loader.exec_module(sandbox)  # stdlib only, not warpsmith's package
    sandbox._die_with_parent()
    hello = json.loads(sock.recv(MAX_MESSAGE) or b"{}")
    harness = hello.get("harness")
    if os.getppid() != harness:
        return 1  # the harness ended before the line above took effect
    try:
        import torch  # noqa: F401  (the whole point; CUDA stays uninitialised: a fork could not use it)
    except BaseException as e:  # noqa: BLE001
        sock.send(json.dumps({"error": f"import torch: {type(e).__name__}: {e}"}).encode())
        return 1
    base_path = list(sys.path)
    sock.send(b'{"ready": true}')
    while True:
        ready = select.select([sock], [], [], 1.0)[0]
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        if os.getppid() != harness:
            return 0
        if not ready:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 3)
        if not msg:
            _reap_all(3.0)  # the last launchers' resource use counts to the harness's children
            return 0  # the harness closed its end
        try:
            doc = json.loads(msg)
            if len(fds) != 3 or not isinstance(doc.get("spec"), dict) or not isinstance(doc.get("env"), dict):
                raise ValueError("a request carries a spec, an environment and three descriptors")
            pid = os.fork()
            if pid == 0:
                _launch(sandbox, sock, doc, fds, base_path)
            pidfd = os.pidfd_open(pid)  # before any waitpid: the pid is still this launcher's
        except (ValueError, OSError) as e:
            for f in fds:
                os.close(f)
            sock.send(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
            continue
        for f in fds:
            os.close(f)
        try:
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
        finally:
            os.close(pidfd)


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1])))
