"""Scaled dot-product attention (prefill / training): the forward and its backward.

A problem has ``B`` sequences, ``H`` key/value heads and ``G`` query heads per key/value head
(``H_q = H * G``: G = 1 is multi-head, H = 1 multi-query, else grouped-query attention, any
ratio), ``Sq`` queries and ``Sk`` keys per sequence, head dims ``D`` (queries and keys) and
``Dv`` (values; optional axis, default ``D``). With ``varlen`` the sequences are packed:
``Sq``/``Sk`` are the *total* token counts, split into B sequences by ``cu_seqlens_q/k``
(int32, (B + 1,), non-decreasing from 0 to Sq/Sk; a sequence may be empty).

Layouts: q (B, H*G, Sq, D), k (B, H, Sk, D), v (B, H, Sk, Dv), out (B, H*G, Sq, Dv) and
lse (B, H*G, Sq) in float32; packed: q (Sq, H*G, D), k (Sk, H, D), v (Sk, H, Dv),
out (Sq, H*G, Dv), lse (H*G, Sq). Query head h attends with key/value head ``h // G``.

Semantics, for query i and key j of one sequence (lengths sq, sk):

- scores ``s_ij = scale * q_i . k_j`` (``scale`` 0 means ``1/sqrt(D)``); with ``softcap`` c > 0,
  ``s_ij = c * tanh(s_ij / c)`` (Gemma 2's logit soft-capping);
- the diagonal: ``off = sk - sq`` (``align="bottom_right"``, FlashAttention's convention: the
  last query sees the last key) or ``off = 0`` (``"top_left"``, torch SDPA's ``is_causal``);
  key j is visible to query i iff ``j <= i + off`` when ``causal``, and ``j >= i + off -
  window_left`` / ``j <= i + off + window_right`` for a window side that is >= 0 (-1:
  unbounded; FlashAttention's ``window_size`` convention);
- with ``bias`` (not packed), an additive score bias of shape (B, H*G, Sq, Sk) is added after the
  softcap: an attention mask, a boolean mask being 0 / -inf;
- ``out_i = sum_j p_ij v_j / sum_j p_ij`` over the visible keys, ``p_ij = exp(s_ij - m_i)``,
  ``m_i`` the row's largest visible score; ``lse_i = m_i + log(sum_j p_ij)`` (natural log).

Special values follow torch (``scaled_dot_product_attention``'s math backend, torch >= 2.5):
a row with no visible key, or whose visible scores are all -inf, gives ``out = 0`` (and
``lse = -inf``); a NaN score, or a +inf one, makes its row NaN (out and lse). A NaN or Inf in
``q`` or ``k`` reaches exactly the rows whose visible scores it touches. A NaN or Inf in ``v``
(forward) or in ``dout`` (backward) reaches every row that sees its key, but may also reach rows
of the same block of queries that mask it (``0 * NaN`` in the block's matrix product, as in every
flash kernel and torch's flash backend), so the spec's ``specials`` inputs put special values in
q and k only; the tests check the v case separately.

Backward (``attention_backward``): inputs q, k, v, out, lse (the forward's) and dout; outputs
dq, dk, dv in the inputs' dtype. It is defined on its inputs, as flash kernels compute it:
``P = exp(s - lse)`` on visible entries (0 elsewhere; a row with ``lse = -inf`` has P = 0),
``dV = P^T dO``, ``dP = dO V^T``, ``delta_i = dO_i . out_i``, ``dS = P (dP - delta)`` (0 on
masked entries), through the softcap ``dS *= 1 - tanh^2``, ``dQ = scale dS K``,
``dK = scale dS^T Q``; dK and dV sum over the G query heads of their key/value head.

Error contracts (first order, u = 2^-24: every kernel accumulates in fp32). Let
``kappa_i = scale * max_j |q_i| |k_j| + softcap`` (bounds |s_ij|; the condition of exp on a
score), ``u_p`` the rounding of P (and dS) to the input dtype before a tensor-core product (0 for
fp32: those products run in IEEE fp32) and ``W_i = sum_j p_ij |v_j| / l_i + |out_i|``.

- scores: ``|ds_ij| <= gamma(D) scale |q_i||k_j| <= D u kappa_i`` (plus a few u kappa for tanh);
  each ``p_ij`` gets relative error ``rho_i <= 2 D u kappa_i + 6 u kappa_i + 4 u`` (the max's
  error, the base-2 scaling and ``ex2.approx``); out = (sum p v)/(sum p) moves by ``rho_i W_i``;
- P rounded to the input dtype: ``u_p sum p |v| / l <= u_p W_i``; fp16 also flushes p below
  2^-24 (at most ``2^-25 sum_j |v_j| / l``, covered by the fp16 term below);
- ``sum p v`` and ``l`` in fp32 (``gamma(Sk)``), the running rescalings (``<= Sk`` of them, 5u
  each) and the final division: ``(2 Sk + 4) u W_i``.

So ``|err(out_i)| <= u_out |out_i| + (gamma(n) + 2 u_p + u) S_i`` with
``n = 2 Sk + 4 D + 32`` and ``S_i = (1 + 2 kappa_i) W_i (+ sum_j |v_j| / (2n)`` for fp16, so
that ``n u`` times it is the flush bound). The lse: ``|err| <= u |lse_i| + (gamma(n) + u) S'_i``
with ``S'_i = 2 + 2 kappa_i``. The backward, with ``T = P ((|dP| + |delta|)(1 + 2 kappa) + |dO||V|^T
+ sum |dO||out|)``: ``S(dq) = scale T |K|``, ``S(dk) = scale T^T |Q|``,
``S(dv) = (1 + 2 kappa) P^T |dO|`` (+ the fp16 flush terms), ``n = 2 max(Sq, Sk) + 4 (D + Dv) + 32``.
The second criterion holds every kernel to 4x the error of a naive attention in the same dtype
(torch's math formulation: ``q @ k^T``, softmax and ``p @ v`` each rounded to the dtype), plus one
ulp of the largest output.
"""
from __future__ import annotations

