"""Import Triton the right way for this machine.

Triton (3.6 through 3.9) reads ``TRITON_INTERPRET`` through ``triton.knobs.runtime.interpret``
when a function is decorated with ``@triton.jit``: the decorator returns an ``InterpretedFunction``
(runs on the CPU) or a ``JITFunction`` (compiles for the active GPU driver). The decision is taken
here, once, before any of warpsmith's kernel modules (or a module the compiler emits) is decorated,
whoever imported ``triton`` first (``torch._dynamo`` does, before ``torch.compile`` loads the
backend):

- with ``WARPSMITH_COMPILE_ONLY=<arch>`` (``sm_90``, ``gfx942``) kernels are compiled for that
  GPU architecture and never run (``warpsmith gpucheck``; see ``_compile_only``);
- else with no CUDA or ROCm device (or with ``WARPSMITH_INTERPRET=1``) kernels run on the
  CPU under Triton's interpreter, for correctness only;
- else they compile and run on the GPU.
"""
from __future__ import annotations

import os
import sys
from typing import Any

import torch

from .settings import settings


def _decide() -> tuple[bool, str | None]:
    """(interpret, compile-only architecture)."""
    s = settings()
    if s.compile_only:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
            raise RuntimeError("WARPSMITH_COMPILE_ONLY is set but Triton was already imported with its "
                               "interpreter: set it before anything imports triton")
        os.environ.pop("TRITON_INTERPRET", None)
        return False, s.compile_only
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return True, None  # imported under the interpreter already
    # Without a GPU, Triton can only run kernels under its interpreter (a kernel compiled for no
    # driver fails with "0 active drivers"), so it is switched on even when someone else imported
    # triton first (as WARPSMITH_INTERPRET=1 asks): the decorator reads it when it decorates.
    interpret = s.force_interpret or not torch.cuda.is_available()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # also for child processes
        if "triton" in sys.modules:
            _interpret_after_import()
    return interpret, None


def _interpret_after_import() -> None:
    """Switch an already imported Triton to its interpreter.

    Two things were fixed when ``triton`` was imported without ``TRITON_INTERPRET``: the knob (read
    from the environment on each access in 3.6-3.9, unless set; it is set here), and Triton's own
    ``@jit`` library functions (``tl.sum``, ``tl.max``, ``tl.rand``, ``x.sum()``, ...), decorated
    then as ``JITFunction`` objects that an interpreted kernel cannot call ("Cannot call @triton.jit'd
    outside of the scope of a kernel"). Each is replaced, in every ``triton.*`` module and on
    ``tl.tensor``, by the ``InterpretedFunction`` the decorator returns under the interpreter (as a
    forwarding method on the tensor class, as ``tl.core._tensor_member_fn`` does then)."""
    import inspect

    import triton as _t
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    runtime = getattr(getattr(_t, "knobs", None), "runtime", None)
    if runtime is not None and hasattr(runtime, "interpret"):
        runtime.interpret = True
    made: dict[int, InterpretedFunction] = {}

    def interpreted(jf: JITFunction) -> InterpretedFunction:
        if id(jf) not in made:
            made[id(jf)] = InterpretedFunction(jf.fn, noinline=getattr(jf, "noinline", None),
                                               debug=getattr(jf, "debug", None))
        return made[id(jf)]

    def member(f: InterpretedFunction, original: Any) -> Any:
        def method(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)
        method.__name__ = method.__qualname__ = original.fn.__name__
        method.__doc__ = original.fn.__doc__
        try:
            sig = inspect.signature(original.fn)
            params = list(sig.parameters.values())
            method.__signature__ = sig.replace(parameters=[params[0].replace(name="self"), *params[1:]])  # type: ignore[attr-defined]
        except (ValueError, TypeError, IndexError):
            pass
        return method

    for name, module in list(sys.modules.items()):
        if module is None or not (name == "triton" or name.startswith("triton.")):
            continue
        for key, value in list(vars(module).items()):
            if type(value) is JITFunction:
                setattr(module, key, interpreted(value))
            elif inspect.isclass(value) and getattr(value, "__module__", "").startswith("triton."):
                for attr, member_fn in list(vars(value).items()):
                    if type(member_fn) is JITFunction:
                        setattr(value, attr, member(interpreted(member_fn), member_fn))


INTERPRET, COMPILE_ONLY_ARCH = _decide()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

if INTERPRET:
    from triton.runtime import interpreter as _interpreter  # noqa: E402

    from . import _interpreter_patch  # noqa: E402

    _interpreter_patch.install(_interpreter)
else:
    from . import _compile_only  # noqa: E402

    if COMPILE_ONLY_ARCH:
        from triton.runtime.driver import driver as _driver

        _driver.set_active(_compile_only.make_driver(COMPILE_ONLY_ARCH))
    _compile_only.install(compile_only=COMPILE_ONLY_ARCH is not None)

__all__ = ["INTERPRET", "COMPILE_ONLY_ARCH", "triton", "tl"]
