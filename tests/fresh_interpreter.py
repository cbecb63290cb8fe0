"""Code run as in a new interpreter (``python -c CODE``), without paying for torch's import each time.

Some proofs are claimed as `warpsmith prove` makes them, in a process of their own: z3's answer to a
problem near the edge of its (deterministic) budget also depends on the terms the process built
before (their ids order the simplifier's arguments), so the same obligation proved alone can end
``bounded`` after other proofs in one process.

:func:`run` gives each piece of code such a process: a fork of a server that imported torch, Triton
and z3 and nothing else. Importing those builds no z3 term (the server asserts z3 has no context),
so the fork starts where a new interpreter starts after those imports, and the code's own imports
(warpsmith's) build the same terms in the same order as in ``python -c``. One server per test
process, started on first use; a fork costs a few milliseconds instead of about 2 CPU-s of imports.
``WARPSMITH_TEST_FRESH=exec`` runs a real ``python -c`` instead (to compare the two).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading

_SERVER = r"""
import json, os, sys
import torch, triton, z3
assert z3.z3._main_ctx is None, "importing torch/triton built z3 terms: the forks would not be fresh"
requests, replies = sys.stdin.buffer, os.fdopen(int(sys.argv[1]), "w", buffering=1)
for line in requests:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        rc = 1
        try:
            out = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            err = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            sys.stdin = open(os.devnull)
            sys.argv = ["-c"]
            sys.path[0:1] = ["", req["tests"]]  # a test module the code imports finds this helper
            rc = 0
            try:
                exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                import traceback
                traceback.print_exc()
                rc = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps(os.waitstatus_to_exitcode(status)) + "\n")
"""

_lock = threading.Lock()
_server: tuple[subprocess.Popen, object] | None = None


def _start() -> tuple[subprocess.Popen, object]:
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(w)], stdin=subprocess.PIPE, pass_fds=(w,),
                            env={**os.environ, "TRITON_INTERPRET": "1"}, start_new_session=True)
    os.close(w)
    return proc, os.fdopen(r)


def run(code: str, timeout: float = 1200, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -c code`` as it would run with ``TRITON_INTERPRET=1`` (and ``env`` if given), served by a fork
    of the server (see the module). Returns the return code and the captured stdout and stderr."""
    global _server
    env = {**os.environ, "TRITON_INTERPRET": "1", **(env or {})}
    tests = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("WARPSMITH_TEST_FRESH") == "exec":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tests, env.get("PYTHONPATH")]))
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    with _lock, tempfile.TemporaryDirectory(prefix="fresh-") as d:
        out, err = os.path.join(d, "out"), os.path.join(d, "err")
        if _server is None or _server[0].poll() is not None:
            _server = _start()
        proc, replies = _server
        proc.stdin.write((json.dumps({"code": code, "cwd": os.getcwd(), "env": env, "out": out, "err": err,
                                      "tests": tests})
                          + "\n").encode())
        proc.stdin.flush()
        reply: list[str] = []
        reader = threading.Thread(target=lambda: reply.append(replies.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not reply or not reply[0]:
            os.killpg(proc.pid, 9)  # the server and the fork running the code
            proc.wait()
            _server = None
            raise subprocess.TimeoutExpired(["python", "-c", code[:200]], timeout)
        with open(out) as f_out, open(err) as f_err:
            return subprocess.CompletedProcess(["python", "-c"], json.loads(reply[0]), f_out.read(), f_err.read())


def last_json(code: str, timeout: float = 1200) -> object:
    """What ``code`` prints as its last line, parsed as JSON (see :func:`run`); a failure shows its stderr."""
    r = run(code, timeout)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])