import math
from typing import Any, Iterator, Mapping

import torch

from ...core.error_contract import ErrorContract, gamma
from ...core.dtypes import UNIT_ROUNDOFF
from ...core.errors import InvalidInputError
from ...core.opspec import Axis, OpSpec, Problem, Scalar, draw, on_device

_U = UNIT_ROUNDOFF["float32"]
ALIGNS = ("bottom_right", "top_left")
MAX_HEAD_DIM = 256
INT_MAX = 2**31 - 1
_FP16_FLUSH = 2.0**-25  # half the fp16 subnormal step: what rounding a tiny p to fp16 can lose
_FP32_FLUSH = 2.0**-126

ATTRS: Mapping[str, Any] = {
    "causal": (False, True),
    "align": ALIGNS,
    "window_left": Scalar(-1, -1, INT_MAX, integer=True),
    "window_right": Scalar(-1, -1, INT_MAX, integer=True),
    "softcap": Scalar(0.0, 0.0, 1e6),
    "scale": Scalar(0.0, 0.0, 1e6),
    "varlen": (False, True),
    "bias": (False, True),
}


def softmax_scale(attrs: Mapping[str, Any], d: int) -> float:
    """The scale of the scores: ``attrs["scale"]``, or ``1/sqrt(D)`` when it is 0."""
    return float(attrs.get("scale") or 0.0) or 1.0 / math.sqrt(d)


def diagonal(attrs: Mapping[str, Any], sq: int, sk: int) -> int:
    """``off`` of the module docstring: key j is at or left of the diagonal of query i iff ``j <= i + off``."""
    return sk - sq if attrs.get("align", "bottom_right") == "bottom_right" else 0


def visible(attrs: Mapping[str, Any], sq: int, sk: int, device: Any = "cpu") -> torch.Tensor:
    """(sq, sk) bool: which keys each query sees (causality and window, aligned by ``align``)."""
    i = torch.arange(sq, device=device)[:, None] + diagonal(attrs, sq, sk)
    j = torch.arange(sk, device=device)[None, :]
    ok = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if attrs.get("causal"):
        ok &= j <= i
    wl, wr = int(attrs.get("window_left", -1)), int(attrs.get("window_right", -1))
    if wl >= 0:
        ok &= j >= i - wl
    if wr >= 0:
        ok &= j <= i + wr
    return ok


def visible_pairs(attrs: Mapping[str, Any], sq: int, sk: int) -> int:
    """How many (query, key) pairs are visible (the work a kernel that skips masked blocks must do)."""
    if sq == 0 or sk == 0:
        return 0
    off = diagonal(attrs, sq, sk)
    wl, wr = int(attrs.get("window_left", -1)), int(attrs.get("window_right", -1))
    hi_rel = min(0 if attrs.get("causal") else sq + sk, wr if wr >= 0 else sq + sk)
    lo_rel = -wl if wl >= 0 else -sq - sk
    i = torch.arange(sq, dtype=torch.int64) + off
    lo = (i + lo_rel).clamp(0, sk)
    hi = (i + hi_rel + 1).clamp(0, sk)
    return int((hi - lo).clamp(min=0).sum())


def split_lengths(total: int, parts: int, gen: torch.Generator) -> list[int]:
    """``total`` tokens split at random into ``parts`` ragged lengths (some may be 0)."""
    if parts == 1:
        return [total]
    cuts = sorted(int(c) for c in torch.randint(0, total + 1, (parts - 1,), generator=gen))
    bounds = [0] + cuts + [total]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def cu_seqlens(lengths: list[int], device: Any = "cpu") -> torch.Tensor:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32, device=device)


