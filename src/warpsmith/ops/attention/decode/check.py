"""Host checks of the decode ops' index arguments: every length, page index, CSR offset and plan item in range.

The decode kernels trust their integer inputs (contract.py states the preconditions under which
every load is proved in bounds): a length past the cache's capacity, a page index outside the pool, a
CSR offset past ``kv_indices`` or a plan item past its sequence makes them read other sequences' pages
(wrong results: NaN, huge values) or, on a GPU, memory outside the cache (an illegal memory access).
:func:`check_indices` checks all of them on the host and raises :class:`InvalidInputError` naming the
argument, the index, the value found and the limit, before anything is launched.

Cost: free where the tensors are CPU tensors (the interpreter). On a GPU the values live on the device:
the check copies the index tensors to the host, which waits for the stream (one synchronization per
call; not possible while a CUDA graph is captured). So ``check_bounds=None`` (the default) checks
CPU tensors only; ``check_bounds=True`` checks GPU tensors too (for debugging, or where a sync per
call is affordable), ``False`` never checks.

Only the entries a call reads are checked: block-table entries past a sequence's pages (vLLM pads
rows with anything) and ``kv_indices`` outside every sequence's range are never read.
"""
from __future__ import annotations

from typing import Mapping

import torch

from ....core.errors import InvalidInputError


def wanted(check_bounds: bool | None, tensors: Mapping[str, torch.Tensor | None]) -> bool:
    """Whether to check: ``check_bounds`` itself, or (None) whether every index tensor is on the CPU."""
    present = [t for t in tensors.values() if isinstance(t, torch.Tensor)]
    on_device = any(t.device.type != "cpu" for t in present)
    if check_bounds is None:
        return not on_device
    if not isinstance(check_bounds, bool):
        raise InvalidInputError("check_bounds", "True, False or None", check_bounds)
    if check_bounds and on_device and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise InvalidInputError("check_bounds", "False or None while a CUDA graph is captured (the check reads "
                                "the index tensors on the host, which needs a synchronization)", True)
    return check_bounds


def _host(name: str, t: torch.Tensor, shape: tuple[int, ...] | None) -> torch.Tensor:
    """``t`` as int64 on the host, after checking its dtype (int32, as the kernels read it) and shape."""
    if t.dtype != torch.int32:
        raise InvalidInputError(f"dtype of {name}", str(torch.int32), str(t.dtype))
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise InvalidInputError(f"shape of {name}", str(tuple(shape)), str(tuple(t.shape)))
    return t.detach().to("cpu", torch.int64)


def _first(bad: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in bad.nonzero()[0])


def _idx(name: str, at: tuple[int, ...]) -> str:
    return f"{name}[{', '.join(map(str, at))}]"


def check_indices(*, B: int, capacity: int, page_size: int, num_pages: int | None,
                  seq_lens: torch.Tensor | None = None, block_table: torch.Tensor | None = None,
                  kv_indptr: torch.Tensor | None = None, kv_indices: torch.Tensor | None = None,
                  kv_last_page_len: torch.Tensor | None = None, plan: Mapping[str, torch.Tensor] | None = None,
                  capacity_what: str = "the cache's capacity") -> None:
    """Raise :class:`InvalidInputError` at the first index argument out of range (see the module docstring).

    ``capacity``: the most tokens a sequence may hold (contiguous: S_max; block table: its columns x page
    size); ``num_pages``: the pages of a paged cache (None: contiguous); ``plan``: the four plan tensors, if
    one was given. Lengths of a CSR table are derived from it once its offsets are checked.
    """
    P = page_size
    if block_table is not None:
        lens = _host("seq_lens", seq_lens, (B,))
        bad = (lens < 0) | (lens > capacity)
        if bad.any():
            (b,) = _first(bad)
            raise InvalidInputError(f"seq_lens[{b}]", f"a length in [0, {capacity}] ({capacity_what}: "
                                    f"{block_table.shape[1]} block_table entries of {P} tokens)", int(lens[b]))
        table = _host("block_table", block_table, (B, block_table.shape[1] if block_table.dim() == 2 else -1))
        need = (lens + P - 1) // P  # the pages each sequence reads
        used = torch.arange(table.shape[1])[None, :] < need[:, None]
        bad = used & ((table < 0) | (table >= num_pages))
        if bad.any():
            b, j = _first(bad)
            raise InvalidInputError(_idx("block_table", (b, j)),
                                    f"a page index in [0, {num_pages}) (the cache's num_blocks; entry {j} holds tokens "
                                    f"{j * P}..{min(int(lens[b]), (j + 1) * P) - 1} of sequence {b})", int(table[b, j]))
    elif kv_indptr is not None:
        nnz = kv_indices.numel()
        ptr = _host("kv_indptr", kv_indptr, (B + 1,))
        if kv_indices.dim() != 1:
            raise InvalidInputError("shape of kv_indices", "(nnz pages,)", tuple(kv_indices.shape))
        bad = (ptr < 0) | (ptr > nnz)
        if bad.any():
            (b,) = _first(bad)
            raise InvalidInputError(f"kv_indptr[{b}]", f"an offset in [0, {nnz}] (kv_indices has {nnz} entries)",
                                    int(ptr[b]))
        bad = ptr[1:] < ptr[:-1]
        if bad.any():
            (b,) = _first(bad)
            raise InvalidInputError(f"kv_indptr[{b + 1}]", f"non-decreasing offsets: at least kv_indptr[{b}] = "
                                    f"{int(ptr[b])}", int(ptr[b + 1]))
        last = _host("kv_last_page_len", kv_last_page_len, (B,))
        pages = ptr[1:] - ptr[:-1]
        bad = (pages > 0) & ((last < 1) | (last > P))
        if bad.any():
            (b,) = _first(bad)
            raise InvalidInputError(f"kv_last_page_len[{b}]", f"tokens in the last page of sequence {b} in [1, {P}] "
                                    f"(the page size)", int(last[b]))
        idx = _host("kv_indices", kv_indices, None)
        lo, hi = int(ptr[0]), int(ptr[-1])
        bad = torch.zeros_like(idx, dtype=torch.bool)
        bad[lo:hi] = (idx[lo:hi] < 0) | (idx[lo:hi] >= num_pages)  # entries no sequence owns are never read
        if bad.any():
            (i,) = _first(bad)
            b = int(torch.searchsorted(ptr, i, right=True)) - 1
            raise InvalidInputError(f"kv_indices[{i}]", f"a page index in [0, {num_pages}) (the cache's num_blocks; "
                                    f"page {i - int(ptr[b])} of sequence {b})", int(idx[i]))
        lens = torch.where(pages > 0, (pages - 1) * P + last, torch.zeros_like(pages))
    else:
        lens = _host("seq_lens", seq_lens, (B,))
        bad = (lens < 0) | (lens > capacity)
        if bad.any():
            (b,) = _first(bad)
            raise InvalidInputError(f"seq_lens[{b}]", f"a length in [0, {capacity}] ({capacity_what})", int(lens[b]))
    if plan:
        _check_plan(plan, lens, B)


