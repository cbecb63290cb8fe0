"""The one registry: which ops exist (their specs) and which variants implement each, in order of
preference for the heuristic default.

It is built from the families' own declarations: each family package (``warpsmith.ops.<family>``)
exposes ``SPECS`` (its :class:`OpSpec` objects) and ``VARIANTS`` (its :class:`Variant` instances,
each naming its op), and :mod:`warpsmith.ops` builds ``REGISTRY = Registry(FAMILIES)`` from its one
list of families. Nothing is kept in sync by hand: a variant of an op its family does not declare,
an op declared twice, or an op without a variant is an error here, at import.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .errors import UnknownNameError, WarpsmithError
from .opspec import OpSpec, Problem
from .variant import Variant

if TYPE_CHECKING:  # annotations only: targets sit above core
    from ..targets import Target


def variants_of(op: str, variants: Iterable[Variant]) -> dict[str, Variant]:
    """The variants of ``op`` among ``variants`` (e.g. a family's ``VARIANTS``), by name, in order."""
    return {v.name: v for v in variants if v.op == op}


def default_variant(problem: Problem, variants: Mapping[str, Variant], target: Target) -> Variant:
    """The first of ``variants`` (in order of preference) whose heuristic default runs ``problem`` on
    ``target`` (e.g. a single-pass softmax where the row fits on chip, else the looped one)."""
    for v in variants.values():
        if v.rejection(problem, v.default_config(problem, target), target) is None:
            return v
    raise WarpsmithError(f"no variant of {problem.op} runs {problem.describe()} on {target.name} "
                         f"with its default config (tried {', '.join(variants)})")


class Registry:
    """Every op's spec and variants, from a list of families (modules or objects with ``SPECS`` and
    ``VARIANTS``), in that order."""

    def __init__(self, families: Iterable[Any]) -> None:
        self.families = tuple(families)
        self.ops: dict[str, OpSpec] = {}
        self._variants: dict[str, dict[str, Variant]] = {}
        for fam in self.families:
            name = getattr(fam, "__name__", repr(fam))
            declared = set()
            for spec in fam.SPECS:
                if spec.name in self.ops:
                    raise WarpsmithError(f"op {spec.name} is declared twice (again by {name})")
                self.ops[spec.name] = spec
                declared.add(spec.name)
            for v in fam.VARIANTS:
                if v.op not in declared:
                    raise WarpsmithError(f"variant {v.name} of {name} serves op {v.op!r}, which {name} does not "
                                         f"declare in SPECS ({', '.join(sorted(declared))})")
                by_name = self._variants.setdefault(v.op, {})
                if v.name in by_name:
                    raise WarpsmithError(f"op {v.op} has two variants named {v.name}")
                by_name[v.name] = v
        missing = [op for op in self.ops if op not in self._variants]
        if missing:
            raise WarpsmithError(f"ops without a variant: {', '.join(missing)}")

    def get_op(self, name: str) -> OpSpec:
        if name not in self.ops:
            raise UnknownNameError("op", name, list(self.ops))
        return self.ops[name]

    def variants(self, op: str) -> dict[str, Variant]:
        if op not in self._variants:
            raise UnknownNameError("op", op, list(self._variants))
        return dict(self._variants[op])

    def all_variants(self) -> tuple[Variant, ...]:
        return tuple(v for vs in self._variants.values() for v in vs.values())

    def get_variant(self, op: str, name: str) -> Variant:
        vs = self.variants(op)
        if name not in vs:
            raise UnknownNameError(f"variant of {op}", name, list(vs))
        return vs[name]

    def default_variant(self, problem: Problem, target: Target) -> Variant:
        return default_variant(problem, self.variants(problem.op), target)
