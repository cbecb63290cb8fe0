"""warpsmith.patch(model, attention=True): a tiny random Llama-family model (built from a config,
nothing downloaded) runs its attention on warpsmith::attention through transformers'
AttentionInterface, and trains like the SDPA model."""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the dev extra installs transformers")

import warpsmith  # noqa: E402


def tiny(family: str, attn: str = "sdpa"):
    cls_cfg = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig}[family]
    extra = {"sliding_window": 4} if family == "mistral" else {}
    cfg = cls_cfg(vocab_size=97, hidden_size=48, intermediate_size=48, num_hidden_layers=2, num_attention_heads=6,
                  num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False,
                  attn_implementation=attn, **extra)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).float()


def step(model, mask=None):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 97, (2, 11), generator=g)
    out = model(input_ids=ids, labels=ids, attention_mask=mask)
    out.loss.backward()
    return out.loss.item(), out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("family, padded", [("llama", False), ("mistral", True)])
def test_patched_attention_matches_sdpa(monkeypatch, family, padded):
    """Llama: no mask (causal flag); Mistral: a sliding window of 4 and left padding (a mask, whose
    padded queries see no key: 0, as SDPA gives)."""
    import importlib

    attn_op = importlib.import_module("warpsmith.ops.attention.op")  # (warpsmith.ops.attention is the function)

    calls = []
    real = attn_op.launch
    monkeypatch.setattr(attn_op, "launch", lambda p, *a, **k: calls.append(p.op) or real(p, *a, **k))
    ref = tiny(family)
    model = copy.deepcopy(ref)
    report = warpsmith.patch(model, rms_norm=False, mlp=False, rope=False, loss=None, attention=True)
    assert report.attention == "warpsmith" and model.config._attn_implementation == "warpsmith"
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, :3] = 0
    for m in ([mask] if padded else [None]):
        l_ref, y_ref, g_ref = step(ref, m)
        l_got, y_got, g_got = step(model, m)
        ref.zero_grad()
        model.zero_grad()
        assert abs(l_ref - l_got) <= 1e-5 * abs(l_ref)
        torch.testing.assert_close(y_got, y_ref, rtol=1e-5, atol=1e-5)
        for n, g in g_ref.items():
            torch.testing.assert_close(g_got[n], g, rtol=1e-4, atol=1e-6)
    assert calls.count("attention") == 2 and calls.count("attention_backward") == 2  # both layers ran on warpsmith
