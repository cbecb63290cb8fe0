"""``warpsmith.patch(model)``: run a Llama-family Hugging Face model's memory-bound layers on
warpsmith's verified kernels.

What it replaces, in one model (other models in the process are untouched):

- every ``<Family>RMSNorm`` module by :class:`warpsmith.nn.RMSNorm`, sharing the weight (the same
  ``Parameter``, so an optimizer built before patching keeps working);
- the gated MLP activation: ``down(act(gate(x)) * up(x))`` computes ``act(gate) * up`` with
  ``warpsmith.ops.swiglu`` (``hidden_act`` silu) or ``geglu`` (gelu / gelu_pytorch_tanh); the three
  projections stay ``nn.Linear``;
- rotary embedding: the modeling module's ``apply_rotary_pos_emb`` becomes a dispatcher that calls
  ``warpsmith.ops.rope_hf`` inside a patched model's attention layers and the original elsewhere;
- the loss: ``loss="cross_entropy"`` (default) sets the model's ``loss_function`` to one that shifts
  the labels as Hugging Face's causal-LM loss does and calls ``warpsmith.ops.cross_entropy``;
  ``loss="fused_linear"`` computes the loss from the last hidden states and ``lm_head`` with
  ``warpsmith.ops.fused_linear_cross_entropy`` and never materializes the logits (the output's
  ``logits`` is then None whenever ``labels`` are given); ``loss=None`` keeps the model's loss;
- attention (``attention=True``, off by default): registers ``"warpsmith"`` with Hugging Face's
  ``AttentionInterface`` (and ``AttentionMaskInterface``, with the SDPA mask builder) and switches
  the model to it: every attention layer then runs ``warpsmith::attention`` (GQA native, causal
  top-left as SDPA, the mask as an additive bias, softcap where the model passes one).

Supported families (tested on tiny random models built from a config): llama, mistral, qwen2.
"""
from __future__ import annotations

import contextvars
import dataclasses
import importlib
import types
from dataclasses import dataclass, field
from typing import Optional

import torch

from .core.errors import InvalidInputError

FAMILIES = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2"}
_GLU = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "gelu_pytorch_tanh": "geglu"}
_LOSSES = ("cross_entropy", "fused_linear", None)
_IN_PATCHED_ATTENTION: contextvars.ContextVar[int] = contextvars.ContextVar("warpsmith_rope", default=0)


@dataclass
class PatchReport:
    """What :func:`patch` replaced (counts per kind)."""

    family: str
    rms_norm: int = 0
    mlp: int = 0
    rope_attention_layers: int = 0
    loss: Optional[str] = None
    attention: Optional[str] = None
    skipped: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        text = (f"{self.family}: {self.rms_norm} RMSNorm, {self.mlp} MLP, {self.rope_attention_layers} attention "
                f"layers (RoPE), loss {self.loss or 'unchanged'}, attention {self.attention or 'unchanged'}")
        return text + (f"; skipped: {'; '.join(self.skipped)}" if self.skipped else "")


def _family(model: torch.nn.Module) -> str:
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in FAMILIES:
        raise InvalidInputError("model", "a Hugging Face model of type " + ", ".join(FAMILIES),
                                f"{type(model).__name__} (model_type {kind!r})")
    return kind


def _patched_rope(original):
    from .ops import rope_hf

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        if _IN_PATCHED_ATTENTION.get() and unsqueeze_dim == 1:
            return rope_hf(q, k, cos, sin)
        return original(q, k, cos, sin, unsqueeze_dim)

    apply_rotary_pos_emb.warpsmith_original = original
    return apply_rotary_pos_emb


def _enter(module, args, kwargs=None):
    module._warpsmith_token = _IN_PATCHED_ATTENTION.set(_IN_PATCHED_ATTENTION.get() + 1)


def _leave(module, args, output):
    _IN_PATCHED_ATTENTION.reset(module._warpsmith_token)


def _glu_forward(kind: str, approximate: str):
    from . import ops

    def forward(self, x):
        gate, up = self.gate_proj(x), self.up_proj(x)
        act = ops.swiglu(gate, up) if kind == "swiglu" else ops.geglu(gate, up, approximate=approximate)
        return self.down_proj(act)

    return forward


def _causal_lm_loss(logits, labels, vocab_size: int, num_items_in_batch=None, ignore_index: int = -100,
                    shift_labels=None, **_):
    """Hugging Face's causal-LM loss (labels shifted left, mean over counted tokens or sum / num_items)."""
    from .ops import cross_entropy

    if shift_labels is None:
        shift_labels = torch.nn.functional.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    logits = logits.reshape(-1, vocab_size)
    target = shift_labels.reshape(-1).to(logits.device)
    if num_items_in_batch is None:
        return cross_entropy(logits, target, ignore_index=ignore_index, reduction="mean")
    return cross_entropy(logits, target, ignore_index=ignore_index, reduction="sum") / num_items_in_batch


def _fused_forward(original):
    from transformers.modeling_outputs import CausalLMOutputWithPast

    from .ops import fused_linear_cross_entropy

    def forward(self, *args, labels=None, **kwargs):
        if labels is None:
            return original(self, *args, **kwargs)
        kwargs.pop("logits_to_keep", None)
        num_items = kwargs.pop("num_items_in_batch", None)
        outputs = self.model(*args, **kwargs)
        hidden = outputs.last_hidden_state
        target = torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:].reshape(-1).to(hidden.device)
        head = self.lm_head
        loss = fused_linear_cross_entropy(hidden.reshape(-1, hidden.shape[-1]), head.weight, target, head.bias,
                                          reduction="mean" if num_items is None else "sum")
        if num_items is not None:
            loss = loss / num_items
        # the cache field is ``cache`` in transformers 5, ``past_key_values`` before
        names = {f.name for f in dataclasses.fields(CausalLMOutputWithPast)}
        extra = {k: getattr(outputs, k, None) for k in ("cache", "past_key_values") if k in names}
        return CausalLMOutputWithPast(loss=loss, logits=None, hidden_states=outputs.hidden_states,
                                      attentions=outputs.attentions, **extra)

    return forward


