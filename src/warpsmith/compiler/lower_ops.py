"""Lowering of pooling, cross-entropy and attention to the library's kernels (``ops/pool``,
``ops/cross_entropy``, ``ops/attention``).

- ``max_pool1d/2d/3d`` (values only; the indices of ``return_indices`` stay ATen) and
  ``avg_pool1d/2d/3d`` with torch's kernel/stride/padding/dilation/``ceil_mode``/
  ``count_include_pad``/``divisor_override`` become one ``library pool`` launch;
- ``cross_entropy_loss`` of 2-D logits against class indices (no class weights) becomes the
  library's row kernel plus its fixed-order reduction (``mean`` over non-ignored rows, ``sum`` or
  ``none``), with ``ignore_index`` and ``label_smoothing``;
- ``scaled_dot_product_attention`` with no mask and no dropout (``is_causal`` top-left as SDPA's,
  ``scale``, GQA) becomes the library's flash-attention forward (with a mask: :mod:`.lower_attention`).
"""
from __future__ import annotations

import torch

from .ir import FLOATS, Graph, Node


def _ints(v: object, nd: int, default: int) -> list[int] | None:
    if v is None or v == []:
        return [default] * nd
    if isinstance(v, int) and not isinstance(v, bool):
        return [v] * nd
    if isinstance(v, (list, tuple)) and all(isinstance(i, int) for i in v):
        return list(v) * nd if len(v) == 1 else list(v) if len(v) == nd else None
    return None


def pool(g: Graph, n: Node) -> str | None:
    from .lower import _lib, _replace

    if n.kind != "aten" or n.op not in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d",
                                        "avg_pool3d") or n.kwargs:
        return None
    x = n.args[0]
    nd = int(n.op[-2])
    if not isinstance(x, Node) or x.dtype not in FLOATS or n.dtype != x.dtype or len(x.shape) != nd + 2:
        return None
    a = list(n.args) + [None] * 8
    kernel = _ints(a[1], nd, 1)
    stride = _ints(a[2], nd, 0)
    if kernel is None or stride is None:
        return None
    stride = [s or k for s, k in zip(stride, kernel)]
    padding = _ints(a[3] if a[3] is not None else 0, nd, 0)
    is_max = n.op.startswith("max")
    if is_max:
        dilation, ceil_mode, count_pad, divisor = _ints(a[4] if a[4] is not None else 1, nd, 1), bool(a[5]), True, 0
    else:
        dilation = [1] * nd
        ceil_mode = bool(a[4])
        count_pad = True if a[5] is None else bool(a[5])
        divisor = a[6] or 0
    if padding is None or dilation is None or not isinstance(divisor, int) or \
            any(p > k // 2 for p, k in zip(padding, kernel)):
        return None  # torch refuses padding over half the kernel; keep its error
    _replace(g, n, _lib(n, "pool", [x], nd=nd, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                        ceil_mode=ceil_mode, is_max=is_max, count_include_pad=count_pad, divisor=divisor))
    return f"{n.name}: {n.op} -> library pool"


def cross_entropy(g: Graph, n: Node) -> str | None:
    from .lower import _lib, _replace

    if n.kind != "aten" or n.op != "cross_entropy_loss" or n.kwargs:
        return None
    a = list(n.args) + [None] * 6
    x, t, weight = a[0], a[1], a[2]
    reduction = 1 if a[3] is None else a[3]
    ignore = -100 if a[4] is None else a[4]
    smoothing = 0.0 if a[5] is None else float(a[5])
    if not isinstance(x, Node) or not isinstance(t, Node) or weight is not None or x.dtype not in FLOATS or \
            len(x.shape) != 2 or t.shape != (x.shape[0],) or t.dtype not in (torch.int64, torch.int32) or \
            reduction not in (0, 1, 2) or not isinstance(ignore, int):
        return None
    _replace(g, n, _lib(n, "cross_entropy", [x, t], reduction=reduction, ignore_index=ignore, smoothing=smoothing))
    return f"{n.name}: cross_entropy_loss -> library cross_entropy"


def attention(g: Graph, n: Node) -> str | None:
    """``scaled_dot_product_attention`` without a mask or dropout (4-D q, k, v of one float dtype;
    GQA when q has a multiple of k's heads) -> the library's flash-attention forward."""
    from .lower import _lib, _replace

    if n.kind != "aten" or n.op != "scaled_dot_product_attention":
        return None
    names = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    a = dict(zip(names, list(n.args[3:]) + [None] * 5))
    a.update(n.kwargs)
    q, k, v = n.args[:3]
    if not all(isinstance(t, Node) and t.dtype in FLOATS and t.shape is not None and len(t.shape) == 4
               for t in (q, k, v)) or len({q.dtype, k.dtype, v.dtype}) != 1:
        return None
    if a["attn_mask"] is not None or (a["dropout_p"] or 0.0) != 0.0 or set(n.kwargs) - set(names):
        return None
    hq, hk = q.shape[1], k.shape[1]
    if k.shape[:3] != v.shape[:3] or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3] or \
            hq % hk or (hq != hk and not a["enable_gqa"]):
        return None
    scale = a["scale"]
    if scale is not None and not isinstance(scale, (int, float)):
        return None
    _replace(g, n, _lib(n, "attention", [q, k, v], causal=bool(a["is_causal"]),
                        scale=None if scale is None else float(scale)))
    return f"{n.name}: scaled_dot_product_attention -> library attention (flash forward)"
