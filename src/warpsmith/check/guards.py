"""What the harness does around every candidate call: patch snapshots, poisoning, threads, streams.

- :class:`PatchGuard` records, before the candidate is loaded:
  - the identity of every function, class and module in the namespaces a cheat would patch:
    torch (and ``torch.nn.functional``, ``torch.testing``, ``torch.linalg``, ``torch.cuda``,
    ``torch.random``), time, builtins, threading, copy, math, triton (``triton.language``,
    ``triton.testing``), and the harness's own modules;
  - the full class dicts of ``torch.Tensor``, ``torch.nn.Module``, ``threading.Thread`` and
    every harness class, so that an attribute *added* to ``torch.Tensor`` (shadowing
    ``TensorBase.__eq__``, say) counts as a change;
  - global settings: tf32 flags, the float32 matmul precision, deterministic algorithms, the
    default dtype, trace and profile hooks, and the torch function and dispatch mode stacks.

  ``changes()`` names every change that can affect the verdict (below), and ``restore()`` puts
  back everything, settings included (the parent's guard: a library call leaves no global state
  changed). Two kinds of change are tolerated, because torch makes them itself (``torch.compile``
  does): a replacement defined in torch's own files that wraps the original, and a plain
  scalar flag added to a class dict under a name the class did not have, even by inheritance.
  The comparison logic is a closure made when the snapshot is taken, so patching
  ``PatchGuard`` after that does not blind it.

  **Which changes are reported.** The guard reports what can affect the verdict, not what is
  merely unusual. The reference, the oracle and every value judgement run in the parent, on the
  bytes the child sends; in the child, what the candidate changes reaches (a) the candidate's own
  outputs, which the parent judges whatever produced them, and (b) the child's own harness code:
  the observations it reports (threads, late writes within the call's pause, aliasing, reuse, input
  snapshots, pending side-stream work), the serialization of outputs (``torch.save``) and, on a
  GPU, the timer. Only (b) matters, so:

  - *Reported* (a ``monkey_patch`` rejection):
    - a replaced, added or deleted function, class or module in the guarded namespaces and class
      dicts. The child's harness code reaches these namespaces directly and transitively
      (``Tensor`` methods, ``torch.save``'s pickler, ``threading``, Triton's interpreter; the timer's
      ``torch.cuda.Event.elapsed_time`` and ``synchronize``, ``time.perf_counter``), and which of
      their functions it reaches cannot be enumerated once and for all; a correct kernel never
      needs to replace one. The harness's own modules and classes are the child's harness code.
    - a trace or profile hook (``sys.settrace``, ``sys.setprofile``): it runs inside the child's
      harness frames after the call and can read and rewrite their locals.
    - a torch function or dispatch mode left on the stack after the call: it intercepts every
      tensor operation the child's harness makes afterwards (snapshots, comparisons, saving).
  - *Not reported* (restored by ``restore()``, but not a cheat by themselves): the tf32 flags
    (``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.allow_tf32``), the float32
    matmul precision, ``torch.use_deterministic_algorithms`` and the default dtype. Each changes
    only the numbers computed in the candidate's own process, and those are the candidate's
    outputs, judged in the parent under the error contract (a tf32 GEMM is judged as the tf32 GEMM
    it is). The child's harness code does not depend on them: it compares and snapshots bytes
    (``clone``, a ``uint8`` view, ``torch.equal``; no matmul or convolution), allocates with explicit
    dtypes, and uses no operation that deterministic mode makes raise; deterministic mode's NaN
    fill of ``torch.empty`` is the same poison :class:`PoisonEmpty` applies.
    ``tests/check/test_redteam_misc.py`` runs those operations under every such setting, and a
    late-writing candidate that sets all of them is still rejected (``async_work``).
- :class:`SideStreams` (on a GPU) takes every stream torch's pool hands out on the device, and
  the default stream, before the candidate is loaded. After a call it waits for the caller's
  current stream only (what a caller may rely on), then names every other of those streams still
  busy: work left behind on a side stream, outside what a caller's timer on its stream measures
  (``async_work``). Work the current stream waits for (``wait_stream``) is not left behind. Not
  seen: streams outside torch's pool (``cudaStreamCreate`` in an extension, other libraries'
  streams, other devices), and side work that happens to finish before the current stream does.
- :func:`side_stream_attempt`: on a machine without CUDA, a call (or import) that raises while
  creating a CUDA stream (``torch.cuda.Stream``, ``torch.cuda.ExternalStream`` other than a
  default stream's handle) failed only because it asked for a side stream: its class is
  ``async_work``, not ``candidate_error``. Any other failure stays ``candidate_error``
  (``torch.cuda.synchronize`` or ``current_stream`` raise there too, and are no side stream).
- :func:`poison_allocator` allocates buffers of the sizes the outputs will have, fills them
  with 0xFF bytes (NaN in every float format, -1 in ints) and frees them. A ``torch.empty`` in
  the candidate then probably gets that memory back. It does on a GPU's caching allocator, and
  on CPU glibc for all but tiny sizes. :class:`PoisonEmpty` makes sure of it on the Python side:
  while it is active, every tensor from ``torch.empty``, ``empty_like``, ``empty_strided``,
  ``new_empty`` or ``new_empty_strided`` comes back poisoned.
- :func:`live_threads` is ``threading.enumerate`` as it was when this module was imported.
"""
from __future__ import annotations

