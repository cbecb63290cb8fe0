"""Which variants implement which op."""
from __future__ import annotations

from ..errors import UnknownNameError
from .base import Variant
from .gemm.variant import VARIANTS as _GEMM

_BY_OP: dict[str, dict[str, Variant]] = {"matmul": {v.name: v for v in _GEMM}}


def variants(op: str) -> dict[str, Variant]:
    if op not in _BY_OP:
        raise UnknownNameError("op", op, list(_BY_OP))
    return dict(_BY_OP[op])


def get_variant(op: str, name: str) -> Variant:
    vs = variants(op)
    if name not in vs:
        raise UnknownNameError(f"variant of {op}", name, list(vs))
    return vs[name]
