"""Lowering of masked attention to the library's flash-attention forward (``ops/attention``).

Recognized: ``aten.scaled_dot_product_attention`` with an ``attn_mask``, and the forms the
torch.compile capture (AOTAutograd) leaves: ``_scaled_dot_product_flash_attention_for_cpu``
(``attn_mask``), ``_scaled_dot_product_efficient_attention`` and ``_scaled_dot_product_cudnn_attention``
(``attn_bias``) and ``_scaled_dot_product_flash_attention`` (no mask), whose only use is their output
(``getitem 0``; a use of the logsumexp keeps the op ATen). No dropout; q (B, Hq, L, E), k (B, Hk, S, E),
v (B, Hk, S, Ev) of one float dtype, ``Hq % Hk == 0`` (GQA: with ``enable_gqa``, or as the capture
passes it).

The mask (boolean: True = visible; or additive, in q's dtype; broadcastable to (B, Hq, L, S)):

- **a band** becomes the kernel's window arguments and no mask tensor is read. The mask is a band
  when it is a compile-time constant (it depends on no input or parameter: built in ``forward`` from
  ``arange``/``ones``/``tril``/comparisons, which this module evaluates on the CPU once) whose
  visible set, the same for every batch and head, is exactly ``{(i, j): lo <= j - i <= hi}``
  (causal: ``hi = 0``; a sliding window of w keys: ``lo = -(w - 1)``); an additive band holds only
  0 (visible) and -inf. ``lo``/``hi`` are then the kernel's ``win_lo = -lo`` and ``win_hi = hi`` with
  top-left alignment (SDPA's), each turned off when the band does not cut that side.
- **any other mask** is an additive bias tile the kernel reads (``HAS_BIAS``: added to the scaled
  scores; a boolean mask first becomes ``where(mask, 0, -inf)`` in q's dtype, one generated kernel,
  as SDPA converts it).

A mask held in a parameter or buffer is not a compile-time value here (the graph carries no values):
it is read as a bias.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import torch

from .ir import FLOATS, Graph, Node

FORMS = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
         "_scaled_dot_product_flash_attention"}
MAX_CONST = 1 << 22  # a constant mask of more elements is not evaluated (read as a bias)


class _NotConstant(Exception):
    pass


def _bind(n: Node) -> dict[str, Any] | None:
    """The call's arguments by schema name (defaults filled in)."""
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return None
    out: dict[str, Any] = {}
    for i, a in enumerate(schema.arguments):
        if i < len(n.args) and not a.kwarg_only:
            out[a.name] = n.args[i]
        elif a.name in n.kwargs:
            out[a.name] = n.kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
        else:
            return None
    return out


# ---- compile-time evaluation of a mask built from indices ----------------------------------------------
_CANON = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
          "le": torch.le, "gt": torch.gt, "ge": torch.ge, "and": torch.logical_and, "or": torch.logical_or,
          "not": torch.logical_not, "neg": torch.neg, "abs": torch.abs, "where": torch.where}


def _value(a: Any, memo: dict[str, torch.Tensor]) -> Any:
    if isinstance(a, Node):
        return evaluate(a, memo)
    if isinstance(a, (list, tuple)):
        return type(a)(_value(x, memo) for x in a)
    if isinstance(a, torch.device):
        return torch.device("cpu")
    return a


