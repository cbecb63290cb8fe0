"""Gathers and scatters along one dim: ``gather``, ``scatter_add`` and ``scatter``.

A problem is a 3-D view: the table side ``(A, V, B)`` (``V`` entries along the indexed dim, ``A``
the dims before it flattened, ``B`` those after), the index side ``(A, J, B)``. Attribute ``index``:

- ``elements``: the index has the index side's full shape (``torch.gather``, ``scatter_add``,
  ``scatter``);
- ``rows``: the index is a vector of ``J`` entries used for every ``(a, b)`` (``index_select``,
  ``embedding`` with ``A = 1``, ``x[idx]``, ``index_add``).

- ``gather``: ``out[a, j, b] = src[a, idx, b]`` (out ``(A, J, B)``): a copy, exact.
- ``scatter_add``: ``out = self`` then ``out[a, idx, b] += src[a, j, b]`` (out ``(A, V, B)``; the
  embedding backward is ``self = 0``): accumulated in fp32, rounded once to the dtype.
- ``scatter``: ``out = self`` then ``out[a, idx, b] = src[a, j, b]``. With duplicate indices torch
  leaves the winner unspecified, and so do the kernels (``atomic_xchg``): the inputs drawn here have
  distinct indices along ``j`` (so ``J <= V`` is required to draw them).

Index values are drawn in ``[0, V)``; the launchers refuse any other (``check_index``).

Error contracts. ``gather`` and ``scatter`` move values: the result is exact (error scale 0; the
contract's ``u_out |y|`` term and the subnormal step are all it allows, and a wrong element, a value
of another row, is far outside it). ``scatter_add``: each element is ``self`` plus at most ``J``
terms summed in fp32 in an unspecified order (atomics), so with ``u = 2^-24`` the error is at most
``gamma(J + 1, u) (|self| + sum |src terms|)``, plus the final rounding ``u_out |y|``: the contract's
reduction length is ``J + 1`` and the error scale ``|self| + scatter_add(|src|)``.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ...core.dtypes import UNIT_ROUNDOFF
from ...core.error_contract import ErrorContract
from ...core.errors import InvalidInputError
from ...core.opspec import Axis, OpSpec, Problem, draw, on_device

_U = UNIT_ROUNDOFF["float32"]
INDEX_KINDS = ("elements", "rows")


def expand_index(idx: torch.Tensor, kind: str, a: int, b: int) -> torch.Tensor:
    """The index as an ``(A, J, B)`` tensor (a ``rows`` vector broadcast: strides ``(0, s, 0)``)."""
    return idx.view(1, -1, 1).expand(a, idx.shape[0], b) if kind == "rows" else idx


class _GatherSpec(OpSpec):
    axes = (Axis("A", "the dims before the indexed one, flattened", max_size=2**31 - 1),
            Axis("J", "index entries along the indexed dim", max_size=2**31 - 1024),
            Axis("B", "the dims after the indexed one, flattened", max_size=2**31 - 1024),
            Axis("V", "table entries along the indexed dim", max_size=2**31 - 1024))
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    attr_choices: Mapping[str, Any] = {"index": INDEX_KINDS}

    def _index(self, p: Problem, gen: torch.Generator, device: Any, distinct: bool = False) -> torch.Tensor:
        A, J, B, V = (p.shape[k] for k in "AJBV")
        g = on_device(gen, device)
        rows = p.attrs["index"] == "rows"
        if not distinct:
            return torch.randint(0, V, (J,) if rows else (A, J, B), generator=g, device=device)
        if J > V:
            raise InvalidInputError(f"shape of {self.name}", "J <= V (distinct indices along j)", f"J={J}, V={V}")
        if rows:
            return torch.randperm(V, generator=g, device=device)[:J]
        keys = torch.rand((A, V, B), generator=g, device=device)
        return keys.argsort(dim=1)[:, :J, :]

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        return ErrorContract(dt, UNIT_ROUNDOFF[dt], _U, 1)

    def flops(self, p: Problem) -> float:
        return 0.0

    def min_bytes(self, p: Problem) -> float:
        A, J, B = p.shape["A"], p.shape["J"], p.shape["B"]
        idx = 8 * (J if p.attrs["index"] == "rows" else A * J * B)
        return 2.0 * A * J * B * p.dtype.itemsize + idx


class GatherSpec(_GatherSpec):
    """``out[a, j, b] = src[a, idx, b]``; see the module docstring."""

    name = "gather"

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        A, B, V = p.shape["A"], p.shape["B"], p.shape["V"]
        return {"src": draw((A, V, B), dist, gen, p.dtype, device), "index": self._index(p, gen, device)}

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["A"], p.shape["J"], p.shape["B"]), p.dtype),)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        src, idx = inputs["src"], inputs["index"]
        if attrs["index"] == "rows":
            return src.index_select(1, idx)
        return torch.gather(src, 1, idx)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return torch.zeros_like(self.reference(inputs64, attrs))


class ScatterSpec(_GatherSpec):
    """``out = self``, then ``out[a, idx, b] (+)= src[a, j, b]``; see the module docstring."""

    def __init__(self, add: bool) -> None:
        self.add = add
        self.name = "scatter_add" if add else "scatter"

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        A, J, B, V = (p.shape[k] for k in "AJBV")
        return {"self": draw((A, V, B), dist, gen, p.dtype, device),
                "index": self._index(p, gen, device, distinct=not self.add),
                "src": draw((A, J, B), dist, gen, p.dtype, device)}

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["A"], p.shape["V"], p.shape["B"]), p.dtype),)

    def _apply(self, base: torch.Tensor, idx: torch.Tensor, src: torch.Tensor, kind: str) -> torch.Tensor:
        if kind == "rows":
            return base.index_add(1, idx, src) if self.add else base.index_copy(1, idx, src)
        return base.scatter_add(1, idx, src) if self.add else base.scatter(1, idx, src)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        s = inputs["self"]
        ct = torch.float64 if s.dtype == torch.float64 else torch.float32
        return self._apply(s.to(ct), inputs["index"], inputs["src"].to(ct), attrs["index"]).to(s.dtype)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        if not self.add:
            return torch.zeros_like(inputs64["self"])
        return self._apply(inputs64["self"].abs(), inputs64["index"], inputs64["src"].abs(), attrs["index"])

    def contract(self, p: Problem) -> ErrorContract:
        dt = p.dtype_name
        return ErrorContract(dt, UNIT_ROUNDOFF[dt], _U, p.shape["J"] + 1 if self.add else 1)

    def flops(self, p: Problem) -> float:
        return float(p.shape["A"] * p.shape["J"] * p.shape["B"]) if self.add else 0.0

    def min_bytes(self, p: Problem) -> float:
        A, J, B, V = (p.shape[k] for k in "AJBV")
        e = p.dtype.itemsize
        idx = 8 * (J if p.attrs["index"] == "rows" else A * J * B)
        return float(A * J * B * e + 2 * A * V * B * e + idx)


GATHER = GatherSpec()
SCATTER_ADD = ScatterSpec(add=True)
SCATTER = ScatterSpec(add=False)
SPECS = (GATHER, SCATTER_ADD, SCATTER)

__all__ = ["GatherSpec", "ScatterSpec", "GATHER", "SCATTER_ADD", "SCATTER", "SPECS", "INDEX_KINDS", "expand_index"]
