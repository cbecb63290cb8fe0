"""The interpreter's per-launch patching of triton.language, made cheap (core/_interpreter_patch.py):
the same builtins wrapped at each launch, the members listed once, listed again when a package changes."""
import inspect
import types

import pytest
import torch

from warpsmith.core._triton import INTERPRET, tl, triton

pytestmark = pytest.mark.skipif(not INTERPRET, reason="Triton's interpreter is not in use")

from triton.runtime import interpreter as interp  # noqa: E402
import triton.language.core as tlc  # noqa: E402  -- a kernel module that sees both tl and tl.core


@triton.jit
def _twice(x, n, BLOCK: tl.constexpr):
    return tl.where(tlc.arange(0, BLOCK) < n, x * 2.0, 0.0)


@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, _twice(x, n - tl.program_id(0) * BLOCK, BLOCK) + tl.sum(x, axis=0) * 0.0, mask=offs < n)


def _run(n=37):
    x = torch.randn(n)
    y = torch.empty_like(x)
    _scale[(triton.cdiv(n, 16),)](x, y, n, BLOCK=16)
    return x, y


def _scope():
    return (interp._LangPatchScope(),) if hasattr(interp, "_LangPatchScope") else ()


def test_installed_and_results_unchanged_and_members_listed_once(monkeypatch):
    assert getattr(interp._patch_builtin, "_warpsmith", False)
    for _ in range(2):  # Triton's first undo leaves inherited members (e.g. __repr__) on tl.tensor: a new count
        x, y = _run()
        torch.testing.assert_close(y, x * 2, rtol=0, atol=0)
    calls = []
    real = inspect.getmembers
    monkeypatch.setattr(inspect, "getmembers", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    for _ in range(2):
        x, y = _run()
        torch.testing.assert_close(y, x * 2, rtol=0, atol=0)
    assert [c for c in calls if c in (tl, tlc, tl.tensor, tl.math)] == []  # nothing of tl listed again


def test_a_package_that_changes_is_listed_again():
    pkg = types.ModuleType("fake_lang")

    @tlc.builtin
    def first(_semantic=None):
        return "first"

    pkg.first, pkg.plain = first, (lambda: "plain")
    scope = _scope()
    interp._patch_builtin(pkg, interp.interpreter_builder, *scope)
    assert pkg.first is not first and pkg.plain() == "plain"  # the builtin wrapped, the rest left
    if not scope:
        pytest.skip("this Triton's patching has no scope to undo it")
    scope[0].restore()
    assert pkg.first is first

    @tlc.builtin
    def second(_semantic=None):
        return "second"

    pkg.second = second  # a new builtin: the package's attribute count changed
    scope = _scope()
    interp._patch_builtin(pkg, interp.interpreter_builder, *scope)
    assert pkg.first is not first and pkg.second is not second
    scope[0].restore()
    pkg.first = lambda: "no longer a builtin"  # same count, the remembered name's member changed
    scope = _scope()
    interp._patch_builtin(pkg, interp.interpreter_builder, *scope)
    assert pkg.first() == "no longer a builtin" and pkg.second is not second
    scope[0].restore()


def test_numpy_dtypes_are_triton_s_own_answers():
    get = interp._get_np_dtype.__wrapped__  # Triton's own, which the memo asks once per type
    types_ = [tl.float16, tl.bfloat16, tl.float32, tl.int1, tl.int8, tl.uint32, tl.float8e4nv, tl.pointer_type(tl.float32),
              tl.block_type(tl.float16, [16]), tl.block_type(tl.pointer_type(tl.int8), [4, 8]), tl.block_type(tl.int64, [2])]
    for t in types_ * 2:  # the second pass is answered from the memo
        assert interp._get_np_dtype(t) == get(t), t
