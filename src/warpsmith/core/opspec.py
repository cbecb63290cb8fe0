"""OpSpec: *what* an op computes, independent of how any kernel computes it."""
from __future__ import annotations

import abc
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from .errors import InvalidInputError, UnknownNameError
from .error_contract import ErrorContract, perturb
from .dtypes import dtype_name, parse_dtype

DISTRIBUTIONS = ("normal", "uniform", "outliers", "tiny", "large", "specials")
# Structured inputs real models feed, which no distribution above produces: exact zeros (ReLU
# activations, pruned weights), all-zero rows (padding), repeated rows (repeated tokens, broadcast
# rows), powers of two (exactly representable values, many ties) and subnormals of the dtype.
# :func:`draw` makes them; the check harness cycles through them
# (:data:`warpsmith.check.formats.DISTRIBUTIONS`). The library verifier does not: its trials are
# DISTRIBUTIONS, each op's make_inputs giving its inputs their own structure.
STRUCTURED = ("sparse", "padded", "repeated", "pow2", "subnormal")
# inputs the identity test draws (not part of the error-contract distributions)
INTEGERS = "integers"


def as_tuple(x: Any) -> tuple:
    """An op has one output or several (e.g. a normalization's result and its saved statistics):
    the reference, the error scale, the contract and a launcher give a tensor or a tuple in one
    order. This returns ``x`` as a tuple (a single tensor or contract becomes a 1-tuple)."""
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


@dataclass(frozen=True)
class Axis:
    """A named size. ``optional`` axes may be absent (e.g. a batch dimension)."""

    name: str
    doc: str
    reduction: bool = False
    optional: bool = False
    max_size: int = 2**31 - 1


@dataclass(frozen=True)
class Scalar:
    """A continuous attribute (e.g. ``eps``, label smoothing): any number in ``[lo, hi]``.

    The kernel takes it as a runtime argument, so it is not part of the tuning key: one tuned
    record serves every value (see :attr:`Problem.key_attrs`).
    """

    default: float | int
    lo: float
    hi: float
    integer: bool = False

    def parse(self, value: Any) -> float | int:
        ok_type = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type) or not self.lo <= value <= self.hi:
            kind = "an integer" if self.integer else "a number"
            raise InvalidInputError("value", f"{kind} in [{self.lo:g}, {self.hi:g}]", value)
        return int(value) if self.integer else float(value)

    def __str__(self) -> str:
        return f"{'integer' if self.integer else 'number'} in [{self.lo:g}, {self.hi:g}]"


