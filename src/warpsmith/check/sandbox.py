"""The launcher of ``warpsmith check``'s candidate process, and the sandbox it builds (Linux).

Run by :mod:`.isolation` as ``python -I sandbox.py`` with its JSON spec on stdin (standard library
only: no torch, no warpsmith import), in a new session. Three processes::

    harness (parent) ── launcher ── init (pid 1 of a new pid namespace) ── child (the candidate)

**The launcher** asks Linux to kill it when the harness ends (``PR_SET_PDEATHSIG``), then enters
new user, pid, IPC and (where allowed) network namespaces with ``unshare`` and maps only its own
uid and gid into the user namespace (``uid_map`` ``U U 1``: root stays uid 0, an ordinary user stays
itself; no privilege is gained outside). Its first child is **init**, pid 1 of the new pid
namespace: when init ends, the kernel SIGKILLs every process left in the namespace (a double fork
with ``setsid`` cannot leave it) and reaps them all before the launcher's ``waitpid`` on init
returns. The launcher writes two lines on its stdout, which the harness reads: first
``{"isolation": {...}}`` (what the sandbox achieved), at the end the child's exit status (``-N``: killed
by signal N). A SIGTERM from the harness makes the launcher SIGKILL init (its own child, not yet
reaped: no pid reuse can misdirect it), and it exits only once every process of the namespace is
gone: the harness learns that nothing of the candidate runs when the launcher has exited.

**init** enters a new mount namespace, makes every mount private and the whole tree read-only
(``mount_setattr`` recursively; one remount per mount on kernels before 5.12), then:

- mounts a fresh, read-only ``proc`` on every ``proc`` mount point: ``/proc`` lists the namespace's
  processes only, so the harness's pid cannot be named (no ``ptrace``, no ``/proc/PID/mem``, no
  signal); the launcher and the harness are outside the namespace;
- replaces ``/dev`` with a read-only tmpfs holding only ``null``, ``zero``, ``full``, ``random``,
  ``urandom``, the GPU's nodes (``nvidia*``, ``nvidia-caps``, ``dri``, ``kfd``) bound from the real
  ``/dev``, the usual ``/proc/self/fd`` links and a private ``/dev/shm``: a read-only mount does not
  stop writes *through a device node*, and the child is still the harness's user (root stays uid 0),
  so a disk's block device (``/dev/vda``) must not exist in its view;
- binds the exchange and working folders back read-write, and binds the files the harness put in
  the exchange folder before the start (``child.log``, ``context.pt``) read-only onto themselves (a
  mount point cannot be replaced, so each stays the regular file the harness reads);
- drops every capability (bounding, ambient, inheritable, permitted, effective; ``SECBIT_NOROOT``
  locked), sets ``PR_SET_NO_NEW_PRIVS``, and installs a seccomp filter refusing ``socket(AF_UNIX)``
  (a Unix socket path reaches daemons outside: systemd, Docker, tmux, D-Bus, which would run
  commands for the same user), ``io_uring_setup`` (which creates sockets without that system call)
  and, without a network namespace, Internet sockets too;
- makes itself non-dumpable (the child cannot ptrace it or read its memory), checks the result
  (read-only mounts, ``/proc`` showing the namespace only, no capability) and reports it.

It then starts the child (in its own session) and reaps every process of the namespace until the
child has ended. Because the child is still the harness's uid, the read-only mounts are what stop
it from writing the report, the reference or anything else of that user; the folders it may write
are the exchange folder (inputs and outputs, and ``tmp``, ``home``, ``cache`` for its temporary
files and caches) and its working directory.

**Where the machine refuses** (no unprivileged user namespaces, a container whose ``/proc`` is
partly masked, seccomp forbidding ``unshare``), the candidate still runs, as before (new session,
``PR_SET_PDEATHSIG`` chain, the launcher as child subreaper that SIGKILLs every descendant left),
and the report says exactly what was missing: ``isolated`` is false only with reasons.

**Untested on a GPU** (no GPU here): the GPU nodes bound into ``/dev`` (``/dev/nvidia*``, ``nvidia-uvm``,
``nvidia-caps``; ``/dev/dri``, ``/dev/kfd`` on ROCm), CUDA's initialisation in a user namespace with a
read-only root, no network and no Unix sockets (the driver needs none of them for a single-process
program as far as documented; MPS, which talks over a Unix socket in ``/tmp/nvidia-mps``, would not
work), and Triton compiling into ``TRITON_CACHE_DIR`` under the exchange folder (it runs ``ptxas`` and
a C compiler from read-only paths, writing only to its cache and ``TMPDIR``). Architectures: the
seccomp filter knows x86_64 and aarch64 (elsewhere it is reported missing).
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import select
import signal
import stat
import struct
import subprocess
import sys
import time
import traceback

# ---- Linux constants ---------------------------------------------------------------------------
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MNT_DETACH = 0x2
ST_NOSUID, ST_NODEV, ST_NOEXEC = 0x2, 0x4, 0x8
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY = 0x1
SYS_MOUNT_SETATTR = 442  # the same number on every architecture but alpha (new system calls are unified)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 4, 24, 28
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 36, 38, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECBITS_LOCKED_NOROOT = 0xEF  # NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, each locked; KEEP_CAPS off, locked
CAP_VERSION_3 = 0x20080522
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
# seccomp: (audit arch, socket system call); io_uring_setup is 425 on both
SECCOMP_ARCH = {"x86_64": (0xC000003E, 41), "amd64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198),
                "arm64": (0xC00000B7, 198)}
SYS_IO_URING_SETUP = 425
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000

USE_MOUNT_SETATTR = True  # False: the per-mount remount path of kernels before 5.12 (tests force it)
GPU_DEVICES = ("nvidia", "dri", "kfd")  # name prefixes of the /dev entries a GPU program opens
PLAIN_DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(Exception):
    """One step of the sandbox failed: the message says which, and why."""


def _ok(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)} ({errno.errorcode.get(err, err)})")
    return ret


def _prctl(option: int, *args: int) -> int:
    vals = [ctypes.c_ulong(a) for a in args] + [ctypes.c_ulong(0)] * (4 - len(args))
    return _libc.prctl(ctypes.c_int(option), *vals)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: None if s is None else os.fsencode(s))
    _ok(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {fstype or ''} {source or ''} on {target} (flags {flags:#x})".replace("  ", " "))


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _set_readonly(path: str, readonly: bool, recursive: bool = False) -> None:
    """Make the mount at ``path`` (and those below it, with ``recursive``) read-only, or read-write."""
    if USE_MOUNT_SETATTR:
        attr = _MountAttr(MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else MOUNT_ATTR_RDONLY, 0, 0)
        ret = _libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD),
                            ctypes.c_char_p(os.fsencode(path)), ctypes.c_uint(AT_RECURSIVE if recursive else 0),
                            ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)))
        if ret == 0:
            return
        if ctypes.get_errno() != errno.ENOSYS:
            _ok(ret, f"mount_setattr {'read-only' if readonly else 'read-write'} {path}")
    targets = [m["point"] for m in _mounts() if m["point"] == path or m["point"].startswith(path.rstrip("/") + "/")] \
        if recursive else [path]
    for point in targets:
        try:
            keep = os.statvfs(point).f_flag
        except OSError:
            continue  # hidden under another mount: unreachable by any path
        flags = MS_REMOUNT | MS_BIND | (MS_RDONLY if readonly else 0)
        flags |= (MS_NOSUID if keep & ST_NOSUID else 0) | (MS_NODEV if keep & ST_NODEV else 0)
        flags |= MS_NOEXEC if keep & ST_NOEXEC else 0
        _mount(None, point, None, flags)


def _unescape(field: str) -> str:
    """Mount points in mountinfo escape space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mounts() -> list[dict[str, str]]:
    """This process's mounts, from ``/proc/self/mountinfo``: mount point, per-mount options, type."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            a, b = left.split(), right.split()
            if len(a) >= 6 and b:
                found.append({"id": a[0], "parent": a[1], "point": _unescape(a[4]), "options": a[5], "type": b[0]})
    return found


def _visible(mounts: list[dict[str, str]]) -> list[dict[str, str]]:
    """The mounts a path can reach: not covered by a mount on the same point, nor below one that is."""
    by_id = {m["id"]: m for m in mounts}
    covered = {m["parent"] for m in mounts if m["parent"] in by_id and by_id[m["parent"]]["point"] == m["point"]}

    def hidden(m: dict[str, str], depth: int = 0) -> bool:
        if m["id"] in covered:
            return True
        parent = by_id.get(m["parent"])
        return parent is not None and parent is not m and depth < 256 and hidden(parent, depth + 1)
    return [m for m in mounts if not hidden(m)]


# ---- the launcher's part: namespaces -------------------------------------------------------------
def enter_namespaces() -> list[str]:
    """New user, pid and IPC namespaces (network too where allowed), with this process's own ids mapped.

    Returns the namespaces entered. Raises :class:`SandboxError` when the machine refuses.
    """
    uid, gid = os.geteuid(), os.getegid()
    base = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC
    names = ["user", "pid", "IPC"]
    if _libc.unshare(ctypes.c_int(base | CLONE_NEWNET)) == 0:
        names.append("network")
    else:
        _ok(_libc.unshare(ctypes.c_int(base)), "unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC)")
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    except OSError as e:
        raise SandboxError(f"mapping uid {uid} and gid {gid} into the user namespace: {e.strerror}") from None
    return names


# ---- init's part: the filesystem -----------------------------------------------------------------
def _build_dev() -> None:
    """A read-only tmpfs on /dev with the plain devices and the GPU's, bound from the real /dev."""
    old = os.open("/dev", os.O_PATH | os.O_DIRECTORY)
    try:
        names = sorted(n for n in os.listdir("/dev") if n in PLAIN_DEVICES or n.startswith(GPU_DEVICES))
        modes = {n: os.lstat(os.path.join("/dev", n)).st_mode for n in names}
        links = {n: os.readlink(os.path.join("/dev", n)) for n in names if stat.S_ISLNK(modes[n])}
        _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=256k")
    except BaseException:
        os.close(old)
        raise
    try:
        for name in names:
            target = os.path.join("/dev", name)
            if name in links:
                os.symlink(links[name], target)
                continue
            if stat.S_ISDIR(modes[name]):
                os.mkdir(target)
            else:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600))
            _mount(f"/proc/self/fd/{old}/{name}", target, None, MS_BIND | MS_REC)
        for name, dest in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                           ("stderr", "/proc/self/fd/2")):
            os.symlink(dest, os.path.join("/dev", name))
        os.mkdir("/dev/shm")
        _set_readonly("/dev", True)
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777")
    except BaseException:
        _libc.umount2(b"/dev", ctypes.c_int(MNT_DETACH))  # the real /dev again (read-only), not half of one
        raise
    finally:
        os.close(old)


