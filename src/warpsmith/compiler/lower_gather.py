"""Lowering of gathers and scatters to the library's ``ops/gather`` kernels, and their launchers as
text for an emitted program.

Library nodes made here (``library gather`` / ``library scatter``):

- ``aten.embedding`` (any ``padding_idx``: the forward ignores it), ``aten.index_select`` along any
  dim, ``aten.index.Tensor`` with one integer index tensor on dim 0 (``x[idx]``; negative indices
  wrap as torch's) -> a row gather;
- ``aten.gather`` along any dim -> an element gather;
- ``aten.embedding_dense_backward`` (no ``scale_grad_by_freq``; ``padding_idx``'s rows skipped) and
  ``aten.index_add`` (alpha 1) -> a row scatter-add (fp32 atomics, see ``ops/gather/variant.py``);
- ``aten.scatter_add``, ``aten.scatter`` (``src`` tensor or scalar ``value``, no ``reduce``) -> an
  element scatter.

``aten.nll_loss_forward`` / ``nll_loss_backward`` (with or without class weights, any
``ignore_index``) are not matched here: torch's decompositions of them are a ``gather`` (the picked
log-probability and the class weight), ``scatter.value`` (the backward's one-hot) and pointwise ops and
sums, so :mod:`.decompose` replaces them once these rules lower the gathers and scatters.

**Index values are validated before every launch** in the emitted program (``_ws_check_index``): a
value outside ``[0, n)`` raises ``IndexError`` naming the op, the index tensor, the value and the range,
before any kernel runs, so no kernel reads or writes out of bounds (the launch contracts assume that
range: ``ops/gather/contract.py``). The check is a host sync on a GPU; ``WARPSMITH_CHECK_INDICES=0`` in
the environment of the emitted program skips it, for indices known valid.
"""
from __future__ import annotations

from typing import Any

import torch

from .ir import FLOATS, Graph, Node

INTS = (torch.int64, torch.int32)
OPS = ("gather", "scatter")


def _idx(t: Any) -> bool:
    return isinstance(t, Node) and t.dtype in INTS and t.shape is not None


def _float(t: Any) -> bool:
    return isinstance(t, Node) and t.dtype in FLOATS and t.shape is not None


def _dim(d: Any, rank: int) -> int | None:
    if not isinstance(d, int) or isinstance(d, bool) or not -max(rank, 1) <= d < max(rank, 1):
        return None
    return d % max(rank, 1)


def gather(g: Graph, n: Node) -> str | None:
    """embedding, index_select, index.Tensor (one index on dim 0), gather -> ``library gather``."""
    from .lower import _lib, _replace

    if n.kind != "aten" or n.op not in ("embedding", "index_select", "index", "gather"):
        return None
    a = list(n.args) + [None] * 4
    if n.op == "embedding":
        w, idx = a[0], a[1]
        if not _float(w) or not _idx(idx) or len(w.shape) != 2 or n.kwargs and set(n.kwargs) - {"padding_idx"}:
            return None
        node = _lib(n, "gather", [w, idx], dim=0, rows=True, wrap=False, what="embedding")
    elif n.op == "index_select":
        x, d, idx = a[0], a[1], a[2]
        if not _float(x) or not _idx(idx) or len(idx.shape) > 1 or _dim(d, len(x.shape)) is None or n.kwargs:
            return None
        node = _lib(n, "gather", [x, idx], dim=_dim(d, len(x.shape)), rows=True, wrap=False, what="index_select")
    elif n.op == "index":
        x, ids = a[0], a[1]
        if not _float(x) or not isinstance(ids, (list, tuple)) or len(ids) != 1 or not _idx(ids[0]) or \
                not x.shape or n.kwargs:
            return None
        node = _lib(n, "gather", [x, ids[0]], dim=0, rows=True, wrap=True, what="index")
    else:
        x, d, idx = a[0], a[1], a[2]
        if not _float(x) or not _idx(idx) or idx.dtype != torch.int64 or a[3] or set(n.kwargs) - {"sparse_grad"}:
            return None
        dd = _dim(d, len(x.shape))
        if dd is None or len(idx.shape) != len(x.shape) or \
                any(i > s for k, (i, s) in enumerate(zip(idx.shape, x.shape)) if k != dd):
            return None
        node = _lib(n, "gather", [x, idx], dim=dd, rows=False, wrap=False, what="gather")
    if n.dtype != node.args[0].dtype:
        return None
    _replace(g, n, node)
    return f"{n.name}: {n.op} -> library gather ({'rows' if node.attrs['rows'] else 'elements'} along dim {node.attrs['dim']})"


