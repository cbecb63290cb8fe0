"""Cross-entropy variants under the interpreter against the spec's reference, under the error contracts;
the verifier accepts each variant and rejects planted bugs."""
import pytest
import torch

from warpsmith.errors import InvalidInputError
from warpsmith.ops import default_variant, get_variant, variants
from warpsmith.ops.cross_entropy.variant import CrossEntropy, CrossEntropyBackward
from warpsmith.ops.cross_entropy.fused_variant import FusedLinearCrossEntropy, FusedLinearCrossEntropyBackward
from warpsmith.cost.cost import predict_ms
from warpsmith.core.opspec import as_tuple
from warpsmith.ops import get_op
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
LOOPED = {"ROWS": 2, "BLOCK_V": 64, "num_warps": 2}
FUSED = {"CHUNK": 8, "VCHUNK": 16, "BLOCK_V": 32, "ROWS": 8, "num_warps": 1}


def run(op, name, shape, dtype, attrs=None, cfg=None, dist="normal", seed=0, inputs=None):
    spec = get_op(op)
    p = spec.problem(shape, dtype, attrs or {})
    v = get_variant(op, name)
    cfg = cfg or v.default_config(p, H100)
    assert v.rejection(p, cfg, H100) is None
    inputs = inputs or spec.make_inputs(p, torch.Generator().manual_seed(seed), dist)
    outs = as_tuple(v.launch(inputs, p, cfg))
    ref64, scale = (as_tuple(r) for r in spec.oracle(inputs, p.attrs))
    refs = as_tuple(spec.reference(inputs, p.attrs))
    for out, (shape_, dt), r, s, rr, c in zip(outs, spec.outputs(p), ref64, scale, refs, as_tuple(spec.contract(p))):
        assert tuple(out.shape) == tuple(shape_) and out.dtype == dt
        ok, msg = c.check(out, r, s, rr)
        assert ok, msg
    return outs, inputs


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("name, cfg", [("single", None), ("looped", LOOPED)])
def test_forward_and_backward_variants_every_dtype(dtype, name, cfg):
    # V = 131 (a prime, > 2 blocks of the looped variant), M = 7 (not a multiple of ROWS)
    for red, eps in (("mean", 0.1), ("sum", 0.0), ("none", 0.3)):
        attrs = {"reduction": red, "label_smoothing": eps}
        run("cross_entropy", name, {"M": 7, "V": 131}, dtype, attrs, cfg)
        run("cross_entropy_backward", name, {"M": 7, "V": 131}, dtype, attrs, cfg)


@pytest.mark.parametrize("V", [1, 2, 37, 64, 65])
def test_odd_row_lengths(V):
    for name, cfg in (("single", None), ("looped", LOOPED)):
        run("cross_entropy", name, {"M": 5, "V": V}, "float16", {"reduction": "none", "label_smoothing": 0.1}, cfg)
        run("cross_entropy_backward", name, {"M": 5, "V": V}, "bfloat16", {"reduction": "mean"}, cfg)


@pytest.mark.parametrize("dist", ["outliers", "large", "specials", "tiny"])
def test_distributions_incl_nan_and_inf(dist):
    for red in ("none", "mean"):
        run("cross_entropy", "looped", {"M": 9, "V": 100}, "float32", {"reduction": red, "label_smoothing": 0.1},
            LOOPED, dist=dist)
        run("cross_entropy_backward", "single", {"M": 9, "V": 100}, "bfloat16", {"reduction": red}, dist=dist)


def test_vocabulary_of_256k_runs_looped():
    p = get_op("cross_entropy").problem({"M": 2, "V": 2**18 + 3}, "bfloat16")
    assert default_variant(p, H100).name == "looped"  # a single-pass row would not fit in registers
    assert "values per thread" in get_variant("cross_entropy", "single").rejection(
        p, get_variant("cross_entropy", "single").default_config(p, H100), H100)
    cfg = {"ROWS": 1, "BLOCK_V": 16384, "num_warps": 8}
    shape = {"M": 2, "V": 2**18 + 3}
    (loss, stats), inputs = run("cross_entropy", "looped", shape, "bfloat16", {"label_smoothing": 0.1}, cfg)
    grad = run("cross_entropy_backward", "looped", {"M": 2, "V": 2**18 + 3}, "bfloat16", {"label_smoothing": 0.1}, cfg,
               inputs={**inputs, "stats": stats, "grad": torch.tensor(1.0, dtype=torch.bfloat16)})[0][0]
    assert grad.shape == (2, 2**18 + 3)


