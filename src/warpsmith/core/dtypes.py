"""Dtype names and rounding units (one place for both)."""
from __future__ import annotations

import torch

from .errors import UnknownNameError

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
}
_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32",
            "fp64": "float64", "double": "float64"}

# unit roundoff u = 2^-(mantissa bits + 1): |fl(x) - x| <= u |x| for round-to-nearest
UNIT_ROUNDOFF: dict[str, float] = {
    "float16": 2.0**-11, "bfloat16": 2.0**-8, "tf32": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53,
}
# largest integer n such that every integer in [-n, n] is exactly representable
EXACT_INT: dict[str, int] = {"float16": 2048, "bfloat16": 256, "float32": 2**24, "float64": 2**53}


def dtype_name(dtype: torch.dtype) -> str:
    for k, v in DTYPES.items():
        if v == dtype:
            return k
    raise UnknownNameError("dtype", str(dtype), list(DTYPES))


def parse_dtype(name: str | torch.dtype, allowed: tuple[torch.dtype, ...] | None = None) -> torch.dtype:
    """``"float16"``/``"fp16"``/``torch.float16`` → ``torch.float16``, restricted to ``allowed``."""
    if isinstance(name, torch.dtype):
        dt = name
    else:
        key = _ALIASES.get(str(name).strip().lower(), str(name).strip().lower())
        if key not in DTYPES:
            raise UnknownNameError("dtype", str(name), [dtype_name(d) for d in allowed] if allowed else list(DTYPES))
        dt = DTYPES[key]
    if allowed is not None and dt not in allowed:
        raise UnknownNameError("dtype", dtype_name(dt) if dt in DTYPES.values() else str(dt),
                               [dtype_name(d) for d in allowed])
    return dt