def evaluate(n: Node, memo: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """The value of ``n`` when it depends on no input or parameter (CPU tensor), else raises."""
    memo = {} if memo is None else memo
    key = f"{id(n)}"
    if key in memo:
        return memo[key]
    if n.kind in ("input", "param", "library") or n.shape is None or math.prod(n.shape) > MAX_CONST:
        raise _NotConstant(n.name)
    if n.kind == "pointwise" and n.op == "full":
        out = torch.full(n.shape, n.attrs["value"], dtype=n.dtype)
    elif n.kind == "pointwise" and n.op == "iota":
        out = torch.full(n.shape, n.attrs["start"], dtype=torch.int64)
        for d, c in enumerate(n.attrs["coef"]):
            shape = [1] * len(n.shape)
            shape[d] = n.shape[d]
            out = out + c * torch.arange(n.shape[d]).view(shape)
        out = out.to(n.dtype)
    elif n.target is operator.getitem:
        out = _value(n.args[0], memo)[n.args[1]]
    elif n.target is not None and hasattr(n.target, "_schema"):
        args = _value(list(n.aten_args or []), memo)
        kwargs = {k: _value(v, memo) for k, v in (n.aten_kwargs or {}).items()}
        if "device" in kwargs:
            kwargs["device"] = torch.device("cpu")
        out = n.target(*args, **kwargs)
    elif n.kind == "pointwise" and n.op in _CANON:
        out = _CANON[n.op](*_value(list(n.args), memo))
        if n.op in ("add", "sub") and n.attrs.get("alpha", 1) != 1:
            raise _NotConstant(n.name)
        out = torch.as_tensor(out).to(n.dtype)
    elif n.kind == "pointwise" and n.op in ("cast", "identity"):
        out = _value(n.args[0], memo).to(n.dtype)
    else:
        raise _NotConstant(n.name)
    if not isinstance(out, torch.Tensor):
        raise _NotConstant(n.name)
    memo[key] = out
    return out


def constant_band(n: Node, full: tuple[int, int, int, int]) -> tuple[int, int] | None:
    """:func:`band` of the mask ``n`` when it is a compile-time constant (:func:`evaluate`, run outside any
    fake mode: AOTAutograd calls compilers under one), else None."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        try:
            value = evaluate(n)
        except _NotConstant:
            return None
        except Exception:  # noqa: BLE001 - an op that cannot run on the CPU: the mask is read as a bias
            return None
        return band(value, full)


def band(mask: torch.Tensor, full: tuple[int, int, int, int]) -> tuple[int, int] | None:
    """(lo, hi) when the visible set of ``mask`` (bool, or additive 0 / -inf) broadcast to ``full``
    is, for every batch and head, exactly ``lo <= j - i <= hi``; else None."""
    if mask.dtype == torch.bool:
        vis = mask
    elif mask.is_floating_point():
        if not bool(((mask == 0) | (mask == float("-inf"))).all()):
            return None
        vis = mask == 0
    else:
        return None
    try:
        vis = vis.expand(full)
    except RuntimeError:
        return None
    first = vis[0, 0]
    if not bool((vis == first).all()):
        return None
    L, S = first.shape
    d = torch.arange(S).view(1, S) - torch.arange(L).view(L, 1)
    if not bool(first.any()):
        return None
    lo, hi = int(d[first].min()), int(d[first].max())
    if not torch.equal(first, (d >= lo) & (d <= hi)):
        return None
    return lo, hi


# ---- the rule --------------------------------------------------------------------------------------------
def masked_attention(g: Graph, n: Node) -> str | None:
    from .expand import _Builder
    from .lower import _redirect
    from .lower_norm import place_tuple

    if n.kind != "aten" or n.op not in FORMS:
        return None
    a = _bind(n)
    if a is None:
        return None
    mask = a.get("attn_mask", a.get("attn_bias"))
    whole = n.op == "scaled_dot_product_attention"
    if whole and mask is None:
        return None  # lower_ops.attention takes it
    q, k, v = a["query"], a["key"], a["value"]
    if not all(isinstance(t, Node) and t.dtype in FLOATS and t.shape is not None and len(t.shape) == 4
               for t in (q, k, v)) or len({q.dtype, k.dtype, v.dtype}) != 1:
        return None
    if (a.get("dropout_p") or 0.0) != 0.0 or a.get("return_debug_mask"):
        return None
    causal = bool(a.get("is_causal"))
    if mask is not None and (causal or not isinstance(mask, Node) or mask.shape is None or len(mask.shape) > 4 or
                             mask.dtype not in (torch.bool, q.dtype)):
        return None  # torch refuses a mask with is_causal
    B, hq, L, E = q.shape
    hk, S = k.shape[1], k.shape[2]
    if k.shape[0] != B or v.shape[0] != B or v.shape[1:3] != k.shape[1:3] or k.shape[3] != E or hq % hk or \
            (whole and hq != hk and not a.get("enable_gqa")):
        return None
    full = (B, hq, L, S)
    if mask is not None:
        try:
            torch.broadcast_shapes(tuple(mask.shape), full)
        except RuntimeError:
            return None
    scale = a.get("scale")
    if scale is not None and not isinstance(scale, (int, float)):
        return None
    users = g.users()[n.name]
    if not whole and (n in g.outputs or any(u.target is not operator.getitem or u.args[1] != 0 for u in users)):
        return None
    b = _Builder(g, n)
    attrs: dict[str, Any] = dict(causal=causal, scale=None if scale is None else float(scale))
    bias = None
    what = "no mask"
    if mask is not None:
        lohi = constant_band(mask, full)
        if lohi is not None:
            lo, hi = lohi
            attrs["window"] = (-lo if lo > -(L - 1) else None, hi if hi < S - 1 else None)
            what = f"a constant band mask (keys i{lo:+d} .. i{hi:+d}) -> window arguments, no mask read"
        elif mask.dtype == torch.bool:
            bias = b.pw("where", [mask, 0.0, float("-inf")], mask.shape, q.dtype)
            what = "a boolean mask -> additive bias where(mask, 0, -inf) read by the kernel"
        else:
            bias = mask
            what = "an additive mask -> bias read by the kernel"
    out = Node(n.name, "library", "attention", [q, k, v] + ([bias] if bias is not None else []),
               tuple(q.shape[:3]) + (v.shape[3],), q.dtype, attrs, line=n.line)
    if whole:
        i = g.nodes.index(n)
        g.nodes[i:i + 1] = b.new + [out]
        _redirect(g, n, out)
        g.outputs = [out if o is n else o for o in g.outputs]
    else:
        place_tuple(g, b.new + [out], n, users, {0: out})
    return f"{n.name}: {n.op} with {what} -> library attention (flash forward)"
