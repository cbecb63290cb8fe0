"""Lowering of ``aten.topk`` and ``aten.sort`` (MoE routers) to the top-k row kernel
(``ops/topk/kernel.py``): one program per row, the row in registers, k selection passes.

- ``topk(x, k, dim=-1, largest, sorted)`` over the last dim of a float tensor, rows of at most
  ``MAX_ROW`` elements and ``k <= MAX_K`` (``sorted=False`` gets them sorted, which it allows);
- ``sort(x, dim=-1, descending)`` and ``sort.stable`` over the last dim, rows of at most ``MAX_SORT``
  (a sort is a top-k of the whole row: O(N^2) work, for short rows only).

The result is the pair (values, indices), as ATen's; its ``getitem`` users stay. Ties go to the
lowest index first (a stable sort's order; torch's ``topk`` leaves it unspecified: see the kernel).
"""
from __future__ import annotations

import torch

from .ir import FLOATS, Graph, Node
from .lower_attention import _bind

MAX_ROW = 8192
MAX_K = 64
MAX_SORT = 1024


def topk_sort(g: Graph, n: Node) -> str | None:
    from .lower import _replace

    if n.kind != "aten" or n.op not in ("topk", "sort"):
        return None
    a = _bind(n)
    x = a.get("self") if a else None
    if not isinstance(x, Node) or x.dtype not in FLOATS or x.shape is None or len(x.shape) == 0:
        return None
    N = x.shape[-1]
    dim = a.get("dim", -1)
    if not isinstance(dim, int) or dim % len(x.shape) != len(x.shape) - 1 or N == 0 or N > MAX_ROW:
        return None
    if n.op == "topk":
        k, largest = a["k"], a.get("largest", True)
        if not isinstance(k, int) or not 0 < k <= min(MAX_K, N) or not isinstance(largest, bool):
            return None
        what = f"topk (k={k}, {'largest' if largest else 'smallest'})"
    else:
        k, largest = N, bool(a.get("descending", False))
        if N > MAX_SORT:
            return None
        what = f"sort ({'descending' if largest else 'ascending'}, stable)"
    users = g.users()[n.name]
    if n in g.outputs or any(u.kind != "view" or u.op != "getitem" for u in users):
        return None
    lib = Node(n.name, "library", "topk", [x], None, None, {"k": k, "largest": largest}, line=n.line)
    _replace(g, n, lib)
    return f"{n.name}: {what} over rows of {N} -> library topk (selection kernel)"
