"""warpsmith.patch on tiny random Llama-family models (built from a config, nothing downloaded):
a few training steps of the patched model against an unpatched copy."""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the dev extra installs transformers")

import warpsmith  # noqa: E402
import warpsmith.nn  # noqa: E402
from warpsmith.errors import InvalidInputError  # noqa: E402
from warpsmith import dispatch  # noqa: E402

# Every warpsmith op here is fp32 with reductions of at most 97 terms: each op's error contract
# allows a relative error of a few 1e-6 at most (gamma(97, 2^-24) = 5.8e-6). The comparison allows
# that much relative to the largest value, through two decoder layers, a loss and three SGD steps:
# 1e-5 (the measured drift is about 1e-6). A patch that is wrong (the negative control below
# changes only eps) exceeds it by orders of magnitude.
RTOL = 1e-5


def tiny(family: str = "llama", hidden_act: str = "silu"):
    cls_cfg = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig,
               "qwen2": transformers.Qwen2Config}[family]
    cfg = cls_cfg(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, hidden_act=hidden_act,
                  tie_word_embeddings=False, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).float()


def batch(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 97, (2, 9), generator=g)
    labels = ids.clone()
    labels[0, :2] = -100  # ignored positions
    return ids, labels


def train(model, steps: int = 3):
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses, grads = [], []
    for s in range(steps):
        ids, labels = batch(s)
        opt.zero_grad()
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        losses.append(loss.item())
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        opt.step()
    return losses, grads


def assert_close(ref, got):
    (l_ref, g_ref), (l_got, g_got) = ref, got
    for a, b in zip(l_ref, l_got):
        assert abs(a - b) <= RTOL * abs(a), (l_ref, l_got)
    for step_ref, step_got in zip(g_ref, g_got):
        for name, g in step_ref.items():
            err = (step_got[name] - g).abs().max().item()
            assert err <= RTOL * g.abs().max().item() + 1e-12, f"grad of {name}: error {err:.3e}"


@pytest.fixture
def ops_called(monkeypatch):
    seen = set()
    real = dispatch.select

    def spy(problem, variants):
        seen.add(problem.op)
        return real(problem, variants)

    monkeypatch.setattr(dispatch, "select", spy)
    return seen


@pytest.mark.parametrize("loss", ["cross_entropy", "fused_linear"])
def test_patched_llama_trains_like_the_original(loss, ops_called):
    ref_model = tiny()
    model = copy.deepcopy(ref_model)
    report = warpsmith.patch(model, loss=loss)
    assert (report.rms_norm, report.mlp, report.rope_attention_layers) == (5, 2, 2), str(report)
    assert_close(train(ref_model), train(model))
    expected = {"rms_norm", "rms_norm_backward", "swiglu", "swiglu_backward", "rope", "rope_backward"}
    expected |= {"cross_entropy", "cross_entropy_backward"} if loss == "cross_entropy" else {"fused_linear_cross_entropy"}
    assert expected <= ops_called, f"not dispatched: {expected - ops_called}"


def test_patch_keeps_parameters_and_state_dict():
    model = tiny()
    params = {n: p for n, p in model.named_parameters()}
    keys = set(model.state_dict())
    warpsmith.patch(model)
    assert {n: p for n, p in model.named_parameters()}.keys() == params.keys()
    assert all(p is params[n] for n, p in model.named_parameters())  # an optimizer built before still works
    assert set(model.state_dict()) == keys


def test_wrong_patch_is_caught_by_the_same_tolerance():
    """Negative control: the comparison above detects a subtly wrong replacement (eps 1e-6 -> 1e-2)."""
    ref_model = tiny()
    model = copy.deepcopy(ref_model)
    warpsmith.patch(model, mlp=False, rope=False, loss=None)
    for m in model.modules():
        if isinstance(m, warpsmith.nn.RMSNorm):
            m.eps = 1e-2
    with pytest.raises(AssertionError):
        assert_close(train(ref_model, 1), train(model, 1))


@pytest.mark.parametrize("family", ["mistral", "qwen2"])
def test_other_families_forward_matches(family):
    ref_model = tiny(family)
    model = copy.deepcopy(ref_model)
    warpsmith.patch(model)
    ids, labels = batch()
    with torch.no_grad():
        a, b = ref_model(input_ids=ids, labels=labels), model(input_ids=ids, labels=labels)
    assert abs(a.loss.item() - b.loss.item()) <= RTOL * abs(a.loss.item())
    assert (a.logits - b.logits).abs().max() <= RTOL * a.logits.abs().max()


def test_geglu_models_use_geglu(ops_called):
    model = tiny(hidden_act="gelu_pytorch_tanh")
    ref_model = copy.deepcopy(model)
    warpsmith.patch(model, loss=None)
    ids, _ = batch()
    with torch.no_grad():
        assert (ref_model(input_ids=ids).logits - model(input_ids=ids).logits).abs().max() <= \
            RTOL * ref_model(input_ids=ids).logits.abs().max()
    assert "geglu" in ops_called


def test_unsupported_models_and_options_are_refused():
    with pytest.raises(InvalidInputError, match="model_type"):
        warpsmith.patch(torch.nn.Linear(2, 2))
    with pytest.raises(InvalidInputError, match="loss"):
        warpsmith.patch(tiny(), loss="focal")


def test_rope_dispatcher_leaves_unpatched_models_alone(ops_called):
    patched, other = tiny(), tiny()
    warpsmith.patch(patched, loss=None)
    ops_called.clear()
    ids, _ = batch()
    with torch.no_grad():
        other(input_ids=ids)
    assert "rope" not in ops_called and "rms_norm" not in ops_called
