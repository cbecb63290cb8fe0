"""warpsmith: search-based GPU kernel compiler with verified results.

``import warpsmith`` is cheap; :mod:`warpsmith.ops` (the public ops) and :mod:`warpsmith.nn` (drop-in
modules) are imported on first use, so ``warpsmith.ops.matmul(a, b)`` works after ``import warpsmith``.
"""
from __future__ import annotations

import importlib
from typing import Any

from .core.version import __version__

_LAZY = ("ops", "nn")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'warpsmith' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def patch(model, **options):
    """Run a Llama-family Hugging Face model's memory-bound layers on warpsmith's kernels
    (see :func:`warpsmith.patching.patch`)."""
    from .patching import patch as _patch

    return _patch(model, **options)


def compile(fn_or_module, example_inputs=None, **options):  # noqa: A001 - torch.compile's name
    """Compile a module or function into verified warpsmith kernels (see
    :func:`warpsmith.compiler.backend.compile`); ``torch.compile(m, backend="warpsmith")`` is the same
    backend."""
    from .compiler.backend import compile as _compile

    return _compile(fn_or_module, example_inputs, **options)


def quantize(model, scheme: str = "int4-awq", **options):
    """Replace a model's ``nn.Linear`` layers by low-precision modules (see
    :func:`warpsmith.quantization.quantize`)."""
    from .quantization import quantize as _quantize

    return _quantize(model, scheme, **options)


def tune_model(model, example_inputs, **options):
    """Capture a model's problems, rank them by predicted share of the step, tune them and record the
    winners (see :func:`warpsmith.modeltune.tune_model`)."""
    from .modeltune import tune_model as _tune_model

    return _tune_model(model, example_inputs, **options)


__all__ = ["__version__", "ops", "nn", "patch", "compile", "quantize", "tune_model"]
