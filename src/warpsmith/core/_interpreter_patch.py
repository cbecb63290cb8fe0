"""Cheaper launches and operations under Triton's interpreter (CPU only; the same results).

At every launch the interpreter wraps each builtin of ``triton.language`` (and of ``tl.tensor``,
``tl.math``, ...) so that it receives the interpreter's semantic, and unwraps them afterwards. To
find the builtins it lists every member of each package (``inspect.getmembers``: ``dir``, a
``getattr`` per name, a sort) and tests each one: 23% of the time of this project's norm and
softmax kernel tests under a profiler, and without one those tests took 23 to 24 CPU-s instead of 25
to 27 (docs/contributing.md, "Time"). It lists the same members at every launch: only the wrapping
changes them, and it is undone after the launch.

:func:`install` replaces the interpreter's ``_patch_builtin`` by one that remembers, per package,
which members are builtins, and still wraps each of them at each launch exactly as Triton does
(through Triton's own ``_patch_attr``, whose signature differs between Triton versions: the extra
arguments are passed through). At each launch each remembered name's current member is tested again
(a member already wrapped is left, as Triton leaves it). The members are listed again when the
package's (or one of its classes') attribute count takes a value not seen before (a new member; the
interpreter's own additions to ``tl.tensor`` during a launch give a second count), and the names
found are added to the package's, never dropped: a builtin wrapped when a listing ran is not lost.
"""
from __future__ import annotations

import inspect
from typing import Any


def _key(pkg: Any) -> tuple[int, ...]:
    owners = pkg.__mro__ if inspect.isclass(pkg) else (pkg,)
    return tuple(len(vars(o)) for o in owners)


def install(interpreter: Any) -> bool:
    """Patch ``interpreter`` (the module ``triton.runtime.interpreter``); False where its shape is not
    the one this was written against (then it is left as it is)."""
    original = getattr(interpreter, "_patch_builtin", None)
    patch_attr = getattr(interpreter, "_patch_attr", None)
    tl = getattr(interpreter, "tl", None)
    if original is None or patch_attr is None or tl is None or getattr(original, "_warpsmith", False):
        return False
    is_builtin = tl.core.is_builtin
    # id(package) -> (package, every name found a builtin): the package kept alive, its id is never another's
    seen: dict[int, tuple[Any, set[str]]] = {}
    lists: dict[tuple[int, tuple[int, ...]], list[str]] = {}  # (id, attribute counts) -> names, sorted

    def builtin_names(pkg: Any) -> list[str]:
        key = (id(pkg), _key(pkg))
        got = lists.get(key)
        if got is None:
            _, found = seen.setdefault(id(pkg), (pkg, set()))
            found.update(name for name, member in inspect.getmembers(pkg) if is_builtin(member))
            got = lists[key] = sorted(found)
        return got

    def _patch_builtin(pkg: Any, builder: Any, *rest: Any) -> None:
        for name in builtin_names(pkg):
            member = getattr(pkg, name, None)
            if is_builtin(member):  # not when already wrapped (tl.tensor is reached through tl and tl.core)
                patch_attr(pkg, name, member, builder, *rest)

    _patch_builtin._warpsmith = True  # type: ignore[attr-defined]
    interpreter._patch_builtin = _patch_builtin
    _memoize_np_dtype(interpreter)
    return True


def _memoize_np_dtype(interpreter: Any) -> None:
    """``_get_np_dtype`` (the numpy dtype that holds a Triton type's values) builds a table of twenty
    numpy dtypes at each of its calls, several per operation of each program. Its answer depends on the
    type alone, which its class and name say in full (a block type's name holds its shape and element
    type): remembered under that key; a type without a name is asked each time."""
    get = getattr(interpreter, "_get_np_dtype", None)
    if get is None:
        return
    memo: dict[tuple[type, str], Any] = {}

    def _get_np_dtype(tt_dtype: Any) -> Any:
        name = getattr(tt_dtype, "name", None)
        if not isinstance(name, str):
            return get(tt_dtype)
        key = (type(tt_dtype), name)
        found = memo.get(key)
        if found is None:
            found = memo[key] = get(tt_dtype)
        return found

    _get_np_dtype.__wrapped__ = get  # type: ignore[attr-defined]
    interpreter._get_np_dtype = _get_np_dtype