def test_ignore_index_inside_the_classes_all_rows_ignored_and_bad_targets():
    spec, v = get_op("cross_entropy"), get_variant("cross_entropy", "single")
    x = torch.randn(4, 10)
    attrs = {"ignore_index": 3, "reduction": "mean", "label_smoothing": 0.2}
    run("cross_entropy", "single", {"M": 4, "V": 10}, "float32", attrs,
        inputs={"logits": x, "target": torch.tensor([3, 1, 3, 9])})
    every = {"logits": x, "target": torch.full((4,), 3)}
    (loss, _), _ = run("cross_entropy", "single", {"M": 4, "V": 10}, "float32", attrs, inputs=every)
    assert torch.isnan(loss)  # 0 / 0, as torch
    stats = spec.reference(every, attrs)[1]
    bp = get_op("cross_entropy_backward").problem({"M": 4, "V": 10}, "float32", attrs)
    grad = get_variant(bp.op, "looped").launch({**every, "stats": stats, "grad": torch.tensor(1.0)}, bp, LOOPED)
    assert torch.equal(grad, torch.zeros(4, 10))
    # a target outside [0, V) that is not ignored: NaN for its row (never an out-of-bounds read)
    p = spec.problem({"M": 3, "V": 10}, "float32", {"reduction": "none"})
    loss, _ = v.launch({"logits": x[:3], "target": torch.tensor([1, 10, -5])}, p, v.default_config(p, H100))
    assert torch.isfinite(loss[0]) and torch.isnan(loss[1:]).all()


def test_gradient_in_place_and_overlaps_refused():
    spec = get_op("cross_entropy_backward")
    p = spec.problem({"M": 6, "V": 50}, "float16", {"reduction": "none"})
    v = get_variant("cross_entropy_backward", "looped")
    inputs = spec.make_inputs(p, torch.Generator().manual_seed(0))
    fresh = v.launch(inputs, p, LOOPED)
    logits = inputs["logits"].clone()
    out = v.launch({**inputs, "logits": logits}, p, LOOPED, out=logits)
    assert out is logits and torch.equal(logits, fresh)
    with pytest.raises(InvalidInputError, match="partially overlapping"):
        storage = torch.cat([inputs["logits"], inputs["logits"]])
        v.launch({**inputs, "logits": storage[:6]}, p, LOOPED, out=storage[3:9])
    with pytest.raises(InvalidInputError, match="row-major with disjoint rows"):
        v.launch(inputs, p, LOOPED, out=torch.empty(50, 6, dtype=torch.float16).t())
    # non-contiguous logits are read through their strides
    wide = torch.randn(6, 80, dtype=torch.float16)[:, 10:60]
    run("cross_entropy_backward", "single", {"M": 6, "V": 50}, "float16", {"reduction": "none"},
        inputs={**inputs, "logits": wide, "stats": get_op("cross_entropy").reference({**inputs, "logits": wide},
                                                                                     p.attrs)[1]})


def test_fused_chunked_against_reference():
    for op in ("fused_linear_cross_entropy", "fused_linear_cross_entropy_backward"):
        for dtype, attrs in (("bfloat16", {"reduction": "mean", "bias": True, "label_smoothing": 0.1}),
                             ("float32", {"reduction": "none", "grads": "hidden"}),
                             ("float16", {"reduction": "sum", "bias": True})):
            run(op, "chunked", {"M": 13, "H": 16, "V": 40}, dtype, attrs, FUSED)  # 8 + 5 rows, 16 + 16 + 8 classes
    run("fused_linear_cross_entropy", "chunked", {"M": 13, "H": 16, "V": 40}, "float16", {"grads": "none"},
        {**FUSED, "BLOCK_V": 64})  # single-pass cross-entropy on the chunk
    run("fused_linear_cross_entropy", "chunked", {"M": 9, "H": 16, "V": 40}, "float32",
        {"reduction": "mean", "bias": True}, FUSED, dist="outliers")
    # the weight's gradient over vocabulary chunks: large logits need both phases' logits bit-identical;
    # the column slice's targets, ignore_index and smoothing placed by the global class index
    for op in ("fused_linear_cross_entropy", "fused_linear_cross_entropy_backward"):
        run(op, "chunked", {"M": 11, "H": 16, "V": 37}, "float32", {"reduction": "sum", "label_smoothing": 0.1},
            {**FUSED, "VCHUNK": 8, "BLOCK_V": 64, "ROWS": 4}, dist="outliers", seed=3)
        run(op, "chunked", {"M": 11, "H": 16, "V": 37}, "bfloat16",
            {"reduction": "none", "bias": True, "label_smoothing": 0.2, "ignore_index": 3},
            {**FUSED, "VCHUNK": 16, "BLOCK_V": 16, "ROWS": 2})