def confine_filesystem(writable: list[str], protect: list[str], cwd: str) -> list[str]:
    """In a new mount namespace: everything read-only but ``writable``; minimal /dev; fresh /proc.

    ``protect``: files (inside a writable folder) that stay read-only. Returns what was done. The
    steps are ordered so that a failure (raised) leaves a tree the child can still work in: the
    writable folders are bound back right after the read-only pass (undone if that fails), a /dev
    that cannot be completed is unmounted, and /proc comes last (a masked /proc refuses a new one).
    """
    _ok(_libc.unshare(ctypes.c_int(CLONE_NEWNS)), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    procs = sorted({m["point"] for m in _mounts() if m["type"] == "proc"}, key=len)
    _set_readonly("/", True, recursive=True)
    try:
        for path in writable:
            _mount(path, path, None, MS_BIND)
            _set_readonly(path, False)
    except SandboxError:
        _set_readonly("/", False, recursive=True)  # what was read-write before is again
        raise
    finally:
        os.chdir(cwd)  # the working directory as seen through the new mounts
    for path in protect:
        _mount(path, path, None, MS_BIND)
        _set_readonly(path, True)
    _build_dev()  # before /proc: its binds resolve /proc/self/fd through the old proc
    for point in procs:
        _mount("proc", point, "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return ["mount namespace", "read-only filesystem except the exchange and work folders",
            "fresh read-only /proc", "minimal /dev (no disks)"]


def check_filesystem(writable: list[str]) -> list[str]:
    """What is wrong with the mounts as this process sees them (empty: as intended)."""
    allowed = {os.path.realpath(p) for p in writable} | {"/dev/shm"}
    wrong = [f"{m['point']} is mounted read-write" for m in _visible(_mounts())
             if "rw" in m["options"].split(",") and m["point"] not in allowed]
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    if os.getpid() != 1 or others:
        wrong.append(f"/proc shows processes outside the sandbox ({len(others)} others)")
    return wrong


# ---- init's part: privileges -----------------------------------------------------------------------
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges() -> list[str]:
    """No new privileges; no capability in any set. Returns the steps that failed (with why)."""
    failed = []
    if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        failed.append(f"PR_SET_NO_NEW_PRIVS: {os.strerror(ctypes.get_errno())}")
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    bounding = int(_status_field("CapBnd") or "0", 16)
    if os.geteuid() != 0 and not int(_status_field("CapEff") or "0", 16) >> 8 & 1:  # no CAP_SETPCAP
        bounding = 0  # cannot be dropped, and with no_new_privs an ordinary uid gains nothing from it on exec
    for cap in range(last + 1):
        if bounding >> cap & 1 and _prctl(PR_CAPBSET_DROP, cap) != 0:
            failed.append(f"dropping capability {cap} from the bounding set: {os.strerror(ctypes.get_errno())}")
            break
    if _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL) != 0:
        failed.append(f"clearing the ambient capabilities: {os.strerror(ctypes.get_errno())}")
    _prctl(PR_SET_SECUREBITS, SECBITS_LOCKED_NOROOT)  # best effort: needs CAP_SETPCAP; checked below anyway
    head, data = _CapHeader(CAP_VERSION_3, 0), (_CapData * 2)()
    if _libc.capset(ctypes.byref(head), data) != 0:
        failed.append(f"capset to no capabilities: {os.strerror(ctypes.get_errno())}")
    return failed


