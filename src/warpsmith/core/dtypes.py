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
# the smallest positive (subnormal) value: the error floor of a result near zero
SUBNORMAL_STEP: dict[str, float] = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149, "float64": 2.0**-1074}
# the same two by torch dtype, fp8 included (the check harness judges foreign kernels' outputs in any of these)
UNIT_ROUNDOFF_OF: dict[torch.dtype, float] = {
    torch.float64: UNIT_ROUNDOFF["float64"], torch.float32: UNIT_ROUNDOFF["float32"], torch.float16: UNIT_ROUNDOFF["float16"],
    torch.bfloat16: UNIT_ROUNDOFF["bfloat16"], torch.float8_e4m3fn: 2.0**-4, torch.float8_e5m2: 2.0**-3}
SUBNORMAL_STEP_OF: dict[torch.dtype, float] = {
    torch.float64: SUBNORMAL_STEP["float64"], torch.float32: SUBNORMAL_STEP["float32"],
    torch.float16: SUBNORMAL_STEP["float16"], torch.bfloat16: SUBNORMAL_STEP["bfloat16"],
    torch.float8_e4m3fn: 2.0**-9, torch.float8_e5m2: 2.0**-16}
# largest integer n such that every integer in [-n, n] is exactly representable
EXACT_INT: dict[str, int] = {"float16": 2048, "bfloat16": 256, "float32": 2**24, "float64": 2**53}


# the dtype attribute of an op's parameters (norm weight and bias, RoPE's cos/sin table): "input" (x's
# dtype) or "float32" (fp32 parameters with half-precision activations)
PARAM_DTYPES = ("input", "float32")


def param_dtype_attr(param: torch.dtype, x: torch.dtype) -> str:
    """The attribute for parameters in ``param`` with inputs in ``x``: "float32" only where they differ."""
    return "float32" if param == torch.float32 and x != torch.float32 else "input"


def param_dtype(attr: str, x: torch.dtype) -> torch.dtype:
    """The parameters' dtype from the attribute (:data:`PARAM_DTYPES`) and the inputs' dtype ``x``."""
    return torch.float32 if attr == "float32" else x


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