def test_spaces_defaults_and_cost_model():
    for op in ("cross_entropy", "cross_entropy_backward"):
        assert list(variants(op)) == ["single", "looped"]
        p = get_op(op).problem({"M": 4096, "V": 32000}, "bfloat16")
        for v in variants(op).values():
            space = v.space(p, H100)
            assert v.default_config(p, H100) == space.default()
            for cfg in list(space.enumerate())[:50]:
                ms = predict_ms(v, p, cfg, H100)
                assert ms > 0
    p = get_op("cross_entropy").problem({"M": 4096, "V": 4096}, "bfloat16")
    single, looped = variants("cross_entropy")["single"], variants("cross_entropy")["looped"]
    assert single.work(p, single.default_config(p, H100), H100).steps == 1
    assert looped.work(p, {"ROWS": 1, "BLOCK_V": 512, "num_warps": 4}, H100).steps == 8
    f = get_op("fused_linear_cross_entropy").problem({"M": 8192, "H": 4096, "V": 128256}, "bfloat16")
    v = get_variant("fused_linear_cross_entropy", "chunked")
    cfg = v.default_config(f, H100)
    # each chunk buffer <= 1/8 of the unfused logits: 1024 rows of logits, 8192 classes over all rows
    assert cfg["CHUNK"] == 1024 and cfg["VCHUNK"] == 8192 and v.rejection(f, cfg, H100) is None
    assert "chunk of" in v.rejection(f, {**cfg, "CHUNK": 2048}, H100)
    assert "vocabulary chunk" in v.rejection(f, {**cfg, "VCHUNK": 16384}, H100)
    small, large = v.work(f, {**cfg, "CHUNK": 256}, H100), v.work(f, cfg, H100)
    # four GEMMs: logits, grad_hidden, the logits again per vocabulary chunk, grad_weight
    assert small.bytes_moved > large.bytes_moved and small.flops == large.flops == 8.0 * 8192 * 128256 * 4096
    assert predict_ms(v, f, cfg, H100) < predict_ms(v, f, {**cfg, "CHUNK": 256}, H100) < float("inf")


@pytest.mark.parametrize("variant, op, cfg, attrs", [
    (CrossEntropy(True), "cross_entropy", None, {"reduction": "mean", "label_smoothing": 0.1}),
    (CrossEntropy(False), "cross_entropy", LOOPED, {"reduction": "none"}),
    (CrossEntropyBackward(True), "cross_entropy_backward", None, {"reduction": "mean", "label_smoothing": 0.1}),
    (CrossEntropyBackward(False), "cross_entropy_backward", LOOPED, {"reduction": "none"}),
])
def test_verifier_accepts_each_variant(variant, op, cfg, attrs):
    spec = get_op(op)
    p = spec.problem({"M": 5, "V": 100}, "bfloat16", attrs)
    cert = verify_candidate(spec, p, variant, cfg or variant.default_config(p, H100), H100)
    st = {c.name: c.status for c in cert.checks}
    assert cert.passed, st
    assert st["error_contract"] == "tested(6 trials)" and st["odd_shapes"].startswith("tested(3")


def test_verifier_accepts_the_fused_variants():
    for variant, op in ((FusedLinearCrossEntropy(), "fused_linear_cross_entropy"),
                        (FusedLinearCrossEntropyBackward(), "fused_linear_cross_entropy_backward")):
        spec = get_op(op)
        p = spec.problem({"M": 5, "H": 8, "V": 24}, "float16", {"reduction": "mean", "bias": True})
        cert = verify_candidate(spec, p, variant, FUSED, H100)
        st = {c.name: c.status for c in cert.checks}
        assert cert.passed and st["odd_shapes"].startswith("tested(3"), st


# ---- planted bugs: the verifier must reject each, for the right reason ---------------------------------
class CountsIgnoredRows(CrossEntropy):
    """mean over all M rows: ignore_index rows counted in the denominator."""

    def launch(self, inputs, p, c, out=None):
        total = type(p)(p.op, p.shape, p.dtype, {**p.attrs, "reduction": "sum"}, p.scalars)
        loss, stats = super().launch(inputs, total, c, out)
        loss.copy_((loss.float() / p.shape["M"]).to(loss.dtype))
        return loss, stats


class SmoothingWithoutFactor(CrossEntropy):
    """(nll + eps * smooth) instead of ((1 - eps) nll + eps * smooth)."""

    def launch(self, inputs, p, c, out=None):
        loss, stats = super().launch(inputs, p, c, out)
        plain = type(p)(p.op, p.shape, p.dtype, {**p.attrs, "label_smoothing": 0.0}, p.scalars)
        nll = super().launch(inputs, plain, c)[0]
        loss.copy_((loss.float() + p.attrs["label_smoothing"] * nll.float()).to(loss.dtype))
        return loss, stats


