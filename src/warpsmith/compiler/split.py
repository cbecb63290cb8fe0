"""Split reductions: a long reduction over few rows (``x.sum()``, a (4, 1_000_000) tensor summed over
dim 1) run as two kernels instead of one program per row.

A row kernel runs one program per row; with fewer rows than the GPU has SMs, most of it idles while
each program walks its whole row. Here such a reduction ``r = op(x, R)`` is rewritten into two:

- **partials**: the first reduced dim ``d`` of size ``s`` is viewed as ``(P, s / P)`` (``P`` divides
  ``s``; no view at all when ``P == s``) and ``op`` reduces every slice, the ``s / P`` part and the
  other reduced dims, into ``M * P`` float32 partials: a row kernel of ``M * P`` rows, as parallel as
  the GPU is wide. The view is sunk below the pointwise chain that computes ``x`` (:mod:`.views`),
  so that chain still fuses with the partials' reduction and nothing of ``x``'s size is stored;
- **combine**: ``op`` again over the ``P`` partials of each row, in index order (a row kernel of
  ``M`` rows; deterministic: same inputs, same bits).

``sum``, ``amax`` and ``amin`` combine as themselves (a NaN in a slice is a NaN partial, and
NaN-propagating ``amax`` keeps it); ``mean`` too, since every slice has ``s / P`` times the other
reduced dims' elements (the mean of equal-sized means is the mean). Float reductions only (integer
``sum`` and ``prod`` are left as written). The result differs from the one-pass reduction only in
the order of float32 additions (a reassociation: the check judges it), the partials are float32.

Taken only when the cost model (:func:`warpsmith.cost.program.program_ms`, greedy fusion) predicts it cheaper:
it prices a long row walked by too few programs by the share of SMs they occupy, against the
extra launch and the partials' bytes. Considered for rows of at least :data:`SPLIT_MIN` elements
and fewer rows than the target has SMs. Each site's record is one of the search's rewrites
(``split_reduction``); ``solve``'s last candidate is the program as written.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from .decisions import decided
from .fuse import fusable, partition
from .ir import Graph, Node, is_generator
from ..cost.program import program_ms
from .search import SPLIT_MIN
from .views import _sink_all

OPS = ("sum", "mean", "amax", "amin")
SLICE_MIN = 2048  # elements each partial reduces at least
F32 = torch.float32


def parts(m: int, s: int, n: int, sms: int) -> int:
    """How many slices ``P`` (a divisor of ``s``, the first reduced dim) a row of ``n`` elements is cut
    into, for ``m`` rows on ``sms`` SMs: the fewest giving two programs per SM, each slice at least
    :data:`SLICE_MIN` elements; 1 when no divisor fits."""
    want = max(2, math.ceil(2 * sms / max(m, 1)))
    fits = [p for p in range(2, min(s, n // SLICE_MIN) + 1) if s % p == 0]
    if not fits:
        return 1
    above = [p for p in fits if p >= want]
    return min(above) if above else max(fits)


def _combine(partial: Node, n: Node, d: int) -> list[Node]:
    """The second pass: ``n.op`` over the ``P`` partials of each row (dim ``d`` of ``partial``), in
    index order; the nodes to add, the last one the reduction's value."""
    shape = tuple(s for k, s in enumerate(partial.shape) if k != d)
    return [Node(f"{n.name}_combine", "reduction", n.op, [partial], shape, n.dtype, {"dims": (d,), "keepdim": False},
                 line=n.line)]


def eligible(n: Node, sms: int) -> int:
    """``P`` for reduction ``n`` (see :func:`parts`), or 0 when it is not one to split: not a float
    ``sum``/``mean``/``amax``/``amin`` a kernel runs, a row shorter than :data:`SPLIT_MIN`, as many
    rows as SMs, or no divisor of its first reduced dim that fits."""
    x = n.args[0] if n.args else None
    if n.kind != "reduction" or n.op not in OPS or not fusable(n) or not isinstance(x, Node) or is_generator(x) or \
            not x.dtype.is_floating_point or not n.dtype.is_floating_point:
        return 0
    dims = sorted(n.attrs["dims"])
    m = math.prod(s for k, s in enumerate(x.shape) if k not in dims)
    size = math.prod(x.shape[k] for k in dims)
    if size < SPLIT_MIN or m >= sms:
        return 0
    p = parts(m, x.shape[dims[0]], size, sms)
    return p if p > 1 else 0


def split(g: Graph, n: Node, sms: int) -> int:
    """Rewrite reduction ``n`` into partials and their combination (in place); ``P``, or 0 when it is
    not split (``g`` unchanged)."""
    from .lower import _replace

    p = eligible(n, sms)
    if not p:
        return 0
    x = n.args[0]
    dims = sorted(n.attrs["dims"])
    d = dims[0]
    s = x.shape[d]
    new: list[Node] = []
    src = x
    if p != s:  # dim d viewed as (P, s / P)
        shape = x.shape[:d] + (p, s // p) + x.shape[d + 1:]
        src = Node(f"{n.name}_slices", "view", "view", [x, list(shape)], shape, x.dtype,
                   target=torch.ops.aten.view.default, line=n.line)
        new.append(src)
        inner = (d + 1,) + tuple(k + 1 for k in dims[1:])
    else:
        inner = tuple(dims[1:])
    pshape = tuple(sz for k, sz in enumerate(src.shape) if k not in inner)
    partial = Node(f"{n.name}_partial", "reduction", n.op, [src], pshape, F32, {"dims": inner, "keepdim": False},
                   line=n.line)
    new.append(partial)
    new += _combine(partial, n, d)
    final = new[-1]
    last = final
    if tuple(final.shape) != tuple(n.shape):  # keepdim over several dims: the reduced dims as 1
        last = Node(f"{n.name}_kept", "view", "view", [final, list(n.shape)], tuple(n.shape), n.dtype,
                    target=torch.ops.aten.view.default, line=n.line)
        new.append(last)
    i = g.nodes.index(n)
    g.nodes[i:i] = new[:-1]
    name = n.name
    _replace(g, n, last)
    last.name = name
    if src is not x:
        _sink_all(g, src)
    return p


def split_reductions(g: Graph, target: Any) -> list[dict[str, Any]]:
    """Split each long reduction over few rows when predicted cheaper; one record per site considered."""
    records: list[dict[str, Any]] = []
    current = None  # the program's predicted time as it stands
    for n in list(g.nodes):
        if n not in g.nodes or not eligible(n, target.sms):
            continue
        snap = g.snapshot()
        before = current = program_ms(g, partition(g), target) if current is None else current
        name, shape = n.name, list(n.args[0].shape) if isinstance(n.args[0], Node) else []
        p = split(g, n, target.sms)
        if not p:
            continue
        g.remove_dead()
        after = program_ms(g, partition(g), target)
        taken = decided("split_reduction", name, after < before)
        if taken:
            current = after
        else:
            g.restore(snap)
        records.append({"rewrite": "split_reduction", "at": name, "reduction": n.op, "shapes": [shape], "parts": p,
                        "before_ms": before, "after_ms": after, "taken": taken})
    return records
