"""``warpsmith.ops.attention_decode`` and ``warpsmith.ops.mla_decode``: decode attention over a KV cache.

``warpsmith::attention_decode`` and ``warpsmith::attention_decode_mla`` are torch.library custom ops
(forward only: decode is inference) with fake kernels, dispatching to the best verified config for
the problem (else the heuristic default). The cache form is read off the arguments: a block table
(vLLM), CSR page lists (FlashInfer), or neither (a contiguous (B, Hk, S_max, D) cache).

The tuning key's S is the cache capacity (contiguous: S_max; block table: its columns x page size;
CSR: kv_indices entries x page size), known without reading any length on the host: a call on a GPU
never synchronizes, unless ``check_bounds=True`` asks for the host check of the index arguments
(:mod:`.check`; on CPU tensors it is the default). A plan from :mod:`.plan` (``plan=``) replaces the static one the launcher
makes; build it once per decode step and reuse it across layers.
"""
from __future__ import annotations

from typing import Optional

import torch

from ....core.errors import InvalidInputError
from ....dispatch import launch
from ...shared.validate import check_device, check_dtype, check_tensor
from .check import check_indices, wanted
from .plan import DecodePlan
from .spec import ATTENTION_DECODE, ATTENTION_DECODE_MLA, PAGE_SIZES
from .variant import DECODE_VARIANTS

_MAX_S = 2**24


def _tables(k_cache: torch.Tensor, seq_lens, block_table, kv_indptr, kv_indices, kv_last_page_len, page_dim: int,
            contiguous_ok: bool) -> tuple[dict, dict[str, torch.Tensor], int]:
    """(attrs, table inputs, capacity S) from the table arguments given."""
    ins: dict[str, torch.Tensor] = {}
    csr = (kv_indptr, kv_indices, kv_last_page_len)
    if block_table is not None and any(t is not None for t in csr):
        raise InvalidInputError("page tables", "a block_table or the CSR arrays, not both", "both")
    if block_table is not None or any(t is not None for t in csr):
        page = int(k_cache.shape[page_dim])
        if page not in PAGE_SIZES:
            raise InvalidInputError("page size", "one of " + ", ".join(map(str, sorted(PAGE_SIZES))), page)
        if block_table is not None:
            if seq_lens is None:
                raise InvalidInputError("seq_lens", "a (B,) int32 tensor with a block_table", None)
            ins["block_table"], ins["seq_lens"] = check_tensor("block_table", block_table), check_tensor("seq_lens", seq_lens)
            if block_table.dim() != 2:
                raise InvalidInputError("shape of block_table", "(B, max_blocks)", tuple(block_table.shape))
            return {"cache": "paged", "table": "block_table", "page_size": page}, ins, block_table.shape[1] * page
        if any(t is None for t in csr):
            raise InvalidInputError("CSR page tables", "kv_indptr, kv_indices and kv_last_page_len together",
                                    [n for n, t in zip(("kv_indptr", "kv_indices", "kv_last_page_len"), csr) if t is None])
        if seq_lens is not None:
            raise InvalidInputError("seq_lens", "None with CSR tables (lengths come from kv_last_page_len)", "a tensor")
        for n, t in zip(("kv_indptr", "kv_indices", "kv_last_page_len"), csr):
            ins[n] = check_tensor(n, t)
        return ({"cache": "paged", "table": "csr", "page_size": page}, ins,
                max(1, min(_MAX_S, kv_indices.numel() * page)))
    if not contiguous_ok:
        raise InvalidInputError("page tables", "a block_table (with seq_lens) or kv_indptr/kv_indices/kv_last_page_len",
                                "none")
    if seq_lens is None:
        raise InvalidInputError("seq_lens", "a (B,) int32 tensor", None)
    ins["seq_lens"] = check_tensor("seq_lens", seq_lens)
    return {"cache": "contiguous"}, ins, int(k_cache.shape[2])


def _plan_inputs(plan: DecodePlan | None) -> dict[str, torch.Tensor]:
    if plan is None:
        return {}
    if not isinstance(plan, DecodePlan):
        raise InvalidInputError("plan", "a DecodePlan (warpsmith.ops.attention.decode.plan: plan_static / plan_balanced)", type(plan).__name__)
    return plan.tensors()