class HalfStatistics(CrossEntropy):
    """The statistics computed from logits rounded to bf16."""

    def launch(self, inputs, p, c, out=None):
        rounded = inputs["logits"].to(torch.bfloat16).to(inputs["logits"].dtype)
        return super().launch({**inputs, "logits": rounded}, p, c, out)


class GradientWithoutSmoothing(CrossEntropyBackward):
    """The backward forgets the eps / V term of the smoothed one-hot."""

    def launch(self, inputs, p, c, out=None):
        plain = type(p)(p.op, p.shape, p.dtype, {**p.attrs, "label_smoothing": 0.0}, p.scalars)
        return super().launch(inputs, plain, c, out)


class SkipsLastRow(CrossEntropyBackward):
    """The last row's gradient is never written."""

    def launch(self, inputs, p, c, out=None):
        if p.shape["M"] == 1:
            return super().launch(inputs, p, c, out)
        short = type(p)(p.op, {**p.shape, "M": p.shape["M"] - 1}, p.dtype, p.attrs, p.scalars)
        part = {k: (v[:-1] if v.dim() and v.shape[0] == p.shape["M"] else v) for k, v in inputs.items()}
        super().launch(part, short, c, out[:-1])
        return out


class FusedCountsIgnoredRows(FusedLinearCrossEntropy):
    def launch(self, inputs, p, c, out=None):
        total = type(p)(p.op, p.shape, p.dtype, {**p.attrs, "reduction": "sum"}, p.scalars)
        outs = super().launch(inputs, total, c, out)
        for o in outs:
            o.copy_((o.float() / p.shape["M"]).to(o.dtype))
        return outs


@pytest.mark.parametrize("bug, op, dtype, reason", [
    (CountsIgnoredRows(True), "cross_entropy", "float32", "error_contract"),
    (SmoothingWithoutFactor(True), "cross_entropy", "bfloat16", "error_contract"),
    (HalfStatistics(True), "cross_entropy", "float32", "error_contract"),
    (GradientWithoutSmoothing(True), "cross_entropy_backward", "bfloat16", "error_contract"),
    (SkipsLastRow(False), "cross_entropy_backward", "float16", "unwritten"),
])
def test_planted_bugs_are_rejected(bug, op, dtype, reason):
    spec = get_op(op)
    p = spec.problem({"M": 8, "V": 100}, dtype, {"reduction": "mean" if op == "cross_entropy" else "none",
                                                   "label_smoothing": 0.1})
    cert = verify_candidate(spec, p, bug, bug.default_config(p, H100), H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract", (failure.name, failure.status)
    if reason == "unwritten":
        assert "left unwritten (poison survived)" in failure.status
    else:
        assert "exceeds contract" in failure.status


def test_planted_fused_bug_is_rejected():
    spec = get_op("fused_linear_cross_entropy")
    p = spec.problem({"M": 8, "H": 8, "V": 24}, "bfloat16", {"reduction": "mean"})
    cert = verify_candidate(spec, p, FusedCountsIgnoredRows(), FUSED, H100)
    failure = cert.first_failure()
    assert not cert.passed and failure.name == "error_contract" and "exceeds contract" in failure.status, failure


def test_symbolic_contracts_prove_or_bound_every_obligation():
    from warpsmith.ops.cross_entropy.contract import CONTRACTS, for_config
    from warpsmith.verify.symbolic import prove

    # the single-pass forward, the looped gradient pass (the backward kernel's loop form) and the
    # one-program reductions; every contract in CONTRACTS proves the same way (about 12 s in all)
    for c in (CONTRACTS[0], CONTRACTS[3], CONTRACTS[6], CONTRACTS[7]):
        for r in prove(c):
            for o in r.obligations:
                assert o.status == "proved" or o.status.startswith("bounded("), (c.name, o.to_json())
            assert all(o.status == "proved" for o in r.obligations if o.name in ("in_bounds", "race_free", "coverage"))
    p = get_op("fused_linear_cross_entropy_backward").problem({"M": 8, "H": 8, "V": 40}, "float16",
                                                              {"reduction": "mean"})
    names = [c.name for c in for_config(get_variant(p.op, "chunked"), p, FUSED)]
    assert names == ["xent_fwd_kernel[looped,SG]", "xent_bwd_kernel[scalar scale, column slice]", "xent_scale_kernel"]
    for c in for_config(get_variant(p.op, "chunked"), p, FUSED)[1:2]:  # the column-slice backward proves too
        for r in prove(c):
            assert all(o.status == "proved" for o in r.obligations if o.name in ("in_bounds", "race_free", "coverage"))