def _segments(inputs: Mapping[str, torch.Tensor], names: tuple[str, ...], attrs: Mapping[str, Any]
              ) -> Iterator[tuple[tuple, dict[str, torch.Tensor]]]:
    """Per sequence: (index into the outputs, {name: (heads, len, dim) tensor}) for each of ``names``
    (q-like tensors are cut by cu_seqlens_q, k-like by cu_seqlens_k; lse-like are (heads, len))."""
    kside = {"k", "v", "dk", "dv"}
    if not attrs.get("varlen"):
        names = names + (("bias",) if attrs.get("bias") and "bias" in inputs else ())
        for b in range(inputs["q"].shape[0]):
            yield (b,), {n: inputs[n][b] for n in names}
        return
    cq, ck = inputs["cu_seqlens_q"].tolist(), inputs["cu_seqlens_k"].tolist()
    for b in range(len(cq) - 1):
        seg = {}
        for n in names:
            lo, hi = (ck[b], ck[b + 1]) if n in kside else (cq[b], cq[b + 1])
            t = inputs[n]
            seg[n] = t[:, lo:hi] if n == "lse" else t[lo:hi].transpose(0, 1)
        yield (slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])), seg


def _scores(q: torch.Tensor, k: torch.Tensor, attrs: Mapping[str, Any], naive: bool,
            bias: torch.Tensor | None = None) -> torch.Tensor:
    """(Hq, sq, sk) scores with GQA expansion, scale, softcap and the additive bias, in q's dtype (naive:
    rounded as torch's math formulation rounds them) or fp64."""
    g = q.shape[0] // k.shape[0]
    kk = k.repeat_interleave(g, dim=0)
    s = torch.matmul(q, kk.transpose(-1, -2)) * softmax_scale(attrs, q.shape[-1])
    cap = float(attrs.get("softcap") or 0.0)
    if cap > 0:
        s = torch.tanh(s / cap) * cap
    if bias is not None:
        s = s + bias.to(s.dtype)
    return s


def _forward_one(q, k, v, attrs, naive: bool, bias=None):
    """One sequence: q (Hq, sq, D), k (H, sk, D), v (H, sk, Dv) -> out (Hq, sq, Dv), lse (Hq, sq) fp32/fp64."""
    sq, sk = q.shape[1], k.shape[1]
    g = q.shape[0] // k.shape[0]
    s = _scores(q, k, attrs, naive, bias)
    if naive:  # softmax in fp32 on the dtype's scores, p rounded to the dtype (torch's math backend)
        s = s.float()
    mask = visible(attrs, sq, sk, q.device)
    s = s.masked_fill(~mask, float("-inf"))
    m = s.amax(dim=-1, keepdim=True) if sk else s.new_full(s.shape[:-1] + (1,), float("-inf"))
    m_safe = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    p = torch.exp(s - m_safe)
    lsum = p.sum(dim=-1, keepdim=True)
    lse = (m_safe + torch.log(lsum)).squeeze(-1)
    probs = p / torch.where(lsum == 0, torch.ones_like(lsum), lsum)
    vv = v.repeat_interleave(g, dim=0)
    out = torch.matmul(probs.to(v.dtype), vv)
    return out, lse.to(torch.float64 if q.dtype == torch.float64 else torch.float32)


def _lse_safe(lse: torch.Tensor) -> torch.Tensor:
    return torch.where(lse == float("-inf"), torch.full_like(lse, float("inf")), lse)


def _backward_one(q, k, v, o, lse, do, attrs, naive: bool, bias=None):
    """One sequence of the backward formula (module docstring); returns dq, dk, dv and the pieces the
    error scale needs."""
    sq, sk = q.shape[1], k.shape[1]
    hq, h = q.shape[0], k.shape[0]
    g = hq // h
    scale = softmax_scale(attrs, q.shape[-1])
    kk, vv = k.repeat_interleave(g, dim=0), v.repeat_interleave(g, dim=0)
    raw = torch.matmul(q, kk.transpose(-1, -2)) * scale
    cap = float(attrs.get("softcap") or 0.0)
    ct = torch.float64 if q.dtype == torch.float64 else torch.float32
    if cap > 0:
        t = torch.tanh(raw.to(ct) / cap)
        s = t * cap
    else:
        s = raw.to(ct)
    if bias is not None:
        s = s + bias.to(ct)
    mask = visible(attrs, sq, sk, q.device)
    p = torch.exp(s - _lse_safe(lse.to(ct))[..., None]).where(mask, torch.zeros((), dtype=ct, device=q.device))
    dp = torch.matmul(do, vv.transpose(-1, -2)).to(ct)
    delta = (do.to(ct) * o.to(ct)).sum(-1)
    ds = (p * (dp - delta[..., None])).where(mask, torch.zeros((), dtype=ct, device=q.device))
    if cap > 0:
        ds = ds * (1 - t * t)
    dt = q.dtype
    dsd = ds.to(dt)
    dq = torch.matmul(dsd, kk) * scale
    dk = (torch.matmul(dsd.transpose(-1, -2), q) * scale).reshape(h, g, sk, -1).sum(1)
    dv = torch.matmul(p.to(dt).transpose(-1, -2), do).reshape(h, g, sk, -1).sum(1)
    return dq.to(dt), dk.to(dt), dv.to(dt), (p, dp, delta)