def _check_values(check_bounds: bool | None, B: int, attrs: dict, S: int, num_pages: int, ins: dict,
                  plan: dict) -> None:
    """The host check of every index argument (check.py), where ``check_bounds`` asks for it."""
    if not wanted(check_bounds, {**ins, **plan}):
        return
    paged = attrs["cache"] == "paged"
    what = "the cache's capacity" if paged else "S_max, the third dim of k_cache (B, Hk, S_max, D)"
    check_indices(B=B, capacity=S, page_size=attrs.get("page_size", 1), num_pages=num_pages if paged else None,
                  seq_lens=ins.get("seq_lens"), block_table=ins.get("block_table"), kv_indptr=ins.get("kv_indptr"),
                  kv_indices=ins.get("kv_indices"), kv_last_page_len=ins.get("kv_last_page_len"),
                  plan={k: v for k, v in plan.items() if v is not None}, capacity_what=what)


def _plan(work_batch, work_start, work_end, batch_indptr) -> dict:
    return {"work_batch": work_batch, "work_start": work_start, "work_end": work_end, "batch_indptr": batch_indptr}


def _run(spec, shape, dtype, attrs, inputs):
    p = spec.problem(shape, dtype, attrs)
    return launch(p, DECODE_VARIANTS, {k: v for k, v in inputs.items() if v is not None})


