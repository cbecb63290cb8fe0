"""OpSpec: *what* an op computes, independent of how any kernel computes it."""
from __future__ import annotations

import abc
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from ..errors import InvalidInputError, UnknownNameError
from .contract import ErrorContract
from .dtypes import dtype_name, parse_dtype

DISTRIBUTIONS = ("normal", "uniform", "outliers", "tiny", "large", "specials")
# inputs the identity test draws (not part of the error-contract distributions)
INTEGERS = "integers"


@dataclass(frozen=True)
class Axis:
    """A named size. ``optional`` axes may be absent (e.g. a batch dimension)."""

    name: str
    doc: str
    reduction: bool = False
    optional: bool = False
    max_size: int = 2**31 - 1


@dataclass(frozen=True)
class Problem:
    """One instance of an op: sizes, dtype and op-specific attributes (all validated)."""

    op: str
    shape: Mapping[str, int]
    dtype: torch.dtype
    attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.dtype)

    def describe(self) -> str:
        s = ",".join(f"{k}={v}" for k, v in self.shape.items())
        a = ",".join(f"{k}={v}" for k, v in sorted(self.attrs.items()))
        return f"{self.op}[{s}] {self.dtype_name}" + (f" ({a})" if a else "")


class OpSpec(abc.ABC):
    """Base class of every op's specification. Subclasses set the class attributes and methods.

    The reference is plain PyTorch and is the single source of truth: the oracle is the
    same reference run on float64 copies of the inputs.
    """

    name: str = ""
    axes: tuple[Axis, ...] = ()
    dtypes: tuple[torch.dtype, ...] = ()
    attr_choices: Mapping[str, tuple[Any, ...]] = {}

    # ---- problems -------------------------------------------------------------------
    def problem(self, shape: Mapping[str, int] | str, dtype: str | torch.dtype,
                attrs: Mapping[str, Any] | None = None) -> Problem:
        """Validate and normalise a problem; raises InvalidInputError naming what is wrong."""
        sizes = parse_shape(shape) if isinstance(shape, str) else dict(shape)
        known = {a.name: a for a in self.axes}
        for k, v in sizes.items():
            if k not in known:
                raise UnknownNameError(f"axis of {self.name}", k, list(known))
            if isinstance(v, bool) or not isinstance(v, int):
                raise InvalidInputError(f"size of axis {k}", "a positive integer", v)
            if not 1 <= v <= known[k].max_size:
                raise InvalidInputError(f"size of axis {k}", f"an integer in [1, {known[k].max_size}]", v)
        missing = [a.name for a in self.axes if not a.optional and a.name not in sizes]
        if missing:
            raise InvalidInputError(f"shape of {self.name}", "sizes for axes " + ", ".join(missing),
                                    ",".join(f"{k}={v}" for k, v in sizes.items()) or "nothing")
        ordered = {a.name: sizes[a.name] for a in self.axes if a.name in sizes}
        full_attrs = {k: choices[0] for k, choices in self.attr_choices.items()}
        for k, v in (attrs or {}).items():
            if k not in self.attr_choices:
                raise UnknownNameError(f"attribute of {self.name}", k, list(self.attr_choices))
            if v not in self.attr_choices[k]:
                raise InvalidInputError(f"attribute {k} of {self.name}",
                                        "one of " + ", ".join(map(str, self.attr_choices[k])), v)
            full_attrs[k] = v
        return Problem(self.name, ordered, parse_dtype(dtype, self.dtypes), full_attrs)

    # ---- to be provided by each op ------------------------------------------------------
    @abc.abstractmethod
    def make_inputs(self, problem: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Random inputs of ``problem`` drawn from distribution ``dist``."""

    def exact_inputs(self, problem: Problem, gen: torch.Generator,
                     device: str | torch.device = "cpu") -> dict[str, torch.Tensor] | None:
        """Small-integer inputs for the identity test; whether the op is exact on them is detected
        by the verifier (see :func:`warpsmith.verify.verifier.exact_on`)."""
        return self.make_inputs(problem, gen, INTEGERS, device)

    def large_scale(self, problem: Problem) -> float:
        """Scale of the ``large`` distribution: inputs near the dtype's limits, outputs still finite."""
        return float(torch.finfo(problem.dtype).max) ** 0.5 / 4

    def identity_problem(self, problem: Problem) -> Problem:
        """The problem the identity test runs: ``problem`` itself, or its nearest exact counterpart
        (e.g. without a transcendental epilogue)."""
        return problem

    @abc.abstractmethod
    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        """The plain-PyTorch reference (the single source of truth; float64 inputs give the oracle)."""

    @abc.abstractmethod
    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        """Per-element magnitude the accumulated rounding error scales with (e.g. ``|A| @ |B|``)."""

    @abc.abstractmethod
    def contract(self, problem: Problem) -> ErrorContract:
        """The error contract for this problem (from dtypes and reduction length)."""

    @abc.abstractmethod
    def flops(self, problem: Problem) -> float:
        """Floating-point operations of one call."""

    @abc.abstractmethod
    def min_bytes(self, problem: Problem) -> float:
        """Bytes a perfect kernel must move to and from DRAM."""

    # ---- shared helpers -----------------------------------------------------------------
    def oracle(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference in float64 on the same inputs, and the error scale."""
        x64 = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in inputs.items()}
        return self.reference(x64, attrs), self.error_scale(x64, attrs)


_SHAPE_ITEM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(-?\d+)\s*$")


def parse_shape(text: str) -> dict[str, int]:
    """``"M=257,N=129,K=300"`` → ``{"M": 257, "N": 129, "K": 300}``."""
    if not text or not text.strip():
        raise InvalidInputError("shape", "NAME=SIZE pairs separated by commas, e.g. M=257,N=129,K=300", text)
    out: dict[str, int] = {}
    for item in text.split(","):
        m = _SHAPE_ITEM.match(item)
        if not m:
            raise InvalidInputError("shape item", "NAME=SIZE with an integer SIZE, e.g. M=257", item.strip())
        if m.group(1) in out:
            raise InvalidInputError("shape", "each axis once", f"{m.group(1)} given twice in {text!r}")
        out[m.group(1)] = int(m.group(2))
    return out


def on_device(gen: torch.Generator, device: str | torch.device) -> torch.Generator:
    """A generator on ``device`` seeded from the CPU generator ``gen`` (``gen`` itself on the CPU)."""
    device = torch.device(device)
    if device.type == "cpu":
        return gen
    return torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))


def draw(shape: tuple[int, ...], dist: str, gen: torch.Generator, dtype: torch.dtype,
         device: str | torch.device = "cpu", scale: float = 1.0) -> torch.Tensor:
    """Random values from a named distribution, cast to ``dtype``.

    ``normal``, ``uniform`` in [-1, 1), ``outliers`` (1% of entries 100x larger), ``tiny``
    (1e-3 scale, into the subnormals of half precision), ``large`` (normal times ``scale``, which
    the op chooses so outputs approach the dtype's limit), ``specials`` (normal with one NaN, one
    +Inf and one -Inf per tensor), ``integers`` (in [-2, 2]). Values are generated on
    ``device``; the device generator is seeded from ``gen``, so results depend only on ``gen``.
    """
    if dist not in DISTRIBUTIONS + (INTEGERS,):
        raise UnknownNameError("input distribution", dist, DISTRIBUTIONS + (INTEGERS,))
    device = torch.device(device)
    kw = dict(generator=on_device(gen, device), device=device)
    if dist == INTEGERS:
        return torch.randint(-2, 3, shape, **kw).to(dtype)
    if dist == "uniform":
        return (torch.rand(shape, **kw) * 2 - 1).to(dtype)
    x = torch.randn(shape, **kw)
    if dist == "outliers":
        x = torch.where(torch.rand(shape, **kw) < 0.01, x * 100, x)
    elif dist == "tiny":
        x = x * 1e-3
    elif dist == "large":
        x = x * scale
    elif dist == "specials":  # one NaN, one +Inf and one -Inf at random places (as many as fit)
        flat = x.reshape(-1)
        where = torch.randperm(flat.numel(), **kw)[:3]
        flat[where] = torch.tensor([float("nan"), float("inf"), float("-inf")], device=device)[: where.numel()]
        x = flat.reshape(shape)
    return x.to(dtype)