def _kappa(q64, k64, attrs, bias=None) -> torch.Tensor:
    """(Hq, sq, 1): scale * max_j |q_i||k_j| + softcap + max_j |bias_ij| (bounds |s_ij| over the finite
    entries, NaN-free)."""
    g = q64.shape[0] // k64.shape[0]
    qn = q64.abs().nan_to_num(posinf=0.0).norm(dim=-1)  # |q_i| (Cauchy-Schwarz bounds |q . k|)
    kn = k64.abs().nan_to_num(posinf=0.0).norm(dim=-1).repeat_interleave(g, dim=0)
    kmax = (kn.amax(dim=-1) if kn.shape[-1] else kn.new_zeros(kn.shape[:-1]))[:, None, None]
    out = (softmax_scale(attrs, q64.shape[-1]) * qn[..., None] * kmax) + float(attrs.get("softcap") or 0.0)
    if bias is not None and bias.shape[-1]:
        b = bias.abs().expand(q64.shape[0], q64.shape[1], bias.shape[-1])
        out = out + b.where(torch.isfinite(b), torch.zeros_like(b)).amax(-1, keepdim=True)
    return out


class _AttentionSpec(OpSpec):
    axes = (  # ordered so that the verifier's odd shapes stay small (see Variant.axis_blocks)
        Axis("Sq", "queries per sequence (packed: total query tokens)", max_size=2**24),
        Axis("B", "sequences", max_size=2**16),
        Axis("Sk", "keys per sequence (packed: total key tokens)", reduction=True, max_size=2**24),
        Axis("H", "key/value heads", max_size=1024),
        Axis("D", "head dim of queries and keys", reduction=True, max_size=MAX_HEAD_DIM),
        Axis("G", "query heads per key/value head (GQA group)", max_size=256),
        Axis("Dv", "head dim of values (default D)", optional=True, max_size=MAX_HEAD_DIM),
    )
    dtypes = (torch.float16, torch.bfloat16, torch.float32)
    attr_choices = ATTRS

    @staticmethod
    def dims(p: Problem) -> dict[str, int]:
        s = dict(p.shape)
        s.setdefault("Dv", s["D"])
        s["Hq"] = s["H"] * s["G"]
        return s

    def _shapes(self, p: Problem) -> dict[str, tuple[int, ...]]:
        d = self.dims(p)
        B, H, Hq, Sq, Sk, D, Dv = d["B"], d["H"], d["Hq"], d["Sq"], d["Sk"], d["D"], d["Dv"]
        if p.attrs["varlen"]:
            return {"q": (Sq, Hq, D), "k": (Sk, H, D), "v": (Sk, H, Dv), "out": (Sq, Hq, Dv), "lse": (Hq, Sq)}
        return {"q": (B, Hq, Sq, D), "k": (B, H, Sk, D), "v": (B, H, Sk, Dv), "out": (B, Hq, Sq, Dv),
                "lse": (B, Hq, Sq), "bias": (B, Hq, Sq, Sk)}

    def _cu(self, p: Problem, gen: torch.Generator, device: Any) -> dict[str, torch.Tensor]:
        if not p.attrs["varlen"]:
            return {}
        d = self.dims(p)
        lq = split_lengths(d["Sq"], d["B"], gen)
        lk = lq if d["Sk"] == d["Sq"] else split_lengths(d["Sk"], d["B"], gen)
        return {"cu_seqlens_q": cu_seqlens(lq, device), "cu_seqlens_k": cu_seqlens(lk, device)}

    def _qkv(self, p: Problem, gen: torch.Generator, dist: str, device: Any) -> dict[str, torch.Tensor]:
        sh = self._shapes(p)
        fmax = float(torch.finfo(p.dtype).max)
        d = self.dims(p)
        # large: scores near fp16's range after the scale (q.k ~ sqrt(D) s^2), values near the dtype's limit
        s_qk = (min(fmax, 6e4) / (8 * math.sqrt(d["D"]))) ** 0.5 if dist == "large" else 1.0
        s_v = fmax ** 0.5 / 4 if dist == "large" else 1.0
        vdist = "normal" if dist == "specials" else dist  # special values only in q and k (module docstring)
        out = {"q": draw(sh["q"], dist, gen, p.dtype, device, s_qk), "k": draw(sh["k"], dist, gen, p.dtype, device, s_qk),
               "v": draw(sh["v"], vdist, gen, p.dtype, device, s_v)}
        if p.attrs["bias"]:
            out["bias"] = self._bias(p, gen, dist, device)
        return out

    def _bias(self, p: Problem, gen: torch.Generator, dist: str, device: Any) -> torch.Tensor:
        """An additive mask: values from ``dist`` (normal for large), about a fifth of them -inf, and the
        first query of each head fully masked (its row is 0, as torch gives)."""
        sh = self._shapes(p)["bias"]
        b = draw(sh, "normal" if dist == "large" else dist, gen, p.dtype, device)
        g = on_device(gen, device)
        b = b.masked_fill(torch.rand(sh, generator=g, device=device) < 0.2, float("-inf"))
        b[:, :, 0, :] = float("-inf")
        return b

    def exact_inputs(self, p: Problem, gen: torch.Generator, device: Any = "cpu") -> None:
        return None  # exp: never exact on small integers

    def flops(self, p: Problem) -> float:
        d = self.dims(p)
        return self.FLOP_PER_PAIR(d) * d["Hq"] * self.pairs(p)

    def pairs(self, p: Problem) -> float:
        """Visible (query, key) pairs per head, summed over sequences (packed: as if the tokens were split
        evenly, the expected work of a random split)."""
        d = self.dims(p)
        if p.attrs["varlen"]:
            sq, sk = max(1, d["Sq"] // d["B"]), max(1, d["Sk"] // d["B"])
            return float(d["B"] * visible_pairs(p.attrs, sq, sk))
        return float(d["B"] * visible_pairs(p.attrs, d["Sq"], d["Sk"]))

    @staticmethod
    def FLOP_PER_PAIR(d: Mapping[str, int]) -> float:
        return 2.0 * (d["D"] + d["Dv"])


class AttentionSpec(_AttentionSpec):
    """``attention``: outputs ``(out, lse)``; see the module docstring."""

    name = "attention"

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        return {**self._qkv(p, gen, dist, device), **self._cu(p, gen, device)}

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        sh = self._shapes(p)
        return ((sh["out"], p.dtype), (sh["lse"], torch.float32))

    def _run(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any], naive: bool):
        q = inputs["q"]
        shp = {"q": q.shape, "v": inputs["v"].shape}
        if attrs.get("varlen"):
            out = q.new_empty((q.shape[0], q.shape[1], shp["v"][-1]))
            lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float64 if q.dtype == torch.float64
                              else torch.float32, device=q.device)
        else:
            out = q.new_empty(q.shape[:-1] + (shp["v"][-1],))
            lse = torch.empty(q.shape[:-1], dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,
                              device=q.device)
        for idx, seg in _segments(inputs, ("q", "k", "v"), attrs):
            o, l_ = _forward_one(seg["q"], seg["k"], seg["v"], attrs, naive, seg.get("bias"))
            if attrs.get("varlen"):
                out[idx[0]] = o.transpose(0, 1)
                lse[:, idx[0]] = l_
            else:
                out[idx] = o
                lse[idx] = l_
        return out, lse

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        """In float64 (the oracle) exactly; in a working dtype as torch's math formulation rounds it
        (scores and p in the dtype, softmax in fp32, lse in fp32)."""
        return self._run(inputs, attrs, naive=inputs["q"].dtype != torch.float64)

    def oracle(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[Any, Any]:
        x64 = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in inputs.items()}
        ref = self.reference(x64, attrs)
        return ref, self._error_scale(x64, attrs, fp16=inputs["q"].dtype == torch.float16, ref=ref)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        return self._error_scale(inputs64, attrs, fp16=True)

    def _error_scale(self, x64, attrs, fp16: bool, ref=None):
        out, lse = ref if ref is not None else self.reference(x64, attrs)
        s_out, s_lse = torch.zeros_like(out), torch.zeros_like(lse)
        for idx, seg in _segments({**x64, "out": out}, ("q", "k", "v", "out"), attrs):
            q, k, v, o = seg["q"], seg["k"], seg["v"], seg["out"]
            sq, sk = q.shape[1], k.shape[1]
            n = 2 * sk + 4 * q.shape[-1] + 32
            kap = _kappa(q, k, attrs, seg.get("bias"))
            _, p = self._probs(q, k, attrs, seg.get("bias"))
            g = q.shape[0] // k.shape[0]
            va = v.abs().repeat_interleave(g, dim=0)
            lsum = p.sum(-1, keepdim=True)
            w = torch.matmul(p, va) / torch.where(lsum == 0, torch.ones_like(lsum), lsum) + o.abs().nan_to_num()
            sc = (1 + 2 * kap) * w
            if fp16:
                sc = sc + torch.matmul(visible(attrs, sq, sk).to(va.dtype), va) / torch.where(
                    lsum == 0, torch.ones_like(lsum), lsum) / (2 * n)
            sc = sc + sk * _FP32_FLUSH / _U
            scl = (2 + 2 * kap).squeeze(-1).expand(q.shape[0], sq)
            if attrs.get("varlen"):
                s_out[idx[0]] = sc.transpose(0, 1)
                s_lse[:, idx[0]] = scl
            else:
                s_out[idx] = sc
                s_lse[idx] = scl
        return s_out, s_lse

    @staticmethod
    def _probs(q, k, attrs, bias=None):
        s = _scores(q, k, attrs, naive=False, bias=bias).masked_fill(~visible(attrs, q.shape[1], k.shape[1]), float("-inf"))
        m = s.amax(-1, keepdim=True).nan_to_num(nan=0.0) if s.shape[-1] else s.new_zeros(s.shape[:-1] + (1,))
        m = torch.where(m.isinf(), torch.zeros_like(m), m)
        p = torch.exp(s - m).nan_to_num(nan=0.0)
        return s, p

    def contract(self, p: Problem) -> tuple[ErrorContract, ErrorContract]:
        d = self.dims(p)
        dt = p.dtype_name
        n = 2 * d["Sk"] + 4 * d["D"] + 32
        u_p = 0.0 if p.dtype == torch.float32 else UNIT_ROUNDOFF[dt]
        return (ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=_U, reduction_len=n, u_operand=u_p),
                ErrorContract(out_dtype="float32", u_out=_U, u_acc=_U, reduction_len=n))

    def min_bytes(self, p: Problem) -> float:
        d = self.dims(p)
        e = p.dtype.itemsize
        nb = 1 if p.attrs["varlen"] else d["B"]
        return float(nb * e * (d["Hq"] * d["Sq"] * (d["D"] + d["Dv"]) + d["H"] * d["Sk"] * (d["D"] + d["Dv"]))
                     + nb * 4 * d["Hq"] * d["Sq"])