def scatter(g: Graph, n: Node) -> str | None:
    """embedding_dense_backward, index_add, scatter_add, scatter -> ``library scatter``."""
    from .lower import _lib, _replace

    if n.kind != "aten" or n.op not in ("embedding_dense_backward", "index_add", "scatter_add", "scatter"):
        return None
    a = list(n.args) + [None] * 5
    if n.op == "embedding_dense_backward":
        grad, idx, num, pad, freq = a[:5]
        if not _float(grad) or not _idx(idx) or not isinstance(num, int) or not isinstance(pad, int) or freq or \
                n.kwargs or n.shape != (num, grad.shape[-1]):
            return None
        node = _lib(n, "scatter", [None, idx, grad], dim=0, rows=True, add=True, value=None, num=num,
                    skip=pad if pad >= 0 else None, what="embedding_dense_backward")
    else:
        x, d, idx, src = a[:4]
        alpha = n.kwargs.get("alpha", a[4] if n.op == "index_add" else None)
        if not _float(x) or not _idx(idx) or _dim(d, len(x.shape)) is None or set(n.kwargs) - {"alpha"}:
            return None
        dd = _dim(d, len(x.shape))
        rows = n.op == "index_add"
        value = None
        if isinstance(src, Node):
            if src.dtype != x.dtype:
                return None
        elif n.op == "scatter" and isinstance(src, (int, float)) and not isinstance(src, bool):
            value, src = float(src), None
        else:
            return None
        if rows:
            if alpha not in (None, 1) or len(idx.shape) > 1 or \
                    src.shape != x.shape[:dd] + (max(1, idx.shape[0] if idx.shape else 1),) + x.shape[dd + 1:]:
                return None
        elif n.op == "scatter" and len(a) > 5 and a[4] is not None:
            return None  # reduce=
        else:
            want = idx.shape
            if len(want) != len(x.shape) or any(i > s for k, (i, s) in enumerate(zip(want, x.shape)) if k != dd) or \
                    src is not None and src.shape != want:
                return None
            if len(want) > 3 and any(i != s for k, (i, s) in enumerate(zip(want, x.shape)) if k != dd):
                return None  # a smaller index over more than one dim on either side: its rows do not merge
        node = _lib(n, "scatter", [x, idx, src], dim=dd, rows=rows, add=n.op != "scatter", value=value,
                    num=x.shape[dd], skip=None, what=n.op)
    if n.dtype not in FLOATS:
        return None
    _replace(g, n, node)
    return f"{n.name}: {n.op} -> library scatter ({'add, fp32 atomics' if node.attrs['add'] else 'assignment'})"


