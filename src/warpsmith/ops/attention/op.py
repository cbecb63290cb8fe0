"""``warpsmith.ops.attention``, ``scaled_dot_product_attention`` and ``merge_attention_states``.

``warpsmith::attention`` (outputs ``(out, lse)``) and ``warpsmith::attention_backward`` (outputs
``(dq, dk, dv)``): torch.library custom ops with fake (meta) kernels and autograd. The forward
saves q, k, v, out and lse; its backward is the backward op on them (deterministic: no atomics).
The lse output is not differentiable (its gradient is ignored; use the output's). A score bias
(attention mask) is never differentiated.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import torch

from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...dispatch import launch
from ..shared.validate import check_device, check_dtype, check_tensor
from .spec import ALIGNS, ATTENTION, ATTENTION_BACKWARD, MAX_HEAD_DIM, MERGE_ATTENTION_STATES, check_cu_seqlens
from .variant import VARIANTS, max_seqlen

Tensor = torch.Tensor
CAUSAL_CHOICES = (False, True, "top_left", "bottom_right")


def _attrs(causal: bool, align: str, window_left: int, window_right: int, scale: float, softcap: float,
           varlen: bool, bias: bool) -> dict:
    return {"causal": causal, "align": align, "window_left": window_left, "window_right": window_right,
            "scale": scale, "softcap": softcap, "varlen": varlen, "bias": bias}


def problem_of(op: str, q: Tensor, k: Tensor, v: Tensor, cu_q: Optional[Tensor], attrs: dict) -> Problem:
    """The Problem a (validated) call solves."""
    spec = ATTENTION if op == "attention" else ATTENTION_BACKWARD
    if cu_q is not None:
        shape = {"Sq": q.shape[0], "B": cu_q.numel() - 1, "Sk": k.shape[0], "H": k.shape[1], "D": q.shape[-1],
                 "G": q.shape[1] // k.shape[1]}
    else:
        shape = {"Sq": q.shape[2], "B": q.shape[0], "Sk": k.shape[2], "H": k.shape[1], "D": q.shape[-1],
                 "G": q.shape[1] // k.shape[1]}
    if v.shape[-1] != q.shape[-1]:
        shape["Dv"] = v.shape[-1]
    return spec.problem(shape, q.dtype, attrs)


def _inputs(q, k, v, cu_q, cu_k, bias) -> dict:
    out = {"q": q, "k": k, "v": v}
    if cu_q is not None:
        out.update(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    if bias is not None:
        out["bias"] = bias
    return out


@torch.library.custom_op("warpsmith::attention", mutates_args=())
def attention_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
                 bias: Optional[Tensor], causal: bool, align: str, window_left: int, window_right: int, scale: float,
                 softcap: float) -> tuple[Tensor, Tensor]:
    if _empty(q, k, cu_seqlens_q):  # no query, or no key to see: nothing to launch (as torch's SDPA)
        return (q.new_zeros(q.shape[:-1] + (v.shape[-1],)),
                torch.full(q.shape[:-1], float("-inf"), dtype=torch.float32, device=q.device))
    attrs = _attrs(causal, align, window_left, window_right, scale, softcap, cu_seqlens_q is not None, bias is not None)
    p = problem_of("attention", q, k, v, cu_seqlens_q, attrs)
    return launch(p, VARIANTS, _inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, bias))


def _empty(q: Tensor, k: Tensor, cu_q: Optional[Tensor]) -> bool:
    """An unpacked call with an empty batch, no query or no key: out is 0 (empty, or every query sees no
    key: out = 0, lse = -inf), its gradients 0; no kernel runs."""
    return cu_q is None and (q.numel() == 0 or k.numel() == 0)


@attention_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, bias, causal, align, window_left, window_right, scale, softcap):
    if cu_seqlens_q is not None:
        return q.new_empty(q.shape[:-1] + (v.shape[-1],)), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    return q.new_empty(q.shape[:-1] + (v.shape[-1],)), q.new_empty(q.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("warpsmith::attention_backward", mutates_args=())
def attention_backward_op(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, dout: Tensor,
                          cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], bias: Optional[Tensor],
                          causal: bool, align: str, window_left: int, window_right: int, scale: float,
                          softcap: float) -> tuple[Tensor, Tensor, Tensor]:
    if _empty(q, k, cu_seqlens_q):  # out did not depend on q, k or v
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    attrs = _attrs(causal, align, window_left, window_right, scale, softcap, cu_seqlens_q is not None, bias is not None)
    p = problem_of("attention_backward", q, k, v, cu_seqlens_q, attrs)
    inputs = {**_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, bias), "out": out, "lse": lse.contiguous(),
              "dout": dout if dout.stride(-1) == 1 else dout.contiguous()}
    return launch(p, VARIANTS, inputs)


@attention_backward_op.register_fake
def _(q, k, v, out, lse, dout, cu_seqlens_q, cu_seqlens_k, bias, causal, align, window_left, window_right, scale,
      softcap):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


_ARGS = ("causal", "align", "window_left", "window_right", "scale", "softcap")


def _setup(ctx, inputs, output):
    q, k, v, cu_q, cu_k, bias = inputs[:6]
    ctx.attrs = dict(zip(_ARGS, inputs[6:]))
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, bias)
    ctx.mark_non_differentiable(lse)


def _grad(ctx, dout, dlse):
    q, k, v, out, lse, cu_q, cu_k, bias = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    dq, dk, dv = attention_backward_op(q, k, v, out, lse, dout, cu_q, cu_k, bias, **ctx.attrs)
    return dq, dk, dv, None, None, None, None, None, None, None, None, None


attention_op.register_autograd(_grad, setup_context=_setup)


# ---- public functions ----------------------------------------------------------------------------
def _window(window: Union[None, int, Sequence[Optional[int]]], causal: bool) -> tuple[int, int]:
    if window is None:
        return -1, -1
    if isinstance(window, bool):
        raise InvalidInputError("window", "None, an int or a (left, right) pair", window)
    if isinstance(window, int):
        if window < 0:
            raise InvalidInputError("window", "a non-negative int", window)
        return window, (0 if causal else window)
    try:
        left, right = window
    except (TypeError, ValueError):
        raise InvalidInputError("window", "None, an int or a (left, right) pair", window) from None
    out = []
    for side in (left, right):
        if side is None or (isinstance(side, int) and not isinstance(side, bool) and side == -1):
            out.append(-1)
        elif isinstance(side, int) and not isinstance(side, bool) and side >= 0:
            out.append(side)
        else:
            raise InvalidInputError("window sides", "non-negative ints, or None / -1 for unbounded", window)
    return out[0], out[1]


def _causal(causal: Union[bool, str], alignment: Optional[str]) -> tuple[bool, str]:
    if causal not in CAUSAL_CHOICES or (not isinstance(causal, (bool, str))):
        raise InvalidInputError("causal", "False, True, 'top_left' or 'bottom_right'", causal)
    if alignment is not None and alignment not in ALIGNS:
        raise InvalidInputError("alignment", "None, 'bottom_right' or 'top_left'", alignment)
    if isinstance(causal, str):
        if alignment is not None and alignment != causal:
            raise InvalidInputError("alignment", f"{causal!r} (as causal) or None", alignment)
        return True, causal
    return bool(causal), alignment or "bottom_right"


def _validate(q, k, v, cu_q, cu_k, bias) -> tuple[Tensor, Tensor, Tensor, Optional[Tensor]]:
    q, k, v = check_tensor("q", q), check_tensor("k", k), check_tensor("v", v)
    for n, t in (("q", q), ("k", k), ("v", v)):
        check_dtype(n, t, ATTENTION.dtypes)
        check_device(n, t)
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise InvalidInputError("dtypes of k and v", f"{q.dtype} (as q)", f"{k.dtype}, {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise InvalidInputError("devices of k and v", str(q.device), f"{k.device}, {v.device}")
    packed = cu_q is not None or cu_k is not None
    nd = 3 if packed else 4
    layout = "(total_tokens, heads, head_dim)" if packed else "(batch, heads, seq, head_dim)"
    for n, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != nd:
            raise InvalidInputError(f"shape of {n}", f"{nd} dimensions {layout}", tuple(t.shape))
    hq, h = q.shape[-3] if not packed else q.shape[1], k.shape[1]
    if packed:
        if cu_q is None or cu_k is None:
            raise InvalidInputError("cu_seqlens_q / cu_seqlens_k", "both given (packed sequences) or neither", "one")
        if k.shape[:2] != v.shape[:2]:
            raise InvalidInputError("shape of v", f"({k.shape[0]}, {k.shape[1]}, Dv) (as k)", tuple(v.shape))
        b = check_cu_seqlens("cu_seqlens_q", cu_q, q.shape[0])
        check_cu_seqlens("cu_seqlens_k", cu_k, k.shape[0], batch=b)
        for n, t in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
            if t.device != q.device:
                raise InvalidInputError(f"device of {n}", str(q.device), str(t.device))
        if bias is not None:
            raise InvalidInputError("attn_mask", "None for packed sequences (use causal / window)", "a mask")
    else:
        if k.shape[0] != q.shape[0] or v.shape[:3] != k.shape[:3]:
            raise InvalidInputError("shapes of k and v", f"(B={q.shape[0]}, H, Sk, D) and (B, H, Sk, Dv) agreeing",
                                    f"{tuple(k.shape)}, {tuple(v.shape)}")
    if h == 0 or hq % h:
        raise InvalidInputError("heads", f"query heads a multiple of key/value heads (GQA)", f"{hq} and {h}")
    if k.shape[-1] != q.shape[-1]:
        raise InvalidInputError("head dim of k", f"{q.shape[-1]} (as q)", k.shape[-1])
    for n, dim in (("q", q.shape[-1]), ("v", v.shape[-1])):
        if not 1 <= dim <= MAX_HEAD_DIM:
            raise InvalidInputError(f"head dim of {n}", f"1..{MAX_HEAD_DIM}", dim)
    if packed and (q.numel() == 0 or k.numel() == 0):  # unpacked: an empty batch or sequence is fine (as torch)
        raise InvalidInputError("q, k", "non-empty packed tensors", f"{tuple(q.shape)}, {tuple(k.shape)}")
    q, k, v = (t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous() for t in (q, k, v))
    if bias is not None:
        want = (q.shape[0], hq, q.shape[2], k.shape[2])
        try:
            bias = bias.expand(want)
        except RuntimeError:
            raise InvalidInputError("shape of attn_mask", f"broadcastable to {want}", tuple(bias.shape)) from None
        if bias.device != q.device:
            raise InvalidInputError("device of attn_mask", str(q.device), str(bias.device))
    return q, k, v, bias


def attention(q: Tensor, k: Tensor, v: Tensor, causal: Union[bool, str] = False,
              window: Union[None, int, Sequence[Optional[int]]] = None, scale: Optional[float] = None,
              softcap: Optional[float] = None, cu_seqlens_q: Optional[Tensor] = None,
              cu_seqlens_k: Optional[Tensor] = None, return_lse: bool = False, *,
              alignment: Optional[str] = None) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """Scaled dot-product attention with FlashAttention-2's online softmax (differentiable).

    ``out_i = softmax_j(scale q_i . k_j) v_j`` over the keys query i sees. Head h of q attends with
    key/value head ``h // (Hq / H)`` (MHA, GQA with any ratio, MQA). Computed in fp32 (P rounded to
    the input dtype for the second product, as flash kernels do), out rounded once to the dtype.

    Args:
        q: (B, Hq, Sq, D), or packed (total_q, Hq, D) with ``cu_seqlens_q``; float16, bfloat16 or
            float32; any strides with a contiguous head dim (else copied). D <= 256 (any value).
        k: (B, H, Sk, D) or packed (total_k, H, D); Hq % H == 0.
        v: (B, H, Sk, Dv) or packed (total_k, H, Dv); Dv <= 256 may differ from D.
        causal: False; True or "bottom_right" (FlashAttention's convention: the last query sees the
            last key, i.e. key j is visible to query i iff ``j <= i + Sk - Sq``); "top_left" (torch
            SDPA's ``is_causal``: ``j <= i``). They agree when Sq == Sk.
        window: sliding window in FlashAttention's convention: (left, right) sees keys
            ``i + off - left <= j <= i + off + right`` (None / -1: unbounded side); an int w means
            (w, 0) when causal, else (w, w). ``off`` is the causal diagonal's offset (``alignment``).
        scale: score scale, default ``1/sqrt(D)``; positive.
        softcap: logit soft-capping ``c * tanh(s / c)`` (Gemma 2); None or 0 for none.
        cu_seqlens_q, cu_seqlens_k: int32 (B + 1,) offsets of packed sequences (both or neither).
        return_lse: also return the log-sum-exp of the scores (natural log), fp32, (B, Hq, Sq) or
            packed (Hq, total_q); not differentiable.
        alignment: the diagonal for the window when not causal ("bottom_right", the default, or
            "top_left"); with a string ``causal`` it must agree or be None.

    Returns:
        out: like q with head dim Dv, in q's dtype (contiguous); and lse if ``return_lse``.
        A query that sees no key gets out = 0 and lse = -inf (as torch's SDPA with a fully
        masked row). NaN: a NaN (or +inf) score makes its row NaN; see the family's spec. An empty
        batch (B = 0) or sequence (Sq or Sk = 0, unpacked) gives the empty (or all-zero) result and
        zero gradients without launching a kernel, as torch.

    Raises:
        InvalidInputError: bad shapes, dtypes, devices, head counts, cu_seqlens, window or causal.
    """
    q, k, v, _ = _validate(q, k, v, cu_seqlens_q, cu_seqlens_k, None)
    is_causal, align = _causal(causal, alignment)
    wl, wr = _window(window, is_causal)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0
                              or not math.isfinite(scale)):
        raise InvalidInputError("scale", "None or a positive finite number", scale)
    if softcap is not None and (isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or softcap < 0
                                or not math.isfinite(softcap)):
        raise InvalidInputError("softcap", "None, 0 or a positive finite number", softcap)
    if cu_seqlens_q is not None:  # sizes within the axes' ranges, before any launch
        problem_of("attention", q, k, v, cu_seqlens_q, _attrs(is_causal, align, wl, wr, float(scale or 0.0),
                                                                float(softcap or 0.0), True, False))
    out, lse = attention_op(q, k, v, cu_seqlens_q, cu_seqlens_k, None, is_causal, align, wl, wr,
                            float(scale or 0.0), float(softcap or 0.0))
    return (out, lse) if return_lse else out


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> Tensor:
    """Drop-in for ``torch.nn.functional.scaled_dot_product_attention`` (same arguments and semantics).

    (..., Hq, L, E) inputs with one leading batch dimension or none; ``is_causal`` is top-left aligned
    (torch's); ``attn_mask`` boolean (True: take part) or additive, broadcastable to (B, Hq, L, S);
    ``enable_gqa`` allows Hq a multiple of the key/value heads (else they must be equal, as torch
    requires). A fully masked row gives 0, as torch >= 2.5; an empty batch or sequence an empty (or zero)
    output, no kernel launched. Dropout is not supported.

    Raises:
        InvalidInputError: ``dropout_p != 0``, ``attn_mask`` together with ``is_causal``, a mask that
            requires grad, or anything :func:`attention` rejects.
    """
    if dropout_p != 0.0:
        raise InvalidInputError("dropout_p", "0.0 (warpsmith attention has no dropout)", dropout_p)
    if attn_mask is not None and is_causal:
        raise InvalidInputError("attn_mask", "None when is_causal is set (as torch)", "a mask")
    q, k, v = check_tensor("query", query), check_tensor("key", key), check_tensor("value", value)
    squeeze = q.dim() == 3
    if squeeze:
        q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise InvalidInputError("query/key/value", "(B, H, L, E) or (H, L, E) tensors",
                                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if not enable_gqa and q.shape[1] != k.shape[1]:
        raise InvalidInputError("heads", "equal query and key/value heads (or enable_gqa=True)",
                                f"{q.shape[1]} and {k.shape[1]}")
    bias = None
    if attn_mask is not None:
        m = check_tensor("attn_mask", attn_mask)
        if m.requires_grad:
            raise InvalidInputError("attn_mask", "a mask that does not require grad", "requires_grad=True")
        if squeeze and m.dim() == 4:
            raise InvalidInputError("attn_mask", "at most 3 dimensions for unbatched inputs", tuple(m.shape))
        if m.dtype == torch.bool:
            bias = torch.zeros(m.shape, dtype=q.dtype, device=m.device).masked_fill_(~m, float("-inf"))
        elif m.is_floating_point():
            bias = m
        else:
            raise InvalidInputError("dtype of attn_mask", "bool or a float dtype", str(m.dtype))
        while bias.dim() < 4:
            bias = bias.unsqueeze(0)
    q, k, v, bias = _validate(q, k, v, None, None, bias)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0):
        raise InvalidInputError("scale", "None or a positive number", scale)
    out, _ = attention_op(q, k, v, None, None, bias, bool(is_causal), "top_left", -1, -1, float(scale or 0.0), 0.0)
    return out.squeeze(0) if squeeze else out


def merge_attention_states(out_a: Tensor, lse_a: Tensor, out_b: Tensor, lse_b: Tensor) -> tuple[Tensor, Tensor]:
    """Combine two partial attentions over disjoint key sets (e.g. a cached prefix and new tokens):
    ``lse = logaddexp(lse_a, lse_b)``, ``out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b``.

    Args:
        out_a, out_b: (..., S, Dv) in one float dtype; lse_a, lse_b: (..., S) float32, as
            :func:`attention` returns them (``return_lse=True``).

    Returns:
        (out, lse): out in the outputs' dtype, lse fp32. A row empty on both sides (-inf twice)
        gives out = 0, lse = -inf; NaN propagates. Not differentiable.
    """
    for n, t in (("out_a", out_a), ("lse_a", lse_a), ("out_b", out_b), ("lse_b", lse_b)):
        check_tensor(n, t)
        check_device(n, t)
    check_dtype("out_a", out_a, MERGE_ATTENTION_STATES.dtypes)
    if out_a.dim() < 2 or out_a.numel() == 0:
        raise InvalidInputError("out_a", "a non-empty (..., S, Dv) tensor", tuple(out_a.shape))
    if out_b.shape != out_a.shape or out_b.dtype != out_a.dtype or out_b.device != out_a.device:
        raise InvalidInputError("out_b", f"{tuple(out_a.shape)} {out_a.dtype} on {out_a.device} (as out_a)",
                                f"{tuple(out_b.shape)} {out_b.dtype} on {out_b.device}")
    for n, t in (("lse_a", lse_a), ("lse_b", lse_b)):
        if t.shape != out_a.shape[:-1] or t.dtype != torch.float32 or t.device != out_a.device:
            raise InvalidInputError(n, f"{tuple(out_a.shape[:-1])} float32 on {out_a.device}",
                                    f"{tuple(t.shape)} {t.dtype} on {t.device}")
    n = out_a.shape[-1]
    oa, ob = out_a.reshape(-1, n), out_b.reshape(-1, n)
    oa, ob = (t if t.stride(-1) == 1 or n == 1 else t.contiguous() for t in (oa, ob))
    out, lse = merge_attention_states_op(oa, lse_a.reshape(-1).contiguous(), ob, lse_b.reshape(-1).contiguous())
    return out.view(out_a.shape), lse.view(lse_a.shape)


@torch.library.custom_op("warpsmith::merge_attention_states", mutates_args=())
def merge_attention_states_op(out_a: Tensor, lse_a: Tensor, out_b: Tensor, lse_b: Tensor) -> tuple[Tensor, Tensor]:
    p = MERGE_ATTENTION_STATES.problem({"M": out_a.shape[0], "N": out_a.shape[1]}, out_a.dtype)
    return launch(p, VARIANTS, {"out_a": out_a, "lse_a": lse_a, "out_b": out_b, "lse_b": lse_b})


@merge_attention_states_op.register_fake
def _(out_a, lse_a, out_b, lse_b):
    return out_a.new_empty(out_a.shape), lse_a.new_empty(lse_a.shape)


__all__ = ["attention_op", "attention_backward_op", "merge_attention_states_op", "attention", "scaled_dot_product_attention",
           "merge_attention_states", "problem_of"]
