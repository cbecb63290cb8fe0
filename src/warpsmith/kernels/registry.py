"""Which variants implement which op, in order of preference for the heuristic default."""
from __future__ import annotations

from ..errors import UnknownNameError, WarpsmithError
from ..spec import Problem
from ..targets import Target
from .base import Variant
from .gemm.variant import VARIANTS as _GEMM
from .norm.variant import VARIANTS as _NORM
from .activation.variant import VARIANTS as _ACTIVATION
from .rope.variant import VARIANTS as _ROPE
from .softmax.variant import VARIANTS as _SOFTMAX
from .xent.variant import VARIANTS as _XENT

# one line per kernel family: its VARIANTS list (each Variant names its op)
_FAMILIES: tuple[tuple[Variant, ...], ...] = (
    tuple(_GEMM),
    tuple(_NORM),
    tuple(_ACTIVATION),
    tuple(_ROPE),
    tuple(_SOFTMAX),
    tuple(_XENT),
)

_BY_OP: dict[str, dict[str, Variant]] = {}
for _family in _FAMILIES:
    for _v in _family:
        _BY_OP.setdefault(_v.op, {})[_v.name] = _v


def variants(op: str) -> dict[str, Variant]:
    if op not in _BY_OP:
        raise UnknownNameError("op", op, list(_BY_OP))
    return dict(_BY_OP[op])


def get_variant(op: str, name: str) -> Variant:
    vs = variants(op)
    if name not in vs:
        raise UnknownNameError(f"variant of {op}", name, list(vs))
    return vs[name]


def default_variant(problem: Problem, target: Target) -> Variant:
    """The first variant (in registration order) whose heuristic default runs ``problem`` on ``target``
    (e.g. a single-pass softmax where the row fits on chip, else the looped one)."""
    vs = variants(problem.op)
    for v in vs.values():
        if v.rejection(problem, v.default_config(problem, target), target) is None:
            return v
    raise WarpsmithError(f"no variant of {problem.op} runs {problem.describe()} on {target.name} "
                         f"with its default config (tried {', '.join(vs)})")