LAUNCHER = '''
_WS_CHECK_INDICES = os.environ.get("WARPSMITH_CHECK_INDICES", "1") not in ("", "0")


def _ws_check_index(idx, n, what, name, skip=None, wrap=False):
    """Refuse index values outside [0, n) (or [-n, n) where they wrap) before any kernel runs."""
    if not _WS_CHECK_INDICES or idx.numel() == 0:
        return
    bad = (idx < (-n if wrap else 0)) | (idx >= n)
    if skip is not None:
        bad &= idx != skip
    if bool(bad.any()):
        raise IndexError(f"{what}: index tensor {name} holds {int(idx[bad].reshape(-1)[0])}, outside the range "
                         f"[{-n if wrap else 0}, {n}) (set WARPSMITH_CHECK_INDICES=0 only for indices known valid)")


def _ws_gather_tiles(j, b):
    bb = min(triton.next_power_of_2(b), 1024)
    bj = max(1, min(triton.next_power_of_2(j), 128, 1024 // bb))
    return bj, bb, 4 if bj * bb >= 512 else 1


def _ws_gather_3d(t, dim):
    a = 1
    for s in t.shape[:dim]:
        a *= s
    b = 1
    for s in t.shape[dim + 1:]:
        b *= s
    return a, b


def _ws_gather(x, idx, dim, rows, wrap, what, name):
    """out = x's entries at idx along dim: rows (idx a tensor of any shape, each entry a slice of x) or
    elements (torch.gather)."""
    v = x.shape[dim]
    _ws_check_index(idx, v, what, name, wrap=wrap)
    if wrap:
        idx = torch.where(idx < 0, idx + v, idx)
    if rows:
        flat = idx.reshape(-1)
        a, b = _ws_gather_3d(x, dim)
        j = flat.shape[0]
        idx3 = flat.view(1, j, 1).expand(a, j, b)
        shape = tuple(x.shape[:dim]) + tuple(idx.shape) + tuple(x.shape[dim + 1:])
    else:
        for k in range(x.dim()):
            if k != dim:
                x = x.narrow(k, 0, idx.shape[k])
        a, b = _ws_gather_3d(idx, dim)
        j = idx.shape[dim]
        idx3 = idx.reshape(a, j, b)
        shape = tuple(idx.shape)
    x3 = x.reshape(a, v, b)
    out = torch.empty((a, j, b), dtype=x.dtype, device=x.device)
    if out.numel():
        bj, bb, nw = _ws_gather_tiles(j, b)
        gather_kernel[(a * triton.cdiv(j, bj) * triton.cdiv(b, bb),)](
            x3, idx3, out, a, j, b, v, *x3.stride(), *idx3.stride(), *out.stride(), BLOCK_J=bj, BLOCK_B=bb,
            num_warps=nw)
    return out.view(shape)


def _ws_scatter(x, idx, src, dim, rows, add, value, num, skip, shape, dtype, what, name):
    """x (zeros of shape when None) with src (or the scalar value) added (add) or written at idx along dim:
    rows (index_add, the embedding backward: src's dim-slices) or elements (scatter_add, scatter); an fp32
    accumulator, rounded once to the dtype."""
    _ws_check_index(idx, num, what, name, skip=skip)
    acc = torch.zeros(shape, dtype=torch.float32, device=idx.device)
    if x is not None:
        acc.copy_(x)
    if rows:
        a, b = _ws_gather_3d(acc, dim)
        flat = idx.reshape(-1)
        j = flat.shape[0]
        idx3 = flat.view(1, j, 1).expand(a, j, b)
        acc3 = acc.view(a, num, b)
    else:
        a, b = _ws_gather_3d(idx, dim)
        j = idx.shape[dim]
        idx3 = idx.reshape(a, j, b)
        part = acc
        for k in range(acc.dim()):
            if k != dim:
                part = part.narrow(k, 0, idx.shape[k])
        if part.shape == acc.shape:
            acc3 = acc.view(a, num, b)
        else:  # a smaller index (at most one dim on either side of dim): the part it reaches, as a 3-D view
            acc3 = part if dim > 0 else part.unsqueeze(0)
            acc3 = acc3 if acc3.dim() == 3 else acc3.unsqueeze(-1)
    src3 = src.reshape(a, j, b) if src is not None else acc3
    if a * j * b:
        bj, bb, nw = _ws_gather_tiles(j, b)
        scatter_kernel[(a * triton.cdiv(j, bj) * triton.cdiv(b, bb),)](
            src3, idx3, acc3, a, j, b, num, -1 if skip is None else skip, 0.0 if value is None else value,
            *(src3.stride() if src is not None else (0, 0, 0)), *idx3.stride(), *acc3.stride(), BLOCK_J=bj,
            BLOCK_B=bb, ADD=add, HAS_SRC=src is not None, EMULATE=_EMULATE, num_warps=nw)
    return acc if dtype == torch.float32 else acc.to(dtype)
'''


def call(n: Node, v) -> str:  # noqa: ANN001 - v renders an argument
    """The emitted expression computing ``n``."""
    t = n.attrs
    idx = n.args[1]
    if n.op == "gather":
        return (f"_ws_gather({v(n.args[0])}, {v(idx)}, {t['dim']}, {t['rows']}, {t['wrap']}, {t['what']!r}, "
                f"{idx.name!r})")
    x, src = n.args[0], n.args[2]
    return (f"_ws_scatter({v(x) if x is not None else None}, {v(idx)}, {v(src) if src is not None else None}, "
            f"{t['dim']}, {t['rows']}, {t['add']}, {t['value']!r}, {t['num']}, {t['skip']!r}, {tuple(n.shape)!r}, "
            f"torch.{str(n.dtype).split('.')[-1]}, {t['what']!r}, {idx.name!r})")