class AttentionBackwardSpec(_AttentionSpec):
    """``attention_backward``: ``(dq, dk, dv)`` from q, k, v, out, lse and dout; see the module docstring."""

    name = "attention_backward"
    forward = AttentionSpec()

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """q, k, v from ``dist`` (normal for ``large`` and ``specials``); out and lse the forward's oracle
        rounded (out to the dtype); dout from ``dist``, scaled for ``large`` so the gradients stay finite.
        ``specials`` puts its special values in out (one NaN, +inf, -inf) and lse (one NaN): what a
        forward with special inputs leaves (module docstring). An lse of -inf only where the forward
        gives it (a row that saw no finite score)."""
        fwd_p = self.forward.problem(dict(p.shape), p.dtype, dict(p.attrs))
        x = self.forward.make_inputs(fwd_p, gen, dist if dist not in ("large", "specials") else "normal", device)
        o64, lse64 = self.forward.reference({k: v.double() if v.is_floating_point() else v for k, v in x.items()},
                                            p.attrs)
        d = self.dims(p)
        fmax = float(torch.finfo(p.dtype).max)
        s_do = min(fmax ** 0.5 / 4, fmax / (16 * (d["Sq"] + d["Sk"]) * max(d["D"], d["Dv"]))) if dist == "large" else 1.0
        do = draw(self._shapes(p)["out"], "normal" if dist == "specials" else dist, gen, p.dtype, device, s_do)
        out, lse = o64.to(p.dtype), lse64.float()
        if dist == "specials":
            sp = draw(tuple(out.shape), "specials", gen, p.dtype, device)  # one NaN, +inf and -inf
            out = torch.where(torch.isfinite(sp), out, sp)
            flat = lse.reshape(-1).clone()
            flat[int(torch.randint(0, flat.numel(), (1,), generator=gen))] = float("nan")
            lse = flat.reshape(lse.shape)
        return {**x, "out": out, "lse": lse, "dout": do}

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        sh = self._shapes(p)
        return ((sh["q"], p.dtype), (sh["k"], p.dtype), (sh["v"], p.dtype))

    def _run(self, inputs, attrs, naive: bool, want_scale: bool = False, fp16: bool = False):
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        scales = [torch.zeros_like(dq), torch.zeros_like(dk), torch.zeros_like(dv)] if want_scale else None
        names = ("q", "k", "v", "out", "lse", "dout")
        for idx, seg in _segments(inputs, names, attrs):
            a, b_, c = _backward_one(seg["q"], seg["k"], seg["v"], seg["out"], seg["lse"], seg["dout"], attrs, naive,
                                       seg.get("bias"))[:3]
            parts = [a, b_, c]
            if want_scale:
                sc = self._scale_one(seg, attrs, fp16)
            for i, t in enumerate(parts):
                key = idx if not attrs.get("varlen") else idx[0 if i == 0 else 1]
                if attrs.get("varlen"):
                    (dq, dk, dv)[i][key] = t.transpose(0, 1)
                    if want_scale:
                        scales[i][key] = sc[i].transpose(0, 1)
                else:
                    (dq, dk, dv)[i][key] = t
                    if want_scale:
                        scales[i][key] = sc[i]
        return ((dq, dk, dv), tuple(scales)) if want_scale else (dq, dk, dv)

    def _scale_one(self, seg, attrs, fp16: bool):
        q, k, v, o, lse, do = (seg[n] for n in ("q", "k", "v", "out", "lse", "dout"))
        hq, h = q.shape[0], k.shape[0]
        g = hq // h
        sq, sk = q.shape[1], k.shape[1]
        n = 2 * max(sq, sk) + 4 * (q.shape[-1] + v.shape[-1]) + 32
        scale = softmax_scale(attrs, q.shape[-1])
        bias = seg.get("bias")
        _, _, _, (p, dp, delta) = _backward_one(q, k, v, o, lse, do, attrs, naive=False, bias=bias)
        p, dp, delta = (t.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).abs() for t in (p, dp, delta))
        kap = _kappa(q, k, attrs, bias)
        va = v.abs().repeat_interleave(g, dim=0)
        # non-finite entries make their own rows' oracle non-finite (not compared): 0 here, not 0 * inf
        doa, oa = do.abs().nan_to_num(nan=0.0, posinf=0.0), o.abs().nan_to_num(nan=0.0, posinf=0.0)
        t = p * ((dp + delta[..., None]) * (1 + 2 * kap) + torch.matmul(doa, va.transpose(-1, -2))
                 + (doa * oa).sum(-1, keepdim=True))
        ka, qa = k.abs().nan_to_num(posinf=0.0).repeat_interleave(g, dim=0), q.abs().nan_to_num(posinf=0.0)
        s_dq = scale * torch.matmul(t, ka)
        s_dk = (scale * torch.matmul(t.transpose(-1, -2), qa)).reshape(h, g, sk, -1).sum(1)
        s_dv = torch.matmul((p * (1 + 2 * kap)).transpose(-1, -2), doa).reshape(h, g, sk, -1).sum(1)
        flush = (sq + sk) * _FP32_FLUSH / _U
        if fp16:  # P and dS below fp16's subnormals are lost before the products
            vis = visible(attrs, sq, sk).to(q.dtype).expand(hq, sq, sk)
            s_dq = s_dq + scale * torch.matmul(vis, ka) / (2 * n)
            s_dk = s_dk + (scale * torch.matmul(vis.transpose(-1, -2), qa)).reshape(h, g, sk, -1).sum(1) / (2 * n)
            s_dv = s_dv + torch.matmul(vis.transpose(-1, -2), doa).reshape(h, g, sk, -1).sum(1) / (2 * n)
        return s_dq + flush, s_dk + flush, s_dv + flush

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        """The formula of the module docstring: float64 for the oracle; in a working dtype naively (the
        products in the dtype, P and dS rounded to it, the softmax pieces in fp32)."""
        return self._run(inputs, attrs, naive=inputs["q"].dtype != torch.float64)

    def oracle(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[Any, Any]:
        x64 = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in inputs.items()}
        return self._run(x64, attrs, naive=False, want_scale=True, fp16=inputs["q"].dtype == torch.float16)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        return self._run(inputs64, attrs, naive=False, want_scale=True, fp16=True)[1]

    def contract(self, p: Problem) -> tuple[ErrorContract, ...]:
        d = self.dims(p)
        dt = p.dtype_name
        n = 2 * max(d["Sq"], d["Sk"]) + 4 * (d["D"] + d["Dv"]) + 32
        u_p = 0.0 if p.dtype == torch.float32 else UNIT_ROUNDOFF[dt]
        c = ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=_U, reduction_len=n, u_operand=u_p)
        return (c, c, c)

    def large_scale(self, p: Problem) -> float:
        return 1.0

    @staticmethod
    def FLOP_PER_PAIR(d: Mapping[str, int]) -> float:
        return 2.0 * (3 * d["D"] + 2 * d["Dv"])  # recompute s, dP, dV, dQ, dK

    def min_bytes(self, p: Problem) -> float:
        d = self.dims(p)
        e = p.dtype.itemsize
        nb = 1 if p.attrs["varlen"] else d["B"]
        q_side = d["Hq"] * d["Sq"] * (2 * d["D"] + 2 * d["Dv"]) * e + 4 * d["Hq"] * d["Sq"]  # q, dq, out, dout, lse
        k_side = d["H"] * d["Sk"] * 2 * (d["D"] + d["Dv"]) * e  # k, v, dk, dv
        return float(nb * (q_side + k_side))