def _status_field(name: str) -> str | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == name:
                    return value.strip()
    except OSError:
        pass
    return None


def check_privileges() -> list[str]:
    """What this process can still do that it should not (empty: nothing)."""
    wrong = [f"{name} is {_status_field(name)}" for name in ("CapInh", "CapPrm", "CapEff", "CapAmb")
             if int(_status_field(name) or "1", 16) != 0]
    if _status_field("NoNewPrivs") != "1":
        wrong.append("no_new_privs is not set")
    if int(_status_field("CapBnd") or "1", 16) != 0 and os.geteuid() == 0:
        wrong.append("the capability bounding set is not empty (uid 0 would regain it on exec)")
    return wrong


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp_program(machine: str, deny_inet: bool) -> bytes:
    """The filter: refuse Unix sockets, io_uring and (``deny_inet``) Internet sockets; other ABIs refused."""
    arch, sys_socket = SECCOMP_ARCH[machine]
    LD, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
    families = [AF_UNIX] + ([AF_INET, AF_INET6] if deny_inet else [])
    # layout: 0 ld arch | 1 jeq arch | 2 ld nr | 3 jge x32 | 4 jeq socket | 5 jeq io_uring | 6 allow
    #         7 ld family | 8.. jeq family -> deny | allow | deny | foreign
    n_fam = len(families)
    deny = 8 + n_fam + 1
    foreign = deny + 1
    prog = [_bpf(LD, 4), _bpf(JEQ, arch, 0, foreign - 2), _bpf(LD, 0),
            _bpf(JGE, 0x40000000, foreign - 4, 0) if arch == 0xC000003E else _bpf(JEQ, 0xFFFFFFFF, 0, 0),
            _bpf(JEQ, sys_socket, 7 - 5, 0), _bpf(JEQ, SYS_IO_URING_SETUP, deny - 6, 0), _bpf(RET, RET_ALLOW),
            _bpf(LD, 16)]
    for i, fam in enumerate(families):
        prog.append(_bpf(JEQ, fam, deny - (8 + i) - 1, 0))
    prog += [_bpf(RET, RET_ALLOW), _bpf(RET, RET_ERRNO | errno.EACCES), _bpf(RET, RET_ERRNO | errno.ENOSYS)]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(deny_inet: bool) -> str:
    """Install :func:`seccomp_program` (needs no_new_privs). Returns what it refuses."""
    machine = platform.machine().lower()
    if machine not in SECCOMP_ARCH:
        raise SandboxError(f"seccomp filter: architecture {machine} not supported")
    prog = seccomp_program(machine, deny_inet)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.addressof(buf))
    _ok(_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog)), "installing the seccomp filter")
    return "seccomp: no Unix sockets" + (", no Internet sockets" if deny_inet else "") + ", no io_uring"