@dataclass(frozen=True)
class Problem:
    """One instance of an op: sizes, dtype and op-specific attributes (all validated).

    ``scalars`` names the attributes that are continuous (:class:`Scalar`); the tuning key leaves
    them out.
    """

    op: str
    shape: Mapping[str, int]
    dtype: torch.dtype
    attrs: Mapping[str, Any] = field(default_factory=dict)
    scalars: frozenset[str] = frozenset()

    @property
    def key_attrs(self) -> dict[str, Any]:
        """The attributes a tuned config depends on (the DB and dispatch key)."""
        return {k: v for k, v in self.attrs.items() if k not in self.scalars}

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
    attr_choices: Mapping[str, tuple[Any, ...] | Scalar] = {}  # a tuple's first entry is the default

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
        full_attrs = {k: c.default if isinstance(c, Scalar) else c[0] for k, c in self.attr_choices.items()}
        for k, v in (attrs or {}).items():
            if k not in self.attr_choices:
                raise UnknownNameError(f"attribute of {self.name}", k, list(self.attr_choices))
            choices = self.attr_choices[k]
            if isinstance(choices, Scalar):
                try:
                    v = choices.parse(v)
                except InvalidInputError:
                    raise InvalidInputError(f"attribute {k} of {self.name}", str(choices), v) from None
            elif v not in choices:
                raise InvalidInputError(f"attribute {k} of {self.name}", "one of " + ", ".join(map(str, choices)), v)
            full_attrs[k] = v
        scalars = frozenset(k for k, c in self.attr_choices.items() if isinstance(c, Scalar))
        return Problem(self.name, ordered, parse_dtype(dtype, self.dtypes), full_attrs, scalars)

    def parse_attrs(self, items: list[str] | tuple[str, ...]) -> dict[str, Any]:
        """``["reduction=sum", "smoothing=0.1"]`` → attributes, each value matched to one of its choices."""
        out: dict[str, Any] = {}
        for item in items:
            name, sep, text = item.partition("=")
            name, text = name.strip(), text.strip()
            if not sep or not name:
                raise InvalidInputError("attribute", "NAME=VALUE, e.g. reduction=mean", item)
            if name not in self.attr_choices:
                raise UnknownNameError(f"attribute of {self.name}", name, list(self.attr_choices))
            choices = self.attr_choices[name]
            if isinstance(choices, Scalar):
                try:
                    out[name] = int(text) if choices.integer else float(text)
                except ValueError:
                    raise InvalidInputError(f"attribute {name} of {self.name}", str(choices), text) from None
                continue
            match = [c for c in choices if str(c).lower() == text.lower()]
            if not match:
                raise InvalidInputError(f"attribute {name} of {self.name}",
                                        "one of " + ", ".join(map(str, self.attr_choices[name])), text)
            out[name] = match[0]
        return out

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
    def outputs(self, problem: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        """Shape and dtype of each output, in the order the reference returns them."""

    @abc.abstractmethod
    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> Any:
        """The plain-PyTorch reference (the single source of truth; float64 inputs give the oracle).

        Returns one tensor, or a tuple in the order of :meth:`outputs`."""

    @abc.abstractmethod
    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> Any:
        """Per-element magnitude the accumulated rounding error scales with (e.g. ``|A| @ |B|``);
        one tensor per output, like :meth:`reference`."""

    @abc.abstractmethod
    def contract(self, problem: Problem) -> ErrorContract | tuple[ErrorContract, ...]:
        """The error contract for this problem (from dtypes and reduction length), one per output."""

    @abc.abstractmethod
    def flops(self, problem: Problem) -> float:
        """Floating-point operations of one call."""

    @abc.abstractmethod
    def min_bytes(self, problem: Problem) -> float:
        """Bytes a perfect kernel must move to and from DRAM."""

    def judge(self, problem: Problem, inputs: Mapping[str, torch.Tensor], outs: tuple[torch.Tensor, ...]) -> Any:
        """A criterion over all the outputs together, for ops whose outputs are discrete (a quantized
        value is judged against the kernel's own scale, another output): the failure, or None if the
        outputs pass; the verifier then uses it in place of the per-output :meth:`contract` checks.
        ``NotImplemented`` (the default): each output is judged by its error contract."""
        return NotImplemented

    # ---- shared helpers -----------------------------------------------------------------
    def oracle(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[Any, Any]:
        """The reference in float64 on the same inputs, and the error scale (each a tensor or a tuple)."""
        x64 = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in inputs.items()}
        return self.reference(x64, attrs), self.error_scale(x64, attrs)

    def perturbed_oracle(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], u: float) -> Any:
        """The float64 reference on the inputs perturbed at ``u`` (:func:`~warpsmith.core.error_contract.perturb`):
        with :meth:`oracle`, the op's sensitivity, the floor of the error contract's reference criterion."""
        x64 = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in inputs.items()}
        return self.reference(perturb(x64, u), attrs)


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
    +Inf and one -Inf per tensor), ``integers`` (in [-2, 2]), and the structured ones
    (:data:`STRUCTURED`, see :func:`structured`). Values are generated on ``device``; the device
    generator is seeded from ``gen``, so results depend only on ``gen``. ``dtype`` may be an fp8
    type (values are drawn in float32 and cast; the subnormals are fp8's own).
    """
    if dist not in DISTRIBUTIONS + STRUCTURED + (INTEGERS,):
        raise UnknownNameError("input distribution", dist, DISTRIBUTIONS + STRUCTURED + (INTEGERS,))
    device = torch.device(device)
    kw = dict(generator=on_device(gen, device), device=device)
    if dist in STRUCTURED:
        return structured(tuple(shape), dist, kw, dtype)
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


def rows_of(shape: tuple[int, ...]) -> tuple[int, int]:
    """How the structured distributions see a tensor: ``(rows, length)``. A row is a slice along the
    last dimension (a token's hidden vector, a matrix row); a tensor with fewer than two such rows (a
    vector, a scalar, ``[1, N]``) has its elements as rows."""
    numel = 1
    for s in shape:
        numel *= s
    if len(shape) >= 2 and shape[-1] > 0 and numel // shape[-1] >= 2:
        return numel // shape[-1], shape[-1]
    return numel, 1


def subnormals(n: int, dtype: torch.dtype, kw: dict[str, Any]) -> torch.Tensor:
    """``n`` random nonzero subnormals of ``dtype`` (float64 values, exact in ``dtype``): a random sign
    times ``k`` steps of the smallest subnormal, ``k`` log-uniform in [1, 2^m) (``m`` mantissa bits),
    so that both the largest subnormals and those with few significant bits occur."""
    fi = torch.finfo(dtype)
    m = round(-math.log2(fi.eps))  # explicit mantissa bits
    step = fi.tiny * fi.eps  # the smallest subnormal
    k = torch.floor(torch.exp2(torch.rand(n, dtype=torch.float64, **kw) * m)).clamp(1, 2.0**m - 1)
    sign = torch.where(torch.rand(n, **kw) < 0.5, -1.0, 1.0).to(torch.float64)
    return sign * k * step


def structured(shape: tuple[int, ...], dist: str, kw: dict[str, Any], dtype: torch.dtype) -> torch.Tensor:
    """One of :data:`STRUCTURED`, cast to ``dtype`` (``kw``: the generator and device). Rows as
    :func:`rows_of` defines them; "at least" and "never" below hold whenever the tensor has the
    elements or rows for it.

    - ``sparse``: normal values, each exactly zero with probability 1/2 (at least one zero and one
      nonzero).
    - ``padded``: normal rows, the last quarter of the rows (at least one) and, from four rows on,
      the first row too all zero: padding at either end of a batch; never every row.
    - ``repeated``: every row a copy of one of ``ceil(rows / 4)`` distinct normal rows, chosen at
      random (so rows repeat).
    - ``pow2``: ``±2^k``, ``k`` a random integer in [-4, 4]: exact in every float dtype, many ties.
    - ``subnormal``: normal values, a quarter of the elements replaced by subnormals of ``dtype`` and
      a quarter of the rows (at least one, never all) entirely subnormal (:func:`subnormals`).
    """
    rows, n = rows_of(shape)
    numel = rows * n
    dev = kw["device"]
    if dist == "pow2":
        k = torch.randint(-4, 5, (numel,), **kw).to(torch.float32)
        sign = torch.where(torch.rand(numel, **kw) < 0.5, -1.0, 1.0)
        return (sign * torch.exp2(k)).reshape(shape).to(dtype)
    if dist == "repeated":
        distinct = max(1, -(-rows // 4))
        base = torch.randn(distinct, n, **kw)
        pick = torch.randint(0, distinct, (rows,), **kw)
        return base[pick].reshape(shape).to(dtype)
    x = torch.randn(rows, n, **kw)
    if dist == "sparse":
        zero = torch.rand(rows, n, **kw) < 0.5
        if numel >= 2:
            at = torch.randperm(numel, **kw)[:2]
            zero.view(-1)[at[0]], zero.view(-1)[at[1]] = True, False
        return x.masked_fill(zero, 0.0).reshape(shape).to(dtype)
    if dist == "padded":
        if rows >= 2:
            x[rows - max(1, rows // 4):] = 0.0
            if rows >= 4:
                x[0] = 0.0
        return x.reshape(shape).to(dtype)
    # subnormal
    y = x.to(torch.float64)
    some = torch.rand(rows, n, **kw) < 0.25
    whole = torch.zeros(rows, dtype=torch.bool, device=dev)
    if rows >= 2:
        whole[torch.randperm(rows, **kw)[: max(1, rows // 4)]] = True
    where = some | whole[:, None]
    y[where] = subnormals(int(where.sum()), dtype, kw)
    return y.reshape(shape).to(dtype)