def check_cu_seqlens(name: str, cu: torch.Tensor, total: int, batch: int | None = None) -> int:
    """Validate a cu_seqlens tensor (int32, 1-D, from 0 to ``total``, non-decreasing); returns the
    number of sequences."""
    if not isinstance(cu, torch.Tensor) or cu.dim() != 1 or cu.dtype != torch.int32 or cu.numel() < 2:
        raise InvalidInputError(name, "a 1-D int32 tensor of B + 1 >= 2 offsets",
                                f"{tuple(cu.shape)} {cu.dtype}" if isinstance(cu, torch.Tensor) else type(cu).__name__)
    if batch is not None and cu.numel() != batch + 1:
        raise InvalidInputError(f"length of {name}", f"{batch + 1} (as cu_seqlens_q)", cu.numel())
    c = cu.to("cpu", torch.int64)
    if int(c[0]) != 0 or int(c[-1]) != total or bool((c[1:] < c[:-1]).any()):
        raise InvalidInputError(name, f"non-decreasing offsets from 0 to {total} (the packed token count)",
                                c.tolist() if c.numel() <= 16 else f"{c[:8].tolist()}... ending {int(c[-1])}")
    return cu.numel() - 1


ATTENTION = AttentionSpec()
ATTENTION_BACKWARD = AttentionBackwardSpec()
SPECS = (ATTENTION, ATTENTION_BACKWARD)