import builtins
import copy
import math
import os
import sys
import threading
import time
import types
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from ..core.variant import poison_fill

_MISSING = object()
live_threads = threading.enumerate
_sleep = time.sleep


#: every device's API: a patch of a timing or synchronization function is a cheat whether or not this
#: run times anything (SOL-ExecBench's own sample patches ``torch.cuda.Event.elapsed_time`` on any machine)
_DEVICE_APIS = ("torch.cuda", "torch.cuda.streams", "torch.cuda.graphs", "torch.cpu", "torch.mps", "torch.xpu",
                "torch.accelerator", "torch.mtia", "torch.profiler", "torch.autograd.profiler")


def _namespaces() -> list[types.ModuleType]:
    mods: list[Any] = [torch, torch.nn.functional, torch.testing, torch.linalg, torch.random, time,
                       builtins, threading, copy, math, os, sys]
    mods += [sys.modules[n] for n in _DEVICE_APIS if n in sys.modules]
    for name in ("triton", "triton.language", "triton.testing"):
        if name in sys.modules:
            mods.append(sys.modules[name])
    for name in sorted(sys.modules):
        if name.startswith("warpsmith.check.") or name in ("warpsmith.core.error_contract", "warpsmith.core.opspec",
                                                                  "warpsmith.core.dtypes", "warpsmith.core.variant",
                                                                  "warpsmith.verify.harness",
                                                                  "warpsmith.measure.timing"):
            mods.append(sys.modules[name])
    return mods


def _classes(namespaces: list[types.ModuleType]) -> list[type]:
    out: list[type] = [torch.Tensor, torch.nn.Module, threading.Thread]
    # the device APIs' classes (events, streams, graphs): their methods are what a timer calls
    out += [v for m in namespaces if m.__name__ in _DEVICE_APIS or m is torch
            for v in vars(m).values() if isinstance(v, type) and v.__module__.startswith("torch")
            and any(w in v.__name__ for w in ("Event", "Stream", "Graph"))]
    for m in namespaces:
        if m.__name__.startswith("warpsmith."):
            out += [v for v in vars(m).values() if isinstance(v, type) and v.__module__ == m.__name__]
    return list(dict.fromkeys(out))


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def torch_own_wrapper(new: object, old: object) -> bool:
    """Whether ``new`` is torch wrapping ``old`` itself, which is not counted as a patch and is
    not undone. Importing ``torch._dynamo`` wraps ``torch.manual_seed``, and the first
    ``torch.compile`` call wraps ``nn.Module.__init__``. Such a wrapper is a function defined in
    torch's own files that holds the original, as ``__wrapped__`` or in its closure."""
    code = getattr(new, "__code__", None)
    if not isinstance(code, types.CodeType) or not code.co_filename.startswith(_TORCH_DIR):
        return False
    if getattr(new, "__wrapped__", None) is old:
        return True
    cells = getattr(new, "__closure__", None) or ()
    return any(_cell(c) is old for c in cells)


