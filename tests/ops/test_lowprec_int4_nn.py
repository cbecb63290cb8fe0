"""warpsmith.nn.Int4Linear and warpsmith.quantize(model, scheme=...) on a tiny Hugging Face model."""
import pytest
import torch

import warpsmith
from warpsmith.errors import InvalidInputError
from warpsmith.nn import Int4Linear
from warpsmith.ops.lowprec.int4.formats import dequantize, quantize_int4
from warpsmith.quantization import SCHEMES, register_scheme

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("fmt", ["awq", "gptq"])
def test_int4_linear_from_linear_matches_its_dequantized_weight(fmt):
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 24)
    q = Int4Linear.from_linear(lin, 32, fmt)
    x = torch.randn(3, 64)
    w = dequantize(quantize_int4(lin.weight.detach().t(), 32, fmt), torch.float64)
    ref = x.half().double() @ w + lin.bias.detach().half().double()
    y = q(x)
    assert y.dtype == torch.float32 and y.shape == (3, 24)
    assert (y.double() - ref).abs().max() < 2e-3 * ref.abs().max()
    assert (y - lin(x)).abs().max() < 0.1 * lin(x).abs().max()  # quantization error: small, not zero
    assert "group_size=32" in repr(q)


def test_int4_linear_from_checkpoint_tensors_and_trivial_g_idx():
    pk = quantize_int4(torch.randn(64, 16), 32, "gptq")
    m = Int4Linear(pk.qweight, pk.qzeros, pk.scales, 32, "gptq", g_idx=pk.g_idx)
    assert m.g_idx is None  # k // G: no gather
    assert set(dict(m.named_buffers())) == {"qweight", "qzeros", "scales"}
    with pytest.raises(InvalidInputError, match="qzeros"):
        Int4Linear(pk.qweight, pk.qzeros[:1], pk.scales, 32, "gptq")


def _tiny():
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=False, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).float().eval()


@pytest.mark.parametrize("scheme", ["int4-awq"])  # int4-gptq: same path, Int4Linear tests cover GPTQ
def test_quantize_tiny_llama_stays_close(scheme):
    model = _tiny()
    ids = torch.randint(0, 97, (1, 4), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(ids).logits
        report = warpsmith.quantize(model, scheme, group_size=32)
        out = model(ids).logits
    assert len(report.replaced) == 7 and "lm_head" in report.kept  # q k v o gate up down
    assert isinstance(model.model.layers[0].mlp.down_proj, Int4Linear)
    assert isinstance(model.lm_head, torch.nn.Linear) and not isinstance(model.lm_head, Int4Linear)
    err = (out - ref).norm() / ref.norm()
    assert 1e-4 < err < 0.15, float(err)  # int4 RTN: close, and really quantized


def test_quantize_filter_layers_it_cannot_hold_and_registry():
    model = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.Linear(16, 16))  # K = 16: not a multiple of 32
    report = warpsmith.quantize(model, "int4-awq", group_size=32)
    assert report.replaced == ["0"] and "multiple of the group size" in report.kept["1"]
    model = torch.nn.Sequential(torch.nn.Linear(64, 16))
    assert warpsmith.quantize(model, "int4-awq", filter=lambda n, m: False, group_size=32).replaced == []
    with pytest.raises(InvalidInputError, match="scheme"):
        warpsmith.quantize(model, "int3")
    register_scheme("identity-test", lambda linear, **o: torch.nn.Identity())
    try:
        assert warpsmith.quantize(model, "identity-test").replaced == ["0"]
        assert isinstance(model[0], torch.nn.Identity)
    finally:
        SCHEMES.pop("identity-test")


@pytest.mark.parametrize("scheme,cls,options", [
    ("fp8", "Fp8Linear", {}),
    # the tensorwise recipe's scaled GEMM is verified in test_lowprec_scaled; the scheme's path is the same (11 CPU-s)
    pytest.param("fp8", "Fp8Linear", {"recipe": "tensorwise"}, marks=pytest.mark.slow),
    ("int8", "Int8Linear", {})])
def test_quantize_fp8_and_int8_schemes(scheme, cls, options):
    """The scaled-GEMM modules through the same registry: every projection replaced, logits close."""
    import warpsmith.nn as wnn

    model = _tiny()
    ids = torch.randint(0, 97, (1, 4), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(ids).logits
        report = warpsmith.quantize(model, scheme, **options)
        out = model(ids).logits
    assert len(report.replaced) == 7 and "lm_head" in report.kept
    layer = model.model.layers[0].self_attn.q_proj
    assert isinstance(layer, getattr(wnn, cls))
    assert getattr(layer, "recipe", None) == (options.get("recipe", "rowwise") if scheme == "fp8" else None)
    err = (out - ref).norm() / ref.norm()
    assert 1e-5 < err < 0.1, float(err)