def _check_plan(plan: Mapping[str, torch.Tensor], lens: torch.Tensor, B: int) -> None:
    """A given plan: items in bounds (batch index, token range within the sequence), each sequence's items
    (``batch_indptr``) its own, covering its tokens exactly once (else the result would be silently wrong)."""
    wb = plan["work_batch"]
    W = wb.numel() if wb.dim() == 1 else -1
    wb = _host("plan work_batch", wb, (W,))
    ws = _host("plan work_start", plan["work_start"], (W,))
    we = _host("plan work_end", plan["work_end"], (W,))
    ptr = _host("plan batch_indptr", plan["batch_indptr"], (B + 1,))
    bad = (wb < 0) | (wb >= B)
    if bad.any():
        (w,) = _first(bad)
        raise InvalidInputError(f"plan work_batch[{w}]", f"a sequence index in [0, {B})", int(wb[w]))
    L = lens[wb]
    bad = (ws < 0) | (we < ws) | (we > L)
    if bad.any():
        (w,) = _first(bad)
        raise InvalidInputError(f"plan item {w} (work_start, work_end)",
                                f"0 <= start <= end <= {int(L[w])} (the length of its sequence {int(wb[w])})",
                                (int(ws[w]), int(we[w])))
    bad = (ptr < 0) | (ptr > W)
    if bad.any():
        (b,) = _first(bad)
        raise InvalidInputError(f"plan batch_indptr[{b}]", f"an item offset in [0, {W}]", int(ptr[b]))
    bad = ptr[1:] < ptr[:-1]
    if bad.any():
        (b,) = _first(bad)
        raise InvalidInputError(f"plan batch_indptr[{b + 1}]", f"non-decreasing offsets: at least {int(ptr[b])}",
                                int(ptr[b + 1]))
    counts = ptr[1:] - ptr[:-1]
    owner = torch.repeat_interleave(torch.arange(B), counts)
    items = torch.arange(int(ptr[0]), int(ptr[-1]))
    bad = wb[items] != owner
    if bad.any():
        (i,) = _first(bad)
        w = int(items[i])
        raise InvalidInputError(f"plan work_batch[{w}]", f"{int(owner[i])} (item {w} is in sequence {int(owner[i])}'s "
                                "batch_indptr range)", int(wb[w]))
    s, e = ws[items], we[items]
    got = torch.zeros(B, dtype=torch.int64).index_add_(0, owner, e - s)
    order = torch.argsort(owner * (int(lens.max()) + 1 if lens.numel() else 1) + s, stable=True)
    so, eo, oo = s[order], e[order], owner[order]
    live = eo > so
    so, eo, oo = so[live], eo[live], oo[live]
    overlap = (oo[1:] == oo[:-1]) & (so[1:] < eo[:-1])
    bad = got != lens
    if overlap.any() or bad.any():
        b = int(oo[1:][overlap][0]) if overlap.any() else _first(bad)[0]
        raise InvalidInputError(f"plan items of sequence {b}",
                                f"token ranges covering [0, {int(lens[b])}) exactly once (the plan of these lengths)",
                                f"ranges {_ranges(ws, we, ptr, b)}")


def _ranges(ws: torch.Tensor, we: torch.Tensor, ptr: torch.Tensor, b: int) -> list[tuple[int, int]]:
    """The (start, end) of sequence b's items (the first 8)."""
    return [(int(ws[w]), int(we[w])) for w in range(int(ptr[b]), int(ptr[b + 1]))][:8]


__all__ = ["check_indices", "wanted"]
