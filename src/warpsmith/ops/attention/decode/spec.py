"""Attention decode: one query token per sequence against a KV cache (contiguous or paged), and MLA decode.

``attention_decode`` (GQA/MQA/MHA): q (B, Hq, D) with ``Hq = Hk * G`` (query head ``h`` reads KV
head ``h // G``), a KV cache of ``Hk`` heads and per-sequence lengths ``L_b <= S``::

    s_j = scale * q_h . k_j            (j < L_b; optionally s_j = softcap * tanh(s_j / softcap))
    out_h = sum_j softmax(s)_j v_j,    lse_h = log sum_j exp(s_j)   (natural log, fp32)

``attention_decode_mla`` (DeepSeek-V2/V3 absorbed MLA): one latent KV head shared by all H query
heads; the key is the latent ``c_j`` (Dc = 512) concatenated with a rotary part ``r_j`` (Dr = 64),
the value is the latent itself: ``s_j = scale (q_nope . c_j + q_pe . r_j)``, ``out = sum_j p_j c_j``.

Several query tokens per sequence (axis ``T``, speculative decoding): q (B, T, Hq, D), out (B, T, Hq, D),
lse (B, T, Hq); the cache already holds the step's T tokens, and query token t (position
``L_b - T + t``) sees the keys ``j <= L_b - T + t`` (causal among the new tokens). A query that sees
no key (a zero-length sequence, or ``L_b < T``) gives ``out = sum_j 0 v_j`` over the sequence's tokens
(0, or NaN where such a v is NaN: the ``p @ V`` of every kernel) and ``lse = -inf``.

Caches (attribute ``cache``; MLA is always paged):

- ``contiguous``: k_cache, v_cache (B, Hk, S, D); ``seq_lens`` (B,) int32.
- ``paged`` with ``table="block_table"`` (vLLM): caches of ``num_blocks`` pages of ``page_size``
  tokens, ``layout="NHD"`` [num_blocks, page_size, Hk, D] or ``"HND"`` [num_blocks, Hk, page_size, D]
  (MLA: ckv [num_blocks, page_size, Dc], kpe [num_blocks, page_size, Dr]); ``block_table`` (B,
  cdiv(S, page_size)) int32 and ``seq_lens`` (B,) int32: token j of sequence b is slot
  ``j % page_size`` of page ``block_table[b, j // page_size]``.
- ``paged`` with ``table="csr"`` (FlashInfer): ``kv_indptr`` (B + 1,), ``kv_indices`` (nnz pages,)
  and ``kv_last_page_len`` (B,), int32: the pages of sequence b are
  ``kv_indices[kv_indptr[b]:kv_indptr[b + 1]]``, the last one holding ``kv_last_page_len[b]``
  tokens, so ``L_b = (pages - 1) * page_size + last`` (0 with no pages).

Zero-length sequences (``L_b = 0``): ``out = 0`` and ``lse = -inf`` (nothing is attended; FlashInfer
returns the same). A sequence with tokens follows torch's softmax on special values: a NaN score
(or +inf) makes that head's output NaN, and all scores -inf gives NaN (0/0) with lse -inf.
Slots past ``L_b`` (the rest of the last page, unused table entries, other sequences' pages) are
never part of the result; the inputs drawn here fill them with random values, so a kernel that
reads them fails its contract.

Error contract (derivation). Kernels compute in fp32 (``u = 2^-24``) with dot products of the
inputs (exact products in fp32 for fp16/bf16; fp32 inputs use IEEE fp32 dots), round ``p`` to the
input dtype before ``p @ V`` (``u_in``: 0 for fp32) and may split the length into partials merged
by their lse. With ``a_j = scale |q| . |k_j|`` and ``g(n) = gamma(n, u) / u``:

- a score errs by ``|ds_j| <= u ((g(D) + 2) a_j + 2 |s_j|)`` (+ ``8 softcap u`` for the softcap's
  tanh: a polynomial near 0, ``(1 - e) / (1 + e)``, ``e = exp(-2|t|)``, beyond);
- ``p_j = exp(s_j - m)`` relatively by ``2 max|ds| + u (3 |s_j - m| + 8)`` (the max is one of the
  computed scores, so its error enters once more);
- the output ``o = sum p_j v_j / sum p_j`` by the weights' relative errors times ``|v_j - o|``, plus
  the two length-L summations and the merge of partials (``g(S) + 16`` ulps of ``sum p_j |v_j|``),
  plus ``u_in sum p_j |v_j| / sum p_j`` for the rounding of ``p``.

So, with ``W = sum p_j |v_j| / sum p_j`` and ``T = sum p_j |s_j - m| (|v_j| + |o|) / sum p_j``,
``|err| <= u_out |o| + u B + u_in W`` where ``B = (W + |o|)(2 max_j |ds_j| / u + 8) + 3 T + W (g(S) + 16)``.
The generic contract (core/error_contract.py) with ``reduction_len = S`` allows ``u_out |o| + (gamma(S, u)
+ 2 u_op + u) scale``; the error scale is ``B / (g(S) + 1)`` (so ``(gamma + u) scale = u B``) and
``u_op = u_in / 2`` (so ``2 u_op scale >= u_in W``, since ``B >= (g(S) + 16) W``). lse errs by
``max|ds| + rel(sum p) + u |lse|``: scale ``(2 max|ds| / u + 3 T' + g(S) + 16) / (g(S) + 1)`` with
``T' = sum p_j |s_j - m| / sum p_j``; with a softcap, lse's unit is ``4u`` (tanh's own few ulp).
The contract's second criterion (at most 4x the reference's
own error, plus one ulp of the largest output) keeps the worst-case constants from hiding a sloppy
kernel.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch

from ....core.error_contract import ErrorContract, gamma
from ....core.dtypes import UNIT_ROUNDOFF
from ....core.errors import InvalidInputError
from ....core.opspec import Axis, OpSpec, Problem, Scalar, draw

_U = UNIT_ROUNDOFF["float32"]
PAGE_SIZES = (16, 1, 2, 4, 8, 32, 64, 128)
CACHES = ("contiguous", "paged")
LAYOUTS = ("NHD", "HND")
TABLES = ("block_table", "csr")
SCALE = Scalar(0.0, 0.0, 1e4)  # 0: 1 / sqrt(head dim of q . k)
SOFTCAP = Scalar(0.0, 0.0, 1e4)  # 0: none


def _g(n: int) -> float:
    return gamma(n, _U) / _U


def max_blocks(p: Problem) -> int:
    """Entries per row of a block table: pages covering S tokens."""
    return -(-p.shape["S"] // p.attrs["page_size"])


def softmax_scale(p: Problem, d_qk: int) -> float:
    return float(p.attrs["scale"]) or 1.0 / math.sqrt(d_qk)


def seq_lens_of(inputs: Mapping[str, torch.Tensor], page_size: int) -> torch.Tensor:
    """Per-sequence lengths (int64) from ``seq_lens`` or from the CSR arrays."""
    if "seq_lens" in inputs:
        return inputs["seq_lens"].long()
    ptr = inputs["kv_indptr"].long()
    pages = ptr[1:] - ptr[:-1]
    last = inputs["kv_last_page_len"].long()
    return torch.where(pages > 0, (pages - 1) * page_size + last, torch.zeros_like(pages))


def token_pages(inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], B: int, S: int) -> torch.Tensor:
    """(B, S) page index of each token position (positions past a sequence's pages: 0, masked later)."""
    P = attrs["page_size"]
    j = torch.arange(S, device=next(iter(inputs.values())).device) // P
    if attrs["table"] == "block_table":
        return inputs["block_table"].long()[:, j]
    ptr, idx = inputs["kv_indptr"].long(), inputs["kv_indices"].long()
    pos = ptr[:-1, None] + j[None, :]
    ok = pos < ptr[1:, None]
    return torch.where(ok, idx[pos.clamp(max=max(0, idx.numel() - 1))] if idx.numel() else torch.zeros_like(pos),
                       torch.zeros_like(pos))


def gather_dense(cache: torch.Tensor, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], B: int, S: int,
                 heads: bool = True) -> torch.Tensor:
    """The cache as (B, Hk, S, D) (or (B, S, D) without ``heads``), token j of sequence b at [b, :, j]."""
    if attrs["cache"] == "contiguous":
        return cache
    P = attrs["page_size"]
    pages = token_pages(inputs, attrs, B, S)  # (B, S)
    slots = (torch.arange(S, device=cache.device) % P)[None, :].expand(B, S)
    if not heads:
        return cache[pages, slots]  # (B, S, D)
    if attrs["layout"] == "NHD":
        return cache[pages, slots].permute(0, 2, 1, 3)  # [B, S, Hk, D] -> (B, Hk, S, D)
    return cache[pages, :, slots].permute(0, 2, 1, 3)  # [B, S, Hk, D] (advanced indices first) -> (B, Hk, S, D)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: torch.Tensor, lim: torch.Tensor, scale: float,
           softcap: float, extra: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Masked decode attention in q's dtype: q (B, Hk, R, Dq) (R query rows per KV head), k (B, Hk, S, Dq),
    v (B, Hk, S, Dv), lens (B,), lim (B, R) keys visible to each row (a prefix); ``extra`` (B, Hk, R, S)
    scores added before scaling (MLA's rotary part). Returns out (B, Hk, R, Dv), lse (B, Hk, R) and the
    intermediates the error scale needs.

    A row that sees no key has ``p = 0`` (not softmax's NaN): out is ``sum_j 0 v_j`` over the sequence's
    tokens (0, or NaN where such a v is NaN, as a kernel's ``p @ V`` gives), lse -inf."""
    S = k.shape[2]
    j = torch.arange(S, device=q.device)
    valid = j[None, None, None, :] < lim[:, None, :, None]  # (B, 1, R, S)
    s = torch.einsum("bhrd,bhsd->bhrs", q, k)
    if extra is not None:
        s = s + extra
    s = s * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    s = s.masked_fill(~valid, float("-inf"))
    p = torch.softmax(s, dim=-1)
    p = torch.where((lim <= 0)[:, None, :, None], torch.zeros_like(p), p)
    inlen = (j[None, :] < lens[:, None])[:, None, :, None]  # (B, 1, S, 1)
    v = torch.where(inlen, v, torch.zeros_like(v))  # slots past L_b never count, NaN or not
    out = torch.einsum("bhrs,bhsd->bhrd", p, v)
    lse = torch.logsumexp(s, dim=-1)  # -inf for a row that sees nothing
    return out, lse, {"s": s, "p": p, "valid": valid, "v": v}


def rows_of(q: torch.Tensor, hk: int) -> torch.Tensor:
    """q (B, Hq, D) or (B, T, Hq, D) as (B, Hk, T G, D): row r = t G + g is query token t of head hk G + g."""
    if q.dim() == 3:
        q = q[:, None]
    B, T, hq, D = q.shape
    return q.view(B, T, hk, hq // hk, D).permute(0, 2, 1, 3, 4).reshape(B, hk, T * (hq // hk), D)


def unrows(x: torch.Tensor, T: int | None) -> torch.Tensor:
    """(B, Hk, T G, ...) back to (B, T, Hq, ...) (or (B, Hq, ...) without T): the inverse of :func:`rows_of`."""
    B, hk, R = x.shape[:3]
    t = T or 1
    y = x.reshape(B, hk, t, R // t, *x.shape[3:]).transpose(1, 2).reshape(B, t, hk * (R // t), *x.shape[3:])
    return y if T else y[:, 0]


def visible(lens: torch.Tensor, T: int, G: int) -> torch.Tensor:
    """(B, T G) keys visible to each row: query token t of sequence b sits at position L_b - T + t."""
    t = torch.arange(T, device=lens.device).repeat_interleave(G)
    return lens[:, None] - T + t[None, :] + 1


class _DecodeSpec(OpSpec):
    """Shared by both decode ops: inputs with page tables, the reference, the contract."""

    MLA = False
    dtypes = (torch.float16, torch.bfloat16, torch.float32)

    # ---- sizes of one problem -----------------------------------------------------------------
    def dims(self, p: Problem) -> tuple[int, int, int, int, int]:
        """(Hk, G, D of q . k, Dv, Dr): the head structure."""
        if self.MLA:
            return 1, p.shape["H"], p.shape["Dc"], p.shape["Dc"], p.shape["Dr"]
        return p.shape["Hk"], p.shape["G"], p.shape["D"], p.shape["D"], 0

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        hk, g, _, dv, _ = self.dims(p)
        lead = (p.shape["B"], p.shape["T"]) if "T" in p.shape else (p.shape["B"],)
        return ((lead + (hk * g, dv), p.dtype), (lead + (hk * g,), torch.float32))

    def contract(self, p: Problem) -> tuple[ErrorContract, ErrorContract]:
        dt = p.dtype_name
        u_in = 0.0 if p.dtype == torch.float32 else UNIT_ROUNDOFF[dt]
        n = p.shape["S"]
        # with a softcap the lse carries tanh's own error (a few ulp: CUDA's tanhf 2, the kernels' formula
        # about 3), which an fp32 reference may not show at all (one token: lse = the capped score)
        u_lse = 4 * _U if p.attrs["softcap"] else _U
        return (ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=_U, reduction_len=n, u_operand=u_in / 2),
                ErrorContract(out_dtype="float32", u_out=u_lse, u_acc=_U, reduction_len=n))

    def flops(self, p: Problem) -> float:
        hk, g, dqk, dv, dr = self.dims(p)
        return 2.0 * p.shape["B"] * p.shape.get("T", 1) * hk * g * p.shape["S"] * (dqk + dr + dv)

    def min_bytes(self, p: Problem) -> float:
        """The KV of S tokens per sequence read once (the bound for full sequences), q read, out written."""
        hk, g, dqk, dv, dr = self.dims(p)
        e = p.dtype.itemsize
        kv = (dqk + dr) if self.MLA else (dqk + dv)
        t = p.shape.get("T", 1)
        return float(p.shape["B"] * (p.shape["S"] * hk * kv * e + t * hk * g * ((dqk + dr + dv) * e + 4)))

    # ---- inputs ---------------------------------------------------------------------------------
    def draw_lens(self, p: Problem, gen: torch.Generator) -> list[int]:
        """Ragged lengths in [0, S]: the first sequence full, a zero-length one from B >= 3."""
        B, S = p.shape["B"], p.shape["S"]
        lens = torch.randint(0, S + 1, (B,), generator=gen).tolist()
        lens[0] = S
        if B >= 3:
            lens[-1] = 0
        return lens

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        return self.inputs_for_lens(p, self.draw_lens(p, gen), gen, dist, device)

    def inputs_for_lens(self, p: Problem, lens: list[int], gen: torch.Generator, dist: str = "normal",
                        device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Inputs with the given per-sequence lengths (each in [0, S]); pages are scattered at random
        over a pool with unused pages, the unused slots holding random values."""
        B, S = p.shape["B"], p.shape["S"]
        if len(lens) != B or any(not 0 <= n <= S for n in lens):
            raise InvalidInputError("sequence lengths", f"{B} integers in [0, {S}]", lens)
        hk, g, dqk, dv, dr = self.dims(p)
        scale = self.large_scale(p) if dist == "large" else 1.0
        dt = p.dtype
        out: dict[str, torch.Tensor] = {}

        def rnd(shape):
            return draw(shape, dist, gen, dt, device, scale)

        lead = (B, p.shape["T"]) if "T" in p.shape else (B,)
        if self.MLA:
            out["q_nope"], out["q_pe"] = rnd(lead + (g, dqk)), rnd(lead + (g, dr))
        else:
            out["q"] = rnd(lead + (hk * g, dqk))
        i32 = dict(dtype=torch.int32, device=device)
        if p.attrs["cache"] == "contiguous":
            out["k_cache"], out["v_cache"] = rnd((B, hk, S, dqk)), rnd((B, hk, S, dv))
            out["seq_lens"] = torch.tensor(lens, **i32)
            return out
        P = p.attrs["page_size"]
        need = [-(-n // P) for n in lens]
        nb = sum(need) + B + 1  # unused pages too: a kernel reading a stale page reads other values
        perm = torch.randperm(nb, generator=gen)
        if self.MLA:
            out["ckv_cache"], out["kpe_cache"] = rnd((nb, P, dqk)), rnd((nb, P, dr))
        else:
            shape = (nb, P, hk, dqk) if p.attrs["layout"] == "NHD" else (nb, hk, P, dqk)
            out["k_cache"], out["v_cache"] = rnd(shape), rnd(shape)
        firsts = [sum(need[:b]) for b in range(B)]
        if p.attrs["table"] == "block_table":
            mb = max_blocks(p)
            table = torch.randint(0, nb, (B, mb), generator=gen)  # unused entries: in range, never read
            for b in range(B):
                table[b, :need[b]] = perm[firsts[b]:firsts[b] + need[b]]
            out["block_table"] = table.to(**i32)
            out["seq_lens"] = torch.tensor(lens, **i32)
        else:
            out["kv_indptr"] = torch.tensor([0] + [firsts[b] + need[b] for b in range(B)], **i32)
            out["kv_indices"] = perm[:max(1, sum(need))].to(**i32)
            out["kv_last_page_len"] = torch.tensor([n - (k - 1) * P if k else 0 for n, k in zip(lens, need)], **i32)
        return out

    def large_scale(self, p: Problem) -> float:
        # scores stay finite in fp32 (|q| |k| D < 2^100) and v near the dtype's limits stays finite after
        # averaging; q and k both scaled, so the softmax becomes close to one-hot
        return min(float(torch.finfo(p.dtype).max) ** 0.5 / 4, 2.0**10)

    # ---- reference --------------------------------------------------------------------------------
    def _parts(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]):
        """Rows (B, Hk, T G, .) of q, dense (B, Hk, S, .) k and v, lens, visible keys per row (B, T G), extra
        scores, the q . k dim, the rotary parts (MLA) and T (None for 3-d q), in the compute dtype."""
        first = inputs["q_nope"] if self.MLA else inputs["q"]
        ct = torch.float64 if first.dtype == torch.float64 else torch.float32
        B = first.shape[0]
        T = first.shape[1] if first.dim() == 4 else None
        lens = seq_lens_of(inputs, attrs["page_size"])
        if not self.MLA and attrs["cache"] == "contiguous":
            S = inputs["k_cache"].shape[2]
        elif attrs["table"] == "block_table":
            S = inputs["block_table"].shape[1] * attrs["page_size"]
        else:  # CSR: the longest sequence's pages
            ptr = inputs["kv_indptr"].long()
            S = max(1, int((ptr[1:] - ptr[:-1]).max()) * attrs["page_size"])
        if self.MLA:
            ckv = gather_dense(inputs["ckv_cache"].to(ct), inputs, attrs, B, S, heads=False)[:, None]  # (B, 1, S, Dc)
            kpe = gather_dense(inputs["kpe_cache"].to(ct), inputs, attrs, B, S, heads=False)[:, None]
            qn, qp = rows_of(inputs["q_nope"].to(ct), 1), rows_of(inputs["q_pe"].to(ct), 1)
            extra = torch.einsum("bhrd,bhsd->bhrs", qp, kpe)
            lim = visible(lens, T or 1, qn.shape[2] // (T or 1))
            return qn, ckv, ckv, lens, lim, extra, qn.shape[-1] + qp.shape[-1], (qp, kpe), T
        k, v = inputs["k_cache"], inputs["v_cache"]
        hk = k.shape[1] if attrs["cache"] == "contiguous" or attrs["layout"] == "HND" else k.shape[2]
        kd = gather_dense(k.to(ct), inputs, attrs, B, S)
        vd = gather_dense(v.to(ct), inputs, attrs, B, S)
        q = rows_of(inputs["q"].to(ct), hk)
        lim = visible(lens, T or 1, q.shape[2] // (T or 1))
        return q, kd, vd, lens, lim, None, q.shape[-1], None, T

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v, lens, lim, extra, dqk, _, T = self._parts(inputs, attrs)
        scale = float(attrs["scale"]) or 1.0 / math.sqrt(dqk)
        out, lse, _ = attend(q, k, v, lens, lim, scale, float(attrs["softcap"]), extra)
        first = inputs["q_nope"] if self.MLA else inputs["q"]
        lse_dt = torch.float64 if first.dtype == torch.float64 else torch.float32
        return unrows(out, T).to(first.dtype), unrows(lse, T).to(lse_dt)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v, lens, lim, extra, dqk, pe, T = self._parts(inputs64, attrs)
        scale = float(attrs["scale"]) or 1.0 / math.sqrt(dqk)
        softcap = float(attrs["softcap"])
        out, lse, mid = attend(q, k, v, lens, lim, scale, softcap, extra)
        s, p, valid, vz = mid["s"], mid["p"], mid["valid"], mid["v"]
        S = k.shape[2]
        n_red = max(S, 1)
        a = torch.einsum("bhrd,bhsd->bhrs", q.abs(), k.abs())
        if pe is not None:
            a = a + torch.einsum("bhrd,bhsd->bhrs", pe[0].abs(), pe[1].abs())
        d_tot = dqk + (pe[0].shape[-1] if pe is not None else 0)
        ds = (_g(d_tot) + 2) * scale * a + 2 * s.abs().nan_to_num(posinf=0.0, neginf=0.0) + (8 * softcap if softcap else 0.0)
        ds = ds.where(valid, torch.zeros_like(ds))
        ds_max = ds.amax(dim=-1, keepdim=True)  # (B, Hk, G, 1)
        m = s.amax(dim=-1, keepdim=True)
        gap = (s - m).abs().where(valid, torch.zeros_like(s)).nan_to_num(nan=0.0, posinf=0.0)
        pz = p.nan_to_num(nan=0.0).where(valid, torch.zeros_like(p))
        W = torch.einsum("bhrs,bhsd->bhrd", pz, vz.abs())
        o_abs = out.abs().nan_to_num(nan=0.0)
        Tg = torch.einsum("bhrs,bhsd->bhrd", pz * gap, vz.abs()) + (pz * gap).sum(-1, keepdim=True) * o_abs
        g_s = _g(n_red)
        B_o = (W + o_abs) * (2 * ds_max + 8) + 3 * Tg + W * (g_s + 16)
        T1 = (pz * gap).sum(-1)
        B_l = 2 * ds_max[..., 0] + 3 * T1 + g_s + 16
        return unrows(B_o / (g_s + 1), T), unrows(B_l / (g_s + 1), T)


class AttentionDecodeSpec(_DecodeSpec):
    name = "attention_decode"
    axes = (
        Axis("B", "sequences (one query token each)", max_size=2**20),
        Axis("Hk", "KV heads", max_size=4096),
        Axis("G", "query heads per KV head (Hq = Hk G)", max_size=4096),
        Axis("S", "cache capacity per sequence in tokens (contiguous: S_max; block table: pages x page size)",
              reduction=True, max_size=2**24),
        Axis("D", "head dim", max_size=1024),
        Axis("T", "query tokens per sequence (speculative decoding; absent: one, q 3-d)", optional=True, max_size=16),
    )
    attr_choices = {"cache": CACHES, "layout": LAYOUTS, "table": TABLES, "page_size": PAGE_SIZES,
                    "scale": SCALE, "softcap": SOFTCAP}


class MLADecodeSpec(_DecodeSpec):
    name = "attention_decode_mla"
    MLA = True
    dtypes = (torch.bfloat16, torch.float16, torch.float32)
    axes = (
        Axis("B", "sequences (one query token each)", max_size=2**20),
        Axis("H", "query heads (all share the one latent KV head)", max_size=4096),
        Axis("S", "cache capacity per sequence in tokens (pages x page size)", reduction=True, max_size=2**24),
        Axis("Dc", "latent (compressed KV) dim: the value dim, and the first part of q . k (512)", max_size=1024),
        Axis("Dr", "rotary part of q . k (64)", max_size=256),
        Axis("T", "query tokens per sequence (speculative decoding; absent: one, q 3-d)", optional=True, max_size=16),
    )
    attr_choices = {"cache": ("paged",), "layout": ("NHD",), "table": TABLES, "page_size": PAGE_SIZES,
                    "scale": SCALE, "softcap": SOFTCAP}


ATTENTION_DECODE = AttentionDecodeSpec()
ATTENTION_DECODE_MLA = MLADecodeSpec()
DECODE_SPECS = (ATTENTION_DECODE, ATTENTION_DECODE_MLA)

__all__ = ["AttentionDecodeSpec", "MLADecodeSpec", "ATTENTION_DECODE", "ATTENTION_DECODE_MLA", "DECODE_SPECS",
           "seq_lens_of", "max_blocks", "softmax_scale", "PAGE_SIZES"]