def _cell(c: object) -> object:
    try:
        return c.cell_contents  # type: ignore[attr-defined]
    except ValueError:  # an empty cell
        return _MISSING


def _flag(v: object) -> bool:
    """A plain scalar (torch's dynamo adds such a flag, under a new name, to ``nn.Module``)."""
    return v is None or type(v) in (bool, int, float, str)


def _guarded(v: object) -> bool:
    return callable(v) or isinstance(v, (type, types.ModuleType))


def _mode_depth(kind: str) -> int:
    try:
        if kind == "function":
            return int(torch._C._len_torch_function_stack())
        return int(torch._C._len_torch_dispatch_stack())
    except Exception:  # pragma: no cover - private API moved
        return 0


#: settings that change only the numbers computed in the candidate's own process (module docstring):
#: restored, never reported
_OWN_NUMERICS = frozenset({"torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
                           "torch.get_float32_matmul_precision()", "torch.are_deterministic_algorithms_enabled()",
                           "torch.get_default_dtype()"})


def _read(get: Callable[[], Any]) -> Any:
    """A setting's value, or ``_MISSING`` where torch refuses to say (``get_float32_matmul_precision`` raises
    once the legacy and the new tf32 APIs were both used)."""
    try:
        return get()
    except Exception:  # noqa: BLE001
        return _MISSING


def _storage_classes() -> dict[torch.dtype, Any]:
    """The legacy storage class ``torch.Storage`` is bound to under each default dtype."""
    pairs = ((torch.float32, "FloatStorage"), (torch.float64, "DoubleStorage"), (torch.float16, "HalfStorage"),
             (torch.bfloat16, "BFloat16Storage"))
    return {d: vars(torch)[n] for d, n in pairs if n in vars(torch)}


def _settings() -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    b = torch.backends

    def pop_modes(kind: str) -> Callable[[Any], None]:
        def restore(depth: Any) -> None:
            pop = torch._C._pop_torch_function_stack if kind == "function" else torch._C._pop_torch_dispatch_stack
            while _mode_depth(kind) > depth:
                pop()
        return restore

    return {
        "torch.backends.cuda.matmul.allow_tf32": (lambda: b.cuda.matmul.allow_tf32,
                                                  lambda v: setattr(b.cuda.matmul, "allow_tf32", v)),
        "torch.backends.cudnn.allow_tf32": (lambda: b.cudnn.allow_tf32, lambda v: setattr(b.cudnn, "allow_tf32", v)),
        "torch.get_float32_matmul_precision()": (torch.get_float32_matmul_precision,
                                                 torch.set_float32_matmul_precision),
        "torch.are_deterministic_algorithms_enabled()": (torch.are_deterministic_algorithms_enabled,
                                                         torch.use_deterministic_algorithms),
        "torch.get_default_dtype()": (torch.get_default_dtype, torch.set_default_dtype),
        "sys.gettrace()": (sys.gettrace, sys.settrace),
        "sys.getprofile()": (sys.getprofile, sys.setprofile),
        "torch function mode stack": (lambda: _mode_depth("function"), pop_modes("function")),
        "torch dispatch mode stack": (lambda: _mode_depth("dispatch"), pop_modes("dispatch")),
    }