ATTENTION_NAME = "warpsmith"


def hf_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attention_mask: Optional[torch.Tensor], dropout: float = 0.0, scaling: Optional[float] = None,
                         is_causal: Optional[bool] = None, **kwargs):
    """Hugging Face's attention-function signature on ``warpsmith::attention``: (B, H, S, D) query and
    key/value heads (GQA native), the mask (boolean or additive, as the SDPA mask builder makes it)
    as a score bias, ``is_causal`` top-left as SDPA (used only without a mask and for more than one
    query, as Hugging Face's SDPA path does), ``softcap`` when given. Returns ((B, S, H, Dv), None)."""
    from .ops.attention.op import attention_op, scaled_dot_product_attention

    if dropout:
        raise InvalidInputError("attention dropout", "0.0 (warpsmith attention has no dropout)", dropout)
    q_len = query.shape[2]
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = bool(q_len > 1 and attention_mask is None and is_causal)
    if attention_mask is not None and attention_mask.dim() == 4:
        attention_mask = attention_mask[:, :, :, : key.shape[2]]
    softcap = kwargs.get("softcap")
    if softcap:
        bias = None
        if attention_mask is not None:
            bias = attention_mask if attention_mask.dtype != torch.bool else torch.zeros(
                attention_mask.shape, dtype=query.dtype, device=query.device).masked_fill_(~attention_mask, float("-inf"))
            bias = bias.expand(query.shape[0], query.shape[1], q_len, key.shape[2])
        out, _ = attention_op(query, key, value, None, None, bias, is_causal, "top_left", -1, -1,
                              float(scaling or 0.0), float(softcap))
    else:
        out = scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, is_causal=is_causal,
                                           scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def register_attention() -> str:
    """Register :func:`hf_attention_forward` as ``"warpsmith"`` with transformers' attention (and mask)
    interfaces; returns the name."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(ATTENTION_NAME, hf_attention_forward)
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    return ATTENTION_NAME


def patch(model: torch.nn.Module, *, rms_norm: bool = True, mlp: bool = True, rope: bool = True,
          loss: Optional[str] = "cross_entropy", attention: bool = False) -> PatchReport:
    """Replace ``model``'s matching modules and functions with warpsmith's (in place; idempotent).

    Args:
        model: a Hugging Face ``LlamaForCausalLM`` / ``LlamaModel`` (or Mistral, Qwen2).
        rms_norm, mlp, rope: which parts to replace.
        loss: "cross_entropy", "fused_linear" (needs a ``*ForCausalLM`` with ``lm_head``) or None.
        attention: run attention on ``warpsmith::attention`` (registered with transformers'
            ``AttentionInterface`` as "warpsmith"; the model's attention implementation is switched).

    Returns:
        A :class:`PatchReport` of what was replaced.

    Raises:
        InvalidInputError: not a supported model family, or an unknown ``loss``.
    """
    from .nn import RMSNorm

    family = _family(model)
    if loss not in _LOSSES:
        raise InvalidInputError("loss", "cross_entropy, fused_linear or None", loss)
    prefix = FAMILIES[family]
    report = PatchReport(family)
    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    config = model.config

    if rms_norm:
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if type(child).__name__ == f"{prefix}RMSNorm":
                    new = RMSNorm(child.weight.shape[0], eps=child.variance_epsilon, device="meta")
                    new.weight = child.weight  # the same Parameter
                    setattr(parent, name, new)
                    report.rms_norm += 1

    if mlp:
        kind = _GLU.get(getattr(config, "hidden_act", None))
        if kind is None:
            report.skipped.append(f"MLP: hidden_act {config.hidden_act!r} has no warpsmith kernel")
        else:
            approximate = "tanh" if config.hidden_act == "gelu_pytorch_tanh" else "none"
            forward = _glu_forward(kind, approximate)
            for m in model.modules():
                if type(m).__name__ == f"{prefix}MLP" and not getattr(m, "_warpsmith_patched", False):
                    m.forward = types.MethodType(forward, m)
                    m._warpsmith_patched = True
                    report.mlp += 1

    if rope:
        if not hasattr(modeling.apply_rotary_pos_emb, "warpsmith_original"):
            modeling.apply_rotary_pos_emb = _patched_rope(modeling.apply_rotary_pos_emb)
        for m in model.modules():
            if type(m).__name__ == f"{prefix}Attention" and not getattr(m, "_warpsmith_rope", False):
                m.register_forward_pre_hook(_enter)
                m.register_forward_hook(_leave, always_call=True)
                m._warpsmith_rope = True
                report.rope_attention_layers += 1

    if loss == "cross_entropy":
        model.loss_function = _causal_lm_loss
        report.loss = loss
    elif loss == "fused_linear":
        if not hasattr(model, "lm_head"):
            raise InvalidInputError("model for loss='fused_linear'", "a *ForCausalLM model with an lm_head",
                                    type(model).__name__)
        if not getattr(model, "_warpsmith_fused", False):
            model.forward = types.MethodType(_fused_forward(type(model).forward), model)
            model._warpsmith_fused = True
        report.loss = loss
    if attention:
        name = register_attention()
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation(name)
        else:
            model.config._attn_implementation = name
        report.attention = name
    return report


__all__ = ["patch", "PatchReport", "FAMILIES", "hf_attention_forward", "register_attention"]
