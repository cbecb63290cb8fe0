"""``warpsmith.quantize(model, scheme=...)``: replace a model's ``nn.Linear`` layers by low-precision modules.

A scheme is one entry of :data:`SCHEMES`: a name and a function ``(linear, **options) -> module``.
This branch registers ``"int4-awq"`` and ``"int4-gptq"`` (RTN quantization packed in AutoAWQ's GEMM or
GPTQ v1 format, :class:`warpsmith.nn.Int4Linear`; option ``group_size``, default 128). Another scheme
is one line, e.g. ``register_scheme("fp8", lambda linear, **o: Fp8Linear.from_linear(linear, **o))``.

By default the output head (a module named ``lm_head``, or any Linear whose weight is tied to an
embedding) is kept, as are layers the scheme cannot hold (e.g. int4: in_features not a multiple of
the group size, out_features not a multiple of 8); ``filter(name, linear) -> bool`` chooses instead.
Embeddings are never touched (they are not ``nn.Linear``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from .core.errors import InvalidInputError, UnknownNameError

Scheme = Callable[..., torch.nn.Module]
SCHEMES: dict[str, Scheme] = {}


def register_scheme(name: str, make: Scheme) -> None:
    """Add (or replace) a scheme: ``make(linear, **options)`` returns the module replacing ``linear``,
    or raises ``InvalidInputError`` where it cannot hold that layer (the layer is then kept)."""
    SCHEMES[name] = make


def _int4(format: str) -> Scheme:
    def make(linear: torch.nn.Linear, group_size: int = 128, dtype: torch.dtype = torch.float16) -> torch.nn.Module:
        from .nn import Int4Linear

        return Int4Linear.from_linear(linear, group_size, format, dtype)
    return make


def _fp8(linear: torch.nn.Linear, recipe: str = "rowwise") -> torch.nn.Module:
    from .nn import Fp8Linear

    return Fp8Linear.from_linear(linear, recipe)


def _int8(linear: torch.nn.Linear) -> torch.nn.Module:
    from .nn import Int8Linear

    return Int8Linear.from_linear(linear)


register_scheme("int4-awq", _int4("awq"))
register_scheme("int4-gptq", _int4("gptq"))
register_scheme("fp8", _fp8)  # e4m3 forward, trainable (hybrid e5m2 x e4m3 backward); option recipe: rowwise or tensorwise
register_scheme("int8", _int8)  # W8A8, per-token activations and per-channel weights, inference only


@dataclass
class QuantizeReport:
    """What :func:`quantize` did: the layers replaced, and those kept with the reason."""

    scheme: str
    replaced: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)


def _tied_to_embedding(model: torch.nn.Module, linear: torch.nn.Linear) -> bool:
    return any(isinstance(m, torch.nn.Embedding) and m.weight is linear.weight for m in model.modules())


def quantize(model: torch.nn.Module, scheme: str = "int4-awq", *,
             filter: Optional[Callable[[str, torch.nn.Linear], bool]] = None, **options: Any) -> QuantizeReport:
    """Replace, in place, the ``nn.Linear`` layers of ``model`` by the modules of ``scheme`` (int4 and int8: inference only; fp8 also trains).

    Args:
        model: any ``torch.nn.Module``.
        scheme: a name in :data:`SCHEMES` ("int4-awq", "int4-gptq", ...).
        filter: ``(qualified name, linear) -> bool``: which layers to replace (default: all but the
            output head, see the module docstring).
        **options: passed to the scheme (int4: ``group_size``, ``dtype``; fp8: ``recipe``).

    Returns:
        A :class:`QuantizeReport`.
    """
    if scheme not in SCHEMES:
        raise UnknownNameError("quantization scheme", scheme, list(SCHEMES))
    make = SCHEMES[scheme]
    report = QuantizeReport(scheme)
    targets = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    for name, linear in targets:
        if filter is not None:
            if not filter(name, linear):
                report.kept[name] = "filtered out"
                continue
        elif name.split(".")[-1] == "lm_head" or _tied_to_embedding(model, linear):
            report.kept[name] = "output head (pass filter= to include it)"
            continue
        try:
            new = make(linear, **options)
        except InvalidInputError as exc:
            report.kept[name] = str(exc)
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, new.to(linear.weight.device))
        report.replaced.append(name)
    return report


__all__ = ["SCHEMES", "register_scheme", "quantize", "QuantizeReport"]