class PatchGuard:
    """A snapshot of what a candidate must not change (see the module docstring)."""

    def __init__(self) -> None:
        namespaces = _namespaces()
        mod_snap = {(m, k): v for m in namespaces for k, v in list(vars(m).items()) if _guarded(v)}
        cls_snap = {c: dict(vars(c)) for c in _classes(namespaces)}
        known = {c: set(dir(c)) for c in cls_snap}  # a flag may not shadow an inherited attribute
        settings = _settings()
        set_snap = {k: v for k, v in ((k, _read(get)) for k, (get, _) in settings.items()) if v is not _MISSING}
        _vars, _getattr, _setattr, _delattr, _list = vars, getattr, setattr, delattr, list
        own = _OWN_NUMERICS
        # torch.set_default_dtype rebinds torch.Storage to the legacy storage class of the new dtype
        storage_of, default_dtype = _storage_classes(), torch.get_default_dtype

        def follows_default_dtype(m: Any, k: str, now: Any) -> bool:
            return m is torch and k == "Storage" and now is storage_of.get(default_dtype(), _MISSING)

        def changes() -> list[str]:
            out = []
            for (m, k), v in _list(mod_snap.items()):
                now = _vars(m).get(k, _MISSING)
                if now is not v and torch_own_wrapper(now, v):
                    mod_snap[(m, k)] = now  # torch's own wrapper becomes the baseline
                elif now is not v and not follows_default_dtype(m, k, now):
                    out.append(f"{m.__name__}.{k}" + (" was deleted" if now is _MISSING else " was replaced"))
            for c, d in cls_snap.items():
                cur = _vars(c)
                for k in _list(cur):
                    if (k not in known[c] and _flag(cur[k])) or (k in d and torch_own_wrapper(cur[k], d[k])):
                        d[k] = cur[k]  # tolerated (module docstring): the new baseline
                    elif k not in d:
                        out.append(f"{c.__module__}.{c.__qualname__}.{k} was added")
                    elif cur[k] is not d[k]:
                        out.append(f"{c.__module__}.{c.__qualname__}.{k} was replaced")
                out += [f"{c.__module__}.{c.__qualname__}.{k} was deleted" for k in d if k not in cur]
            for k, v in set_snap.items():
                if k in own:
                    continue  # the candidate's own numbers, judged in the parent (module docstring)
                now = settings[k][0]()
                if now != v:
                    out.append(f"{k} changed from {v!r} to {now!r}")
            return out

        def restore() -> None:
            for (m, k), v in mod_snap.items():
                now = _vars(m).get(k, _MISSING)
                if now is not v and not torch_own_wrapper(now, v):
                    _setattr(m, k, v)
            for c, d in cls_snap.items():
                cur = _vars(c)
                for k in _list(cur):
                    if k not in d and (k in known[c] or not _flag(cur[k])):
                        _delattr(c, k)
                for k, v in d.items():
                    now = cur.get(k, _MISSING)
                    if now is not v and not torch_own_wrapper(now, v):
                        _setattr(c, k, v)
            for k, v in set_snap.items():
                get, put = settings[k]
                if _read(get) != v:
                    try:
                        put(v)
                    except Exception:  # noqa: BLE001 - torch refuses the old value now (mixed tf32 APIs)
                        pass

        self.changes, self.restore = changes, restore


# ---- poisoning --------------------------------------------------------------------------------
def poison_allocator(sizes: list[int], device: torch.device) -> None:
    """Allocate, fill with 0xFF and free one buffer per size (bytes), then a larger one."""
    bufs = [torch.empty(max(n, 1), dtype=torch.uint8, device=device).fill_(0xFF) for n in sizes]
    bufs.append(torch.empty(max(sum(sizes), 1) * 2, dtype=torch.uint8, device=device).fill_(0xFF))
    del bufs


_EMPTY = {torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty, torch.Tensor.new_empty_strided}