# ---- processes -----------------------------------------------------------------------------------------
def _die_with_parent() -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 1 and int(fields[1]) == pid:
                found.append(int(entry))
    return found


def sweep(limit_s: float = 10.0) -> bool:
    """SIGKILL and reap every descendant left (this process is their subreaper). True: none is left."""
    deadline = time.monotonic() + limit_s
    me = os.getpid()
    while time.monotonic() < deadline:
        for pid in _children_of(me):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return True
        time.sleep(0.01)
    return False


def exec_child(spec: dict, log_fd: int) -> int:
    """Start the child's command (a new interpreter) in a session of its own; returns its pid."""
    fds = (spec["ctrl"], spec["reply"])
    return subprocess.Popen([*spec["command"], str(spec["ctrl"]), str(spec["reply"]), spec["exchange"]],
                            pass_fds=fds, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=subprocess.STDOUT,
                            cwd=spec["exchange"], start_new_session=True, preexec_fn=_die_with_parent).pid


def _init(spec: dict, namespaces: list[str], log_fd: int, info_w: int, alive_r: int, sent: list[bool],
          start_child=exec_child) -> int:
    """pid 1 of the namespace (or, without one, a plain intermediate process): build, report, run, reap."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    _die_with_parent()
    if select.select([alive_r], [], [], 0)[0]:  # the launcher ended before the line above took effect
        return 1
    os.close(alive_r)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # not the harness's pipe: nothing here writes to it
    os.dup2(log_fd, 2)
    os.close(null)
    done, missing = list(namespaces), []
    isolate = bool(namespaces)
    if isolate:
        try:
            done += confine_filesystem(spec["writable"], spec["protect"], spec["exchange"])
        except (SandboxError, OSError) as e:
            missing.append(f"filesystem: {e}")
    failed = drop_privileges()
    wrong = check_privileges()
    if failed or wrong:
        missing.append("capabilities: " + "; ".join(failed + wrong))
    else:
        done.append("no capabilities, no new privileges")
    try:
        done.append(install_seccomp(deny_inet="network" not in namespaces))
    except SandboxError as e:
        missing.append(str(e))
    if isolate and not any(m.startswith("filesystem") for m in missing):
        wrong = check_filesystem(spec["writable"])
        if wrong:
            missing.append("filesystem: " + "; ".join(wrong))
    _prctl(PR_SET_DUMPABLE, 0)  # the child can neither ptrace this process nor read its memory
    if not isolate:
        missing.insert(0, spec.get("why_not") or "no namespaces")
    doc = {"isolated": isolate and not missing, "how": ", ".join(done), "missing": missing}
    os.write(info_w, (json.dumps(doc) + "\n").encode())
    sent.append(True)
    fds = (spec["ctrl"], spec["reply"])
    child_pid = start_child(spec, log_fd)
    for fd in fds:
        os.close(fd)
    os.close(log_fd)
    while True:  # reap every process reparented here; end when the child has
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 0
        if pid == child_pid:
            os.write(info_w, f"{os.waitstatus_to_exitcode(status)}\n".encode())
            return 0


def launcher(spec: dict, start_child=exec_child) -> int:
    """The launcher's work (module docstring). ``start_child(spec, log_fd) -> pid`` starts the child in
    init, once the sandbox is built (default :func:`exec_child`; the zygote, :mod:`.zygote`, forks it
    instead, with torch already imported)."""
    global USE_MOUNT_SETATTR
    USE_MOUNT_SETATTR = bool(spec.get("mount_setattr", True))
    _die_with_parent()
    if os.getppid() != spec["harness"]:
        return 1  # the harness ended before the line above took effect
    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # without a pid namespace, orphans come back here to be killed
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGCHLD})
    # opened before the user namespace: the file belongs to the harness's user either way
    log_fd = os.open(os.path.join(spec["exchange"], "child.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    namespaces: list[str] = []
    if spec["isolate"]:
        try:
            namespaces = enter_namespaces()
        except SandboxError as e:
            spec["why_not"] = f"namespaces: {e}"
        _die_with_parent()
        if os.getppid() != spec["harness"]:
            return 1
    else:
        spec["why_not"] = "isolation turned off (forced fallback)"
    info_r, info_w = os.pipe()
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code, sent = 125, []
        try:
            os.close(info_r)
            os.close(alive_w)
            code = _init(spec, namespaces, log_fd, info_w, alive_r, sent, start_child)
        except BaseException as e:  # noqa: BLE001 - reported through the pipe (and the log), the harness decides
            try:
                traceback.print_exc()
                os.write(info_w, (f"{code}\n" if sent else json.dumps({"isolated": False, "how": "", "missing": [
                    f"the sandbox's init failed: {type(e).__name__}: {e}"]}) + "\n").encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    for fd in (spec["ctrl"], spec["reply"], info_w, alive_r, log_fd):
        os.close(fd)
    info, rest = _read_line(info_r)
    try:
        doc = json.loads(info)
    except ValueError:
        doc = {"isolated": False, "how": "", "missing": ["the sandbox's init ended before reporting"]}
    sys.stdout.write(json.dumps({"isolation": doc}) + "\n")
    sys.stdout.flush()
    killed = False
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        info_sig = signal.sigwaitinfo({signal.SIGTERM, signal.SIGCHLD})
        if info_sig.si_signo == signal.SIGTERM and not killed:
            os.kill(pid, signal.SIGKILL)  # init: not reaped yet, so its pid is still its own
            killed = True
    tail = (rest + _read_all(info_r)).decode(errors="replace").split()
    status = tail[-1] if tail else str(os.waitstatus_to_exitcode(wait_status))
    clean = sweep()
    sys.stdout.write(("" if clean else "# descendants survived the sweep\n") + status + "\n")
    sys.stdout.flush()
    return 0


def _read_line(fd: int) -> tuple[str, bytes]:
    """The first line read from ``fd``, and what was read after it."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line.decode(errors="replace"), rest


def _read_all(fd: int) -> bytes:
    data = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return data
        data += chunk


if __name__ == "__main__":
    sys.exit(launcher(json.loads(sys.stdin.buffer.read())))
