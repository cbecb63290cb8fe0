"""The decode plan: per-batch metadata computed once, so the kernels run on a fixed grid with no host sync.

A plan is a *work list*: item ``w`` is the token range ``[work_start[w], work_end[w])`` of sequence
``work_batch[w]``; the items of sequence b are ``batch_indptr[b] .. batch_indptr[b + 1]`` (contiguous).
The split kernel runs one program per item (and KV head, and block of query heads); the merge
kernel one per (sequence, query head). The grid depends only on the plan's capacity ``W``, never
on the lengths, so one plan serves every layer of a decode step and a CUDA graph can replay it.
Items beyond what the lengths need are *padding*: ``start = end = 0``, their programs write an
empty partial (``o = 0``, ``lse = -inf``) that no merge reads, or that merges to nothing.

Two planners:

- :func:`plan_static` (what the launchers use): every sequence gets ``num_splits`` items of
  ``cdiv(cdiv(L_b, num_splits), block_n) * block_n`` tokens (the last ones may be empty). Pure
  tensor arithmetic on the lengths' device: no host sync, CUDA-graph capturable. ``num_splits == 1``
  gives one item per sequence (item b is sequence b), so the split kernel can write the final
  output (``direct``) and no merge runs.
- :func:`plan_balanced` (FlashInfer's scheme): from lengths known on the host (one sync per decode
  step, shared by all layers), a chunk size is chosen so that about ``target_items`` items cover all
  sequences (long sequences get more splits, short ones one), padded to the fixed capacity
  ``max_items``.

Lengths from a FlashInfer-style CSR table: :func:`seq_lens_from_csr`, on device.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ....core.errors import InvalidInputError


@dataclass(frozen=True)
class DecodePlan:
    """A work list (int32 tensors on the cache's device); see the module docstring."""

    work_batch: torch.Tensor  # (W,)
    work_start: torch.Tensor  # (W,)
    work_end: torch.Tensor  # (W,)
    batch_indptr: torch.Tensor  # (B + 1,)
    direct: bool  # item b is sequence b, one item each: the split kernel writes the final output

    @property
    def items(self) -> int:
        return int(self.work_batch.numel())

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"work_batch": self.work_batch, "work_start": self.work_start, "work_end": self.work_end,
                "batch_indptr": self.batch_indptr}


def seq_lens_from_csr(kv_indptr: torch.Tensor, kv_last_page_len: torch.Tensor, page_size: int) -> torch.Tensor:
    """``(pages - 1) * page_size + last`` per sequence (0 without pages), int32, on device (no sync)."""
    ptr = kv_indptr.long()
    pages = ptr[1:] - ptr[:-1]
    lens = torch.where(pages > 0, (pages - 1) * page_size + kv_last_page_len.long(), torch.zeros_like(pages))
    return lens.to(torch.int32)


def plan_static(seq_lens: torch.Tensor, num_splits: int, block_n: int) -> DecodePlan:
    """``num_splits`` items per sequence, each a multiple of ``block_n`` tokens; no host sync."""
    if num_splits < 1 or block_n < 1:
        raise InvalidInputError("num_splits and block_n", "positive integers", (num_splits, block_n))
    B = seq_lens.numel()
    dev = seq_lens.device
    lens = seq_lens.long()
    per = (lens + num_splits - 1) // num_splits
    chunk = ((per + block_n - 1) // block_n).clamp(min=1) * block_n  # (B,)
    s = torch.arange(num_splits, device=dev)
    start = s[None, :] * chunk[:, None]
    end = torch.minimum(start + chunk[:, None], lens[:, None])
    live = start < end
    start = torch.where(live, start, torch.zeros_like(start))
    end = torch.where(live, end, torch.zeros_like(end))
    batch = torch.arange(B, device=dev)[:, None].expand(B, num_splits)
    i32 = torch.int32
    return DecodePlan(batch.reshape(-1).to(i32), start.reshape(-1).to(i32), end.reshape(-1).to(i32),
                      (torch.arange(B + 1, device=dev) * num_splits).to(i32), direct=num_splits == 1)


def plan_balanced(seq_lens: Sequence[int] | torch.Tensor, block_n: int, max_items: int, target_items: int | None = None,
                  device: str | torch.device | None = None) -> DecodePlan:
    """A load-balanced work list from host lengths, padded to ``max_items`` items (the fixed grid).

    The chunk (a multiple of ``block_n``) is the smallest with at most ``target_items`` (default
    ``max_items``) items in all; every sequence has at least one item (zero-length ones an empty one).
    """
    lens = [int(n) for n in (seq_lens.tolist() if isinstance(seq_lens, torch.Tensor) else seq_lens)]
    if device is None:
        device = seq_lens.device if isinstance(seq_lens, torch.Tensor) else "cpu"
    B = len(lens)
    target = min(max_items, target_items or max_items)
    if any(n < 0 for n in lens):
        raise InvalidInputError("sequence lengths", "non-negative integers", lens)
    if max_items < B or target < B:
        raise InvalidInputError("max_items and target_items", f"at least the batch size {B}", (max_items, target_items))

    def count(chunk: int) -> int:
        return sum(max(1, -(-n // chunk)) for n in lens)

    top = max(1, -(-max(lens + [1]) // block_n))  # chunk in blocks: one item per sequence at most `top`
    lo, hi = 1, top
    while lo < hi:  # the smallest chunk (in blocks) with at most `target` items
        mid = (lo + hi) // 2
        if count(mid * block_n) <= target:
            hi = mid
        else:
            lo = mid + 1
    chunk = lo * block_n
    batch, start, end, indptr = [], [], [], [0]
    for b, n in enumerate(lens):
        k = max(1, -(-n // chunk))
        for i in range(k):
            s0, e0 = i * chunk, min((i + 1) * chunk, n)
            live = s0 < e0
            batch.append(b)
            start.append(s0 if live else 0)
            end.append(e0 if live else 0)
        indptr.append(len(batch))
    pad = max_items - len(batch)
    batch += [0] * pad
    start += [0] * pad
    end += [0] * pad

    def t(x):
        return torch.tensor(x, dtype=torch.int32).to(device, non_blocking=True)

    return DecodePlan(t(batch), t(start), t(end), t(indptr), direct=False)


__all__ = ["DecodePlan", "plan_static", "plan_balanced", "seq_lens_from_csr"]