class PoisonEmpty(TorchFunctionMode):
    """While active, uninitialised tensors created from Python come back poisoned."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: D105
        result = func(*args, **(kwargs or {}))
        if func in _EMPTY and type(result) is torch.Tensor and result.numel() and not result.is_meta:
            poison_fill(result)
        return result


def settle(seconds: float, device: torch.device) -> None:
    """Give work left on other threads (or streams) time to land before outputs are re-read."""
    _sleep(seconds)
    if device.type == "cuda":
        torch.cuda.synchronize()


# ---- side streams -----------------------------------------------------------------------------
# bound here, before any candidate is imported (a patch of them is reported by the guard anyway)
_Stream, _StreamNew = torch.cuda.Stream, torch.cuda.Stream.__new__
_ExternalNew = torch.cuda.ExternalStream.__new__
_current_stream, _default_stream, _CudaEvent = torch.cuda.current_stream, torch.cuda.default_stream, torch.cuda.Event
_query, _record, _wait = torch.cuda.Stream.query, torch.cuda.Event.record, torch.cuda.Event.synchronize
_POOL_DRAWS = 256  # torch's pools hand their streams out round robin (32 per priority today)
#: the constructors of a CUDA stream object, by their code (a frame of a traceback is matched by identity)
_STREAM_CODE = {getattr(_StreamNew, "__code__", None): "torch.cuda.Stream",
                getattr(_ExternalNew, "__code__", None): "torch.cuda.ExternalStream"}
_STREAM_CODE.pop(None, None)
#: ``cudaStream_t`` handles of default streams: 0 (the null stream), 1 (cudaStreamLegacy), 2 (per-thread)
_DEFAULT_HANDLES = (0, 1, 2)


class SideStreams:
    """The streams torch hands out on ``device`` (its pools, every priority, and the default stream),
    taken before the candidate is loaded; :meth:`left_behind` names those still busy after a call
    (module docstring). Nothing on a device other than CUDA."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.streams = device, []
        if device.type != "cuda":
            return
        try:
            least, greatest = _Stream.priority_range()
            found: dict[int, Any] = {}
            for priority in range(least, greatest - 1, -1):
                first = None
                for _ in range(_POOL_DRAWS):
                    s = _Stream(device=device, priority=priority)
                    if s.cuda_stream == first:
                        break  # the pool came round: every stream of this priority is in
                    first = s.cuda_stream if first is None else first
                    found.setdefault(s.cuda_stream, s)
            default = _default_stream(device)
            found.setdefault(default.cuda_stream, default)
            self.streams = list(found.values())
        except Exception:  # noqa: BLE001 - no pool to watch (a torch without it): nothing is claimed
            self.streams = []

    def left_behind(self) -> list[str]:
        """Right after a call returns, before any synchronization: wait for the current stream (and what it
        waits for) only, then name every watched stream other than it that still has work."""
        if not self.streams:
            return []
        try:
            cur = _current_stream(self.device)
            done = _CudaEvent()
            _record(done, cur)
            _wait(done)
            busy = [s for s in self.streams if s.cuda_stream != cur.cuda_stream and not _query(s)]
        except Exception:  # noqa: BLE001 - a broken context: the synchronization after the call reports it
            return []
        return [f"work on a side stream (stream {s.stream_id}, priority {s.priority}) was still running after the "
                "call returned and its current stream had finished: a caller's timer on its stream does not "
                "measure it" for s in busy[:2]]


def side_stream_attempt(exc: BaseException) -> str | None:
    """What side stream ``exc`` (or an exception in its chain) was raised while creating, or None.

    Only the construction of a new CUDA stream object counts (``torch.cuda.Stream``, or
    ``torch.cuda.ExternalStream`` of a handle other than a default stream's); a handle to a default
    stream (``stream_id=0``, ``stream_ptr`` 0, 1 or 2) is not a side stream. The caller asks only on a
    machine without CUDA, where creating one is all that made the call fail."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None:
            what = _STREAM_CODE.get(tb.tb_frame.f_code)
            if what is not None:
                local = tb.tb_frame.f_locals
                extra = local.get("kwargs") if isinstance(local.get("kwargs"), dict) else {}
                ptr = local.get("stream_ptr", extra.get("stream_ptr"))
                if extra.get("stream_id") == 0 or (ptr is not None and ptr in _DEFAULT_HANDLES):
                    break  # a default stream's handle: this traceback is no side stream
                return f"{what}(...) (a new side stream)"
            tb = tb.tb_next
        todo += [e.__cause__, e.__context__]
    return None