@torch.library.custom_op("warpsmith::attention_decode", mutates_args=())
def attention_decode_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, seq_lens: Optional[torch.Tensor],
                        block_table: Optional[torch.Tensor], kv_indptr: Optional[torch.Tensor],
                        kv_indices: Optional[torch.Tensor], kv_last_page_len: Optional[torch.Tensor],
                        work_batch: Optional[torch.Tensor], work_start: Optional[torch.Tensor],
                        work_end: Optional[torch.Tensor], batch_indptr: Optional[torch.Tensor],
                        layout: str, scale: float, softcap: float,
                        check_bounds: Optional[bool] = None) -> tuple[torch.Tensor, torch.Tensor]:
    paged = block_table is not None or kv_indptr is not None
    attrs, ins, S = _tables(k_cache, seq_lens, block_table, kv_indptr, kv_indices, kv_last_page_len,
                            1 if layout == "NHD" else 2, True)
    hk = (k_cache.shape[2] if layout == "NHD" else k_cache.shape[1]) if paged else k_cache.shape[1]
    B, hq, D = q.shape[0], q.shape[-2], q.shape[-1]
    _check_values(check_bounds, B, attrs, S, k_cache.shape[0], ins, _plan(work_batch, work_start, work_end, batch_indptr))
    shape = {"B": B, "Hk": hk, "G": hq // hk, "S": S, "D": D, **({"T": q.shape[1]} if q.dim() == 4 else {})}
    attrs = {**attrs, "layout": layout, "scale": scale, "softcap": softcap}
    ins.update(q=q, k_cache=k_cache, v_cache=v_cache, work_batch=work_batch, work_start=work_start, work_end=work_end,
               batch_indptr=batch_indptr)
    return _run(ATTENTION_DECODE, shape, q.dtype, attrs, ins)


@attention_decode_op.register_fake
def _(q, k_cache, v_cache, seq_lens, block_table, kv_indptr, kv_indices, kv_last_page_len, work_batch, work_start,
      work_end, batch_indptr, layout, scale, softcap, check_bounds=None):
    return q.new_empty(q.shape), q.new_empty(q.shape[:2], dtype=torch.float32)


@torch.library.custom_op("warpsmith::attention_decode_mla", mutates_args=())
def attention_decode_mla_op(q_nope: torch.Tensor, q_pe: torch.Tensor, ckv_cache: torch.Tensor, kpe_cache: torch.Tensor,
                            seq_lens: Optional[torch.Tensor], block_table: Optional[torch.Tensor],
                            kv_indptr: Optional[torch.Tensor], kv_indices: Optional[torch.Tensor],
                            kv_last_page_len: Optional[torch.Tensor], work_batch: Optional[torch.Tensor],
                            work_start: Optional[torch.Tensor], work_end: Optional[torch.Tensor],
                            batch_indptr: Optional[torch.Tensor], scale: float,
                            softcap: float, check_bounds: Optional[bool] = None) -> tuple[torch.Tensor, torch.Tensor]:
    attrs, ins, S = _tables(ckv_cache, seq_lens, block_table, kv_indptr, kv_indices, kv_last_page_len, 1, False)
    B, H, Dc = q_nope.shape[0], q_nope.shape[-2], q_nope.shape[-1]
    _check_values(check_bounds, B, attrs, S, ckv_cache.shape[0], ins,
                  _plan(work_batch, work_start, work_end, batch_indptr))
    shape = {"B": B, "H": H, "S": S, "Dc": Dc, "Dr": q_pe.shape[-1], **({"T": q_nope.shape[1]} if q_nope.dim() == 4 else {})}
    attrs = {**attrs, "layout": "NHD", "scale": scale, "softcap": softcap}
    ins.update(q_nope=q_nope, q_pe=q_pe, ckv_cache=ckv_cache, kpe_cache=kpe_cache, work_batch=work_batch,
               work_start=work_start, work_end=work_end, batch_indptr=batch_indptr)
    return _run(ATTENTION_DECODE_MLA, shape, q_nope.dtype, attrs, ins)


@attention_decode_mla_op.register_fake
def _(q_nope, q_pe, ckv_cache, kpe_cache, seq_lens, block_table, kv_indptr, kv_indices, kv_last_page_len,
      work_batch, work_start, work_end, batch_indptr, scale, softcap, check_bounds=None):
    return q_nope.new_empty(q_nope.shape), q_nope.new_empty(q_nope.shape[:2], dtype=torch.float32)


def _check(names_tensors: dict[str, torch.Tensor], dtypes) -> None:
    first = None
    for n, t in names_tensors.items():
        check_tensor(n, t)
        check_device(n, t)
        if t.dim() == 0 or t.numel() == 0:
            raise InvalidInputError(n, "a non-empty tensor", f"shape {tuple(t.shape)}")
        if first is None:
            check_dtype(n, t, dtypes)
            first = t
        elif t.dtype != first.dtype:
            raise InvalidInputError(f"dtype of {n}", str(first.dtype), str(t.dtype))


def _scales(scale: float | None, softcap: float | None, d_qk: int) -> tuple[float, float]:
    s = float(scale) if scale is not None else d_qk ** -0.5
    c = float(softcap) if softcap is not None else 0.0
    if not 0.0 < s <= 1e4 or not 0.0 <= c <= 1e4:
        raise InvalidInputError("scale and softcap", "scale in (0, 1e4], softcap in [0, 1e4] (0: none)", (scale, softcap))
    return s, c


def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     seq_lens: torch.Tensor | None = None, *, block_table: torch.Tensor | None = None,
                     kv_indptr: torch.Tensor | None = None, kv_indices: torch.Tensor | None = None,
                     kv_last_page_len: torch.Tensor | None = None, layout: str = "NHD", scale: float | None = None,
                     softcap: float | None = None, return_lse: bool = False, plan: DecodePlan | None = None,
                     check_bounds: bool | None = None):
    """Decode attention: one query token per sequence against its cached keys and values.

    ``out[b, h] = sum_{j < L_b} softmax_j(s) v_j`` with ``s_j = scale q[b, h] . k_j`` (optionally
    ``softcap * tanh(s_j / softcap)``); query head h reads KV head ``h // (Hq / Hk)`` (GQA/MQA).
    Split-KV: each sequence's tokens are cut into items (the plan) computed in parallel and merged
    by their log-sum-exp. A zero-length sequence gives ``out = 0``, ``lse = -inf``.

    Several query tokens per sequence (speculative decoding): q (B, T, Hq, D), T <= 16; the cache already
    holds the step's T tokens and query token t (position L_b - T + t) sees keys j <= L_b - T + t.

    Args:
        q: (B, Hq, D) or (B, T, Hq, D), float16, bfloat16 or float32; Hq a multiple of Hk.
        k_cache, v_cache: contiguous (B, Hk, S_max, D); or pages ``[num_blocks, page_size, Hk, D]``
            (``layout="NHD"``) / ``[num_blocks, Hk, page_size, D]`` (``"HND"``), page_size a power of
            two in [1, 128]. q's dtype.
        seq_lens: (B,) int32 lengths (contiguous and block-table caches), each <= the capacity.
        block_table: (B, max_blocks) int32 page indices in [0, num_blocks) (vLLM).
        kv_indptr, kv_indices, kv_last_page_len: FlashInfer's CSR page lists, int32: (B + 1,),
            (nnz,) page indices in [0, num_blocks), (B,) tokens in each last page (1..page_size).
        layout: "NHD" or "HND" for paged caches.
        scale: softmax scale (default 1 / sqrt(D)). softcap: logit soft-cap (None or 0: none).
        return_lse: also return lse (B, Hq) float32 (natural log).
        plan: a :class:`DecodePlan` (built once per step, reused across layers); default: the static
            plan of the tuned config.
        check_bounds: check every index argument on the host before launching: each length within the
            capacity, each page index a sequence reads within the pool, CSR offsets within ``kv_indices``,
            a plan's items within their sequences (covering each token once). None (default): check
            where the index tensors are CPU tensors (free); True: also on a GPU, at the cost of copying
            them to the host, one stream synchronization per call (not while capturing a CUDA graph);
            False: never (on a GPU an index out of range is then undefined behaviour: garbage or an
            illegal memory access).

    Returns:
        out shaped like q in q's dtype, or (out, lse (B, [T,] Hq) float32) with ``return_lse``.

    Raises:
        InvalidInputError: wrong types, shapes, dtypes, devices or table combinations, or (checked) an
            index argument out of range, naming it, the index, the value and the limit (nothing is computed).
    """
    if layout not in ("NHD", "HND"):
        raise InvalidInputError("layout", "NHD or HND", layout)
    _check({"q": q, "k_cache": k_cache, "v_cache": v_cache}, ATTENTION_DECODE.dtypes)
    if q.dim() not in (3, 4):
        raise InvalidInputError("shape of q", "(B, Hq, D) or (B, T, Hq, D)", tuple(q.shape))
    s, c = _scales(scale, softcap, q.shape[-1])
    pl = _plan_inputs(plan)
    out, lse = attention_decode_op(q, k_cache, v_cache, seq_lens, block_table, kv_indptr, kv_indices, kv_last_page_len,
                                   pl.get("work_batch"), pl.get("work_start"), pl.get("work_end"),
                                   pl.get("batch_indptr"), layout, s, c, check_bounds)
    return (out, lse) if return_lse else out


