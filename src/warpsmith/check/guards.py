"""What the harness does around every candidate call: patch snapshots, poisoning, threads.

- :class:`PatchGuard` records, before the candidate is loaded:
  - the identity of every function, class and module in the namespaces a cheat would patch:
    torch (and ``torch.nn.functional``, ``torch.testing``, ``torch.linalg``, ``torch.cuda``,
    ``torch.random``), time, builtins, threading, copy, math, triton (``triton.language``,
    ``triton.testing``), and the harness's own modules;
  - the full class dicts of ``torch.Tensor``, ``torch.nn.Module``, ``threading.Thread`` and
    every harness class, so that an attribute *added* to ``torch.Tensor`` (shadowing
    ``TensorBase.__eq__``, say) counts as a change;
  - global settings that change what the reference computes: tf32 flags, the float32 matmul
    precision, deterministic algorithms, the default dtype, trace and profile hooks, and the
    torch function and dispatch mode stacks.

  ``changes()`` names everything that differs from the snapshot, and ``restore()`` puts it
  back. Two kinds of change are tolerated, because torch makes them itself (``torch.compile``
  does): a replacement defined in torch's own files that wraps the original, and a plain
  scalar flag added to a class dict under a name the class did not have, even by inheritance.
  The comparison logic is a closure made when the snapshot is taken, so patching
  ``PatchGuard`` after that does not blind it.
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
        if name.startswith("warpsmith.check.") or name in ("warpsmith.core.contract", "warpsmith.core.opspec",
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
        set_snap = {k: get() for k, (get, _) in settings.items()}
        _vars, _getattr, _setattr, _delattr, _list = vars, getattr, setattr, delattr, list

        def changes() -> list[str]:
            out = []
            for (m, k), v in _list(mod_snap.items()):
                now = _vars(m).get(k, _MISSING)
                if now is not v and torch_own_wrapper(now, v):
                    mod_snap[(m, k)] = now  # torch's own wrapper becomes the baseline
                elif now is not v:
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
                if get() != v:
                    put(v)

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