__all__ = ["AttentionSpec", "AttentionBackwardSpec", "ATTENTION", "ATTENTION_BACKWARD", "SPECS", "ALIGNS",
           "softmax_scale", "visible", "visible_pairs", "diagonal", "split_lengths", "cu_seqlens", "check_cu_seqlens"]


class MergeStatesSpec(OpSpec):
    """``merge_attention_states``: two partial attentions over disjoint key sets, combined.

    Inputs out_a, out_b (M, N) in the dtype (M: the flattened rows, N: the head dim) and lse_a,
    lse_b (M,) float32; outputs out (M, N) in the dtype and lse (M,) float32:
    ``m = max(lse_a, lse_b)`` (0 where both are -inf), ``w_x = exp(lse_x - m)``,
    ``lse = m + log(w_a + w_b)``, ``out = (w_a out_a + w_b out_b) / (w_a + w_b)`` (0 where both rows
    are empty). NaN propagates; a +inf lse gives NaN (``inf - inf``).

    Error contract: ``w_x`` has relative error ``<= (3 d + 4) u`` (``d = |lse_x - m|``, the
    condition of exp), the sums, products and the division a few u more, so ``out`` is within
    ``u_out |out| + 16 u (1 + d_max) (W + |out|)`` with ``W = (w_a |out_a| + w_b |out_b|) / l``,
    and lse within ``u |lse| + 16 u (1 + d_max)``.
    """

    name = "merge_attention_states"
    axes = (Axis("M", "rows (every leading dimension, sequence positions included)", max_size=2**31 - 256),
            Axis("N", "head dim", max_size=1024))
    dtypes = (torch.float16, torch.bfloat16, torch.float32)
    attr_choices: Mapping[str, Any] = {}

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        M, N = p.shape["M"], p.shape["N"]
        scale = float(torch.finfo(p.dtype).max) ** 0.5 / 4 if dist == "large" else 1.0
        ldist = "normal" if dist in ("large", "tiny") else dist
        la, lb = (draw((M,), ldist, gen, torch.float32, device) * 4 for _ in range(2))
        la[0] = float("-inf")  # row 0: a empty; the last row: both empty
        la[-1], lb[-1] = (float("-inf"), float("-inf")) if M > 1 else (la[-1], lb[-1])
        return {"out_a": draw((M, N), dist, gen, p.dtype, device, scale), "lse_a": la,
                "out_b": draw((M, N), dist, gen, p.dtype, device, scale), "lse_b": lb}

    def exact_inputs(self, p: Problem, gen: torch.Generator, device: Any = "cpu") -> None:
        return None

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["M"], p.shape["N"]), p.dtype), ((p.shape["M"],), torch.float32))

    @staticmethod
    def _weights(la: torch.Tensor, lb: torch.Tensor):
        m = torch.maximum(la, lb)
        m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
        wa, wb = torch.exp(la - m), torch.exp(lb - m)
        return m, wa, wb, wa + wb

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        oa, ob = inputs["out_a"], inputs["out_b"]
        ct = torch.float64 if oa.dtype == torch.float64 else torch.float32
        m, wa, wb, l_ = self._weights(inputs["lse_a"].to(ct), inputs["lse_b"].to(ct))
        inv = 1.0 / torch.where(l_ == 0, torch.ones_like(l_), l_)
        out = oa.to(ct) * (wa * inv)[:, None] + ob.to(ct) * (wb * inv)[:, None]
        return out.to(oa.dtype), (m + torch.log(l_)).to(torch.float64 if ct == torch.float64 else torch.float32)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        la, lb = inputs64["lse_a"], inputs64["lse_b"]
        m, wa, wb, l_ = self._weights(la, lb)
        fin = lambda t: t.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)  # noqa: E731
        d = torch.maximum(fin((la - m).abs()), fin((lb - m).abs()))
        inv = 1.0 / torch.where(l_ == 0, torch.ones_like(l_), l_)
        w = fin(wa * inv)[:, None] * fin(inputs64["out_a"].abs()) + fin(wb * inv)[:, None] * fin(inputs64["out_b"].abs())
        out = self.reference(inputs64, attrs)[0]
        g = gamma(16, _U) + _U
        return (16 * _U * (1 + d)[:, None] * (w + fin(out.abs())) / g, 16 * _U * (1 + d) / g)

    def contract(self, p: Problem) -> tuple[ErrorContract, ErrorContract]:
        dt = p.dtype_name
        return (ErrorContract(out_dtype=dt, u_out=UNIT_ROUNDOFF[dt], u_acc=_U, reduction_len=16),
                ErrorContract(out_dtype="float32", u_out=_U, u_acc=_U, reduction_len=16))

    def flops(self, p: Problem) -> float:
        return 8.0 * p.shape["M"] * p.shape["N"]

    def min_bytes(self, p: Problem) -> float:
        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        return float(M * (3 * N * e + 12))


MERGE_ATTENTION_STATES = MergeStatesSpec()
SPECS = SPECS + (MERGE_ATTENTION_STATES,)
__all__ += ["MergeStatesSpec", "MERGE_ATTENTION_STATES"]
