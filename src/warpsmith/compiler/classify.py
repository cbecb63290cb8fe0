"""Classification of one ATen call into an IR node (:mod:`.ir`): which kind it is, its canonical
op name and its attributes.

- ``pointwise``: elementwise ops (:data:`UNARY`, :data:`BINARY`) with attributes such as
  ``alpha``, ``slope`` or ``min``/``max``; **generators** (``full``: a constant of a shape;
  ``iota``: ``start + sum_d coef[d] * index[d]``, what ``arange`` and its views are) have no tensor
  operand; ``flip`` and ``cat`` read their operands at transformed indices.
- ``reduction``: ``sum``, ``mean``, ``amax``, ``amin``, ``prod``, ``var``, ``logsumexp``,
  ``argmax``, ``argmin`` over any set of dims (``attrs["dims"]``, sorted, all dims for a full
  reduction) with ``keepdim``; :mod:`.expand` rewrites the composite ones (var, logsumexp,
  argmax/argmin) into the five basic ones before fusion.
- ``scan``: ``cumsum``, ``cumprod`` along ``attrs["dim"]`` (``reverse`` walks from the end).
- ``view``: layout only; ``aten`` otherwise (lowering may turn it into a ``library`` node).

Tensor dtypes: float16, bfloat16 and float32 are computed in fp32; bool, int32 and int64 are
carried too (masks, indices, ``arange``); anything else (float64, complex) stays ATen.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import torch

# pointwise: ATen packet name -> canonical op
UNARY = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log", "sqrt": "sqrt",
         "rsqrt": "rsqrt", "reciprocal": "reciprocal", "abs": "abs", "neg": "neg", "erf": "erf", "sin": "sin",
         "cos": "cos", "silu": "silu", "gelu": "gelu", "log1p": "log1p", "expm1": "expm1",
         "leaky_relu": "leaky_relu", "hardtanh": "clamp", "clamp": "clamp", "clamp_min": "clamp",
         "clamp_max": "clamp", "softplus": "softplus", "elu": "elu", "hardsigmoid": "hardsigmoid",
         "hardswish": "hardswish", "mish": "mish", "sign": "sign", "square": "square",
         "_to_copy": "cast", "to": "cast", "type_as": "cast", "pow": "pow", "logical_not": "not",
         "bitwise_not": "not", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite", "floor": "floor",
         "ceil": "ceil", "trunc": "trunc", "round": "round", "exp2": "exp2", "log2": "log2", "log10": "log10",
         "selu": "selu", "celu": "celu", "relu6": "relu6", "logsigmoid": "logsigmoid", "tan": "tan",
         "signbit": "signbit", "positive": "identity", "frac": "frac", "sgn": "sign"}
BINARY = {"add": "add", "sub": "sub", "rsub": "rsub", "mul": "mul", "div": "div", "maximum": "maximum",
          "minimum": "minimum", "gt": "gt", "lt": "lt", "ge": "ge", "le": "le", "eq": "eq", "ne": "ne",
          "where": "where", "logical_and": "and", "logical_or": "or", "logical_xor": "xor", "bitwise_and": "and",
          "bitwise_or": "or", "bitwise_xor": "xor", "fmax": "fmax", "fmin": "fmin", "true_divide": "div",
          "masked_fill": "masked_fill", "fmod": "fmod", "remainder": "remainder", "floor_divide": "floor_divide",
          "copysign": "copysign", "lerp": "lerp", "addcmul": "addcmul", "addcdiv": "addcdiv",
          "threshold": "threshold", "xlogy": "xlogy", "hypot": "hypot", "atan2": "atan2"}
REDUCTIONS = {"sum": "sum", "mean": "mean", "amax": "amax", "amin": "amin", "var": "var", "logsumexp": "logsumexp",
              "prod": "prod", "argmax": "argmax", "argmin": "argmin", "max": "amax", "min": "amin", "std": "std"}
SCANS = {"cumsum": "cumsum", "cumprod": "cumprod"}
GENERATORS = {"full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "scalar_tensor", "new_zeros",
              "new_ones", "new_full", "arange"}
VIEWS = {"view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "expand", "permute", "transpose", "t",
         "contiguous", "clone", "alias", "flatten", "select", "slice", "detach", "expand_as", "view_as", "unflatten",
         "numpy_T", "mT", "swapaxes", "movedim", "narrow", "unbind", "split", "split_with_sizes", "chunk",
         "as_strided", "diagonal", "lift_fresh_copy"}
POW_EXPONENTS = (0, 0.5, -0.5, 1.5, -1.5) + tuple(range(-8, 9))  # the exponents codegen writes exactly
FLOATS = (torch.float16, torch.bfloat16, torch.float32)
INTS = (torch.int32, torch.int64)
CARRIED = FLOATS + INTS + (torch.bool,)  # the dtypes generated kernels compute with


def classify(base: Any, packet: str, overload: str) -> Any:
    """Turn the ``aten`` node ``base`` (packet/overload of its ATen target) into its IR kind, in place
    where one applies; return it."""
    args, kwargs, shape, dtype = base.args, base.kwargs, base.shape, base.dtype
    if packet in VIEWS:
        base.kind = "view"
        return base
    if shape is None or dtype not in CARRIED:
        return base
    if packet in GENERATORS:
        return _generator(base, packet, overload)
    if packet in REDUCTIONS and (packet not in ("max", "min") or overload == "default"):
        return _reduction(base, packet, overload)
    if packet in SCANS:
        return _scan(base, packet)
    if packet == "flip":
        return _flip(base)
    if packet == "cat":
        return _cat(base)
    if packet in ("max", "min") and overload == "other":
        packet = "maximum" if packet == "max" else "minimum"
    if packet in UNARY or packet in BINARY:
        return _pointwise(base, packet, overload, args, dict(kwargs))
    return base


def _is_tensor(a: Any) -> bool:
    from .ir import Node

    return isinstance(a, Node)


def _ok_operand(a: Any) -> bool:
    return not _is_tensor(a) or (a.shape is not None and a.dtype in CARRIED)


# ---- generators -----------------------------------------------------------------------------------
def _generator(base: Any, packet: str, overload: str) -> Any:
    a = base.args
    if packet == "arange":
        nums = [x for x in a if isinstance(x, (int, float)) and not isinstance(x, bool)]
        if overload == "default":
            start, step = 0, 1
        elif overload == "start":
            start, step = nums[0], 1
        elif overload == "start_step":
            start, step = nums[0], nums[2] if len(nums) > 2 else 1
        else:
            return base
        if len(base.shape) != 1 or any(_is_tensor(x) for x in a):
            return base
        return _set(base, "pointwise", "iota", [], start=start, coef=(step,))
    if packet in ("zeros", "zeros_like", "new_zeros"):
        value: Any = 0
    elif packet in ("ones", "ones_like", "new_ones"):
        value = 1
    elif packet == "scalar_tensor":
        value = a[0] if a else None
    elif packet in ("full", "new_full"):
        value = a[1] if len(a) > 1 else base.kwargs.get("fill_value")
    elif packet == "full_like":
        value = a[1] if len(a) > 1 else base.kwargs.get("fill_value")
    else:
        return base
    if not isinstance(value, (int, float, bool)):
        return base
    return _set(base, "pointwise", "full", [], value=value)


def _set(base: Any, kind: str, op: str, args: list, **attrs: Any) -> Any:
    base.kind, base.op, base.args, base.kwargs, base.attrs = kind, op, args, {}, attrs
    return base


# ---- reductions and scans ---------------------------------------------------------------------------
def norm_dims(dims: Any, rank: int) -> tuple[int, ...] | None:
    """Sorted non-negative dims; every dim for None or []; None when not a dim list."""
    if dims is None or dims == [] or dims == ():
        return tuple(range(rank))
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims = [dims]
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) for d in dims):
        return None
    if rank == 0:
        return () if all(d in (0, -1) for d in dims) else None
    out = sorted({d % rank for d in dims})
    return tuple(out)


def _reduction(base: Any, packet: str, overload: str) -> Any:
    args, kwargs = base.args, base.kwargs
    x = args[0] if args else None
    if not _is_tensor(x) or x.shape is None or x.dtype not in CARRIED:
        return base
    rank = len(x.shape)
    attrs: dict[str, Any] = {}
    if packet in ("var", "std"):
        if overload == "dim":  # var(x, dim, unbiased=True, keepdim=False)
            dims = args[1] if len(args) > 1 else kwargs.get("dim")
            unbiased = args[2] if len(args) > 2 else kwargs.get("unbiased", True)
            keep = args[3] if len(args) > 3 else kwargs.get("keepdim", False)
            corr: Any = 1 if unbiased else 0
        elif overload == "correction":  # var(x, dim=None, *, correction=None, keepdim=False)
            dims = args[1] if len(args) > 1 else kwargs.get("dim")
            keep = kwargs.get("keepdim", False)
            corr = kwargs.get("correction", 1)
        elif overload == "default":  # var(x, unbiased=True)
            dims, keep = None, False
            corr = 1 if (args[1] if len(args) > 1 else kwargs.get("unbiased", True)) else 0
        else:
            return base
        if isinstance(corr, bool) or (corr is not None and not isinstance(corr, (int, float))):
            return base
        attrs["correction"] = 1 if corr is None else corr
    elif packet in ("argmax", "argmin"):
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        attrs["flat"] = dims is None
    elif overload == "default" and packet in ("sum", "mean", "prod", "max", "min"):
        dims, keep = None, False
        if len(args) > 1 or set(kwargs) - {"dtype"}:
            return base
    else:
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        if len(args) > 3 or set(kwargs) - {"dtype", "dim", "keepdim"}:
            return base
    nd = norm_dims(dims, rank)
    if nd is None or not isinstance(keep, bool) or base.dtype not in CARRIED:
        return base
    op = REDUCTIONS[packet]
    if op in ("mean", "var", "std", "logsumexp") and base.dtype not in FLOATS:
        return base
    if packet in ("argmax", "argmin") and len(nd) > 1 and not attrs["flat"]:
        return base
    return _set(base, "reduction", op, [x], dims=nd, keepdim=keep, **attrs)


def _scan(base: Any, packet: str) -> Any:
    args, kwargs = base.args, base.kwargs
    x = args[0] if args else None
    if not _is_tensor(x) or x.shape is None or x.dtype not in CARRIED or len(args) > 2 or set(kwargs) - {"dim", "dtype"}:
        return base
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    rank = max(len(x.shape), 1)
    if not isinstance(dim, int) or x.shape == ():
        return base
    return _set(base, "scan", SCANS[packet], [x], dim=dim % rank, reverse=False)


def _flip(base: Any) -> Any:
    x = base.args[0]
    dims = norm_dims(base.args[1] if len(base.args) > 1 else base.kwargs.get("dims"), len(base.shape))
    if not _is_tensor(x) or not _ok_operand(x) or not dims or x.shape != base.shape:
        return base
    return _set(base, "pointwise", "flip", [x], dims=dims)


def _cat(base: Any) -> Any:
    parts = base.args[0]
    dim = base.args[1] if len(base.args) > 1 else base.kwargs.get("dim", 0)
    if not isinstance(parts, (list, tuple)) or not parts or not all(_is_tensor(p) and _ok_operand(p) for p in parts):
        return base
    rank = len(base.shape)
    if not isinstance(dim, int) or rank == 0:
        return base
    d = dim % rank
    pieces = [p for p in parts if p.shape != (0,)]  # torch.cat skips 1-D empty tensors
    if any(len(p.shape) != rank or p.shape[:d] + p.shape[d + 1:] != base.shape[:d] + base.shape[d + 1:] for p in pieces):
        return base
    return _set(base, "pointwise", "cat", list(pieces), dim=d, sizes=tuple(p.shape[d] for p in pieces))


# ---- pointwise ----------------------------------------------------------------------------------------
def _arg(args: list, kwargs: dict, i: int, name: str, default: Any) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.pop(name, default)


def _pointwise(base: Any, packet: str, overload: str, args: list, kwargs: dict) -> Any:
    op = UNARY.get(packet) or BINARY[packet]
    attrs: dict[str, Any] = {}
    operands = list(args)
    if not all(_ok_operand(a) for a in operands):
        return base
    n_ops = 1
    if op in ("add", "sub", "rsub"):
        attrs["alpha"] = _arg(args, kwargs, 2, "alpha", 1)
        n_ops = 2
    elif op in ("div",):
        mode = kwargs.pop("rounding_mode", None)
        if mode not in (None, "trunc", "floor"):
            return base
        if mode is not None:
            op = "floor_divide" if mode == "floor" else "trunc_divide"
        n_ops = 2
    elif op == "gelu":
        attrs["approximate"] = _arg(args, kwargs, 1, "approximate", "none")
    elif op == "leaky_relu":
        attrs["slope"] = _arg(args, kwargs, 1, "negative_slope", 0.01)
    elif op == "clamp":
        lo = hi = None
        if packet == "hardtanh":
            lo, hi = _arg(args, kwargs, 1, "min_val", -1.0), _arg(args, kwargs, 2, "max_val", 1.0)
        elif packet == "clamp_min":
            lo = _arg(args, kwargs, 1, "min", None)
        elif packet == "clamp_max":
            hi = _arg(args, kwargs, 1, "max", None)
        else:
            lo, hi = _arg(args, kwargs, 1, "min", None), _arg(args, kwargs, 2, "max", None)
        if _is_tensor(lo) or _is_tensor(hi):  # clamp by tensors: max then min
            return _clamp_tensors(base, args[0], lo, hi)
        attrs = {"min": lo, "max": hi}
    elif op == "softplus":
        attrs = {"beta": _arg(args, kwargs, 1, "beta", 1.0), "threshold": _arg(args, kwargs, 2, "threshold", 20.0)}
    elif op == "elu":
        attrs = {"alpha": _arg(args, kwargs, 1, "alpha", 1.0), "scale": _arg(args, kwargs, 2, "scale", 1.0),
                 "input_scale": _arg(args, kwargs, 3, "input_scale", 1.0)}
    elif op == "selu":
        op, attrs = "elu", {"alpha": 1.6732632423543772848170429916717, "scale": 1.0507009873554804934193349852946,
                            "input_scale": 1.0}
    elif op == "celu":
        alpha = _arg(args, kwargs, 1, "alpha", 1.0)
        if not isinstance(alpha, (int, float)) or alpha == 0:
            return base
        op, attrs = "elu", {"alpha": alpha, "scale": 1.0, "input_scale": 1.0 / alpha}
    elif op == "threshold":  # threshold(x, threshold, value): x if x > threshold else value
        attrs = {"threshold": _arg(args, kwargs, 1, "threshold", None), "value": _arg(args, kwargs, 2, "value", None)}
    elif op == "pow":
        if overload == "Scalar":  # pow(scalar, tensor)
            if not isinstance(args[0], (int, float)) or not _is_tensor(args[1]) or args[0] <= 0:
                return base
            op, attrs, operands = "exp_base", {"base": float(args[0])}, [args[1]]
        elif overload != "Tensor_Scalar" or not isinstance(args[1], (int, float)):
            return base
        elif args[1] in POW_EXPONENTS:
            attrs = {"exponent": args[1]}
        else:
            op, attrs = "pow_general", {"exponent": float(args[1])}
    elif op == "round":
        if _arg(args, kwargs, 1, "decimals", 0) != 0:
            return base
    elif op == "cast":
        if packet == "to" and overload not in ("dtype",):
            return base
        kwargs = {k: v for k, v in kwargs.items() if k not in ("dtype", "non_blocking", "copy", "memory_format",
                                                             "layout", "device", "pin_memory")}
        if kwargs:
            return base
        operands = operands[:1]
    elif op in ("where", "lerp", "addcmul", "addcdiv"):
        n_ops = 3
        if op in ("addcmul", "addcdiv"):
            attrs["value"] = kwargs.pop("value", args[3] if len(args) > 3 else 1)
    elif op == "masked_fill":
        n_ops = 3
    elif op in BINARY.values():
        n_ops = 2
    if op not in ("cast",):
        operands = operands[:n_ops]
    if kwargs and op != "cast":
        return base
    if any(not (_is_tensor(a) or isinstance(a, (int, float, bool))) for a in operands):
        return base
    if any(isinstance(v, float) and math.isnan(v) and k in ("min", "max") for k, v in attrs.items()):
        return base
    return _set(base, "pointwise", op, operands, **attrs)


def _clamp_tensors(base: Any, x: Any, lo: Any, hi: Any) -> Any:
    """clamp(x, min=t1, max=t2) with tensor bounds: one ``clamp_t`` node, operands (x, lo, hi) with
    None where a bound is absent (written as maximum then minimum, NaN-propagating as torch)."""
    if not _is_tensor(x):
        return base
    return _set(base, "pointwise", "clamp_t", [x, lo if lo is not None else float("-inf"),
                                                hi if hi is not None else float("inf")])


def packet_of(target: Any) -> tuple[str, str]:
    """(packet name, overload name) of an op target. An op of another namespace than ``aten`` (a
    custom op, ``warpsmith::rms_norm``) is named with its namespace, ``"warpsmith::rms_norm"``: its
    arguments are its own, and a rule written for the ATen op of the same name must not match it."""
    if target is operator.getitem:
        return "getitem", ""
    packet = getattr(target, "_opname", None) or getattr(getattr(target, "overloadpacket", None), "__name__",
                                                         str(target))
    namespace = getattr(target, "namespace", None)
    if isinstance(namespace, str) and namespace not in ("aten", "prims"):
        packet = f"{namespace}::{packet}"
    return packet, getattr(target, "_overloadname", "")