def mla_decode(q_nope: torch.Tensor, q_pe: torch.Tensor, ckv_cache: torch.Tensor, kpe_cache: torch.Tensor,
               seq_lens: torch.Tensor | None = None, *, block_table: torch.Tensor | None = None,
               kv_indptr: torch.Tensor | None = None, kv_indices: torch.Tensor | None = None,
               kv_last_page_len: torch.Tensor | None = None, scale: float | None = None,
               softcap: float | None = None, return_lse: bool = False, plan: DecodePlan | None = None,
               check_bounds: bool | None = None):
    """MLA decode (DeepSeek-V2/V3, absorbed): all H query heads attend to one latent KV head.

    ``s_j = scale (q_nope . ckv_j + q_pe . kpe_j)``, ``out = sum_j softmax_j(s) ckv_j``: the latent
    (Dc, 512 in DeepSeek) is both key part and value; kpe (Dr, 64) is the decoupled rotary key.

    Args:
        q_nope: (B, H, Dc); q_pe: (B, H, Dr); bfloat16, float16 or float32 (or (B, T, H, .): T query
            tokens per sequence, as :func:`attention_decode`).
        ckv_cache: [num_blocks, page_size, Dc]; kpe_cache: [num_blocks, page_size, Dr] (views of one
            combined [num_blocks, page_size, Dc + Dr] cache are fine).
        seq_lens, block_table, kv_indptr, kv_indices, kv_last_page_len: as :func:`attention_decode`
            (paged only).
        scale: default 1 / sqrt(Dc + Dr). softcap, return_lse, plan, check_bounds: as :func:`attention_decode`.

    Returns:
        out (B, H, Dc), or (out, lse (B, H) float32) with ``return_lse``.

    Raises:
        InvalidInputError: as :func:`attention_decode` (nothing is computed).
    """
    _check({"q_nope": q_nope, "q_pe": q_pe, "ckv_cache": ckv_cache, "kpe_cache": kpe_cache}, ATTENTION_DECODE_MLA.dtypes)
    if q_nope.dim() not in (3, 4) or q_pe.dim() != q_nope.dim() or q_pe.shape[:-1] != q_nope.shape[:-1]:
        raise InvalidInputError("shapes of q_nope and q_pe", "(B, [T,] H, Dc) and (B, [T,] H, Dr)",
                                f"{tuple(q_nope.shape)} and {tuple(q_pe.shape)}")
    s, c = _scales(scale, softcap, q_nope.shape[-1] + q_pe.shape[-1])
    pl = _plan_inputs(plan)
    out, lse = attention_decode_mla_op(q_nope, q_pe, ckv_cache, kpe_cache, seq_lens, block_table, kv_indptr, kv_indices,
                                       kv_last_page_len, pl.get("work_batch"), pl.get("work_start"),
                                       pl.get("work_end"), pl.get("batch_indptr"), s, c, check_bounds)
    return (out, lse) if return_lse else out


__all__ = ["attention_decode", "mla_decode", "attention_decode_op", "attention_decode_mla_op"]
