"""The static machine-code model as one more fact: a facts ranker's ``static.*`` features come from the
kernels' SASS (a real sm_90 compile-only build here), priced as `warpsmith profile` prices them."""
from __future__ import annotations

import dataclasses
import math

import pytest

from warpsmith import ranker as rk
from warpsmith.cost.roofline import roofline
from warpsmith.cost.static_sass import predict
from warpsmith.measure.evaluate import _count_sass
from warpsmith.core.registry import default_variant
from warpsmith.ops import get_op, variants
from warpsmith.targets import get_target
from warpsmith.targets.compiler import CompilerFacts, nvdisasm_path

SHAPE = {"M": 256, "N": 256, "K": 512}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """One matmul config compiled for sm_90 by the compile-only worker, its SASS counted."""
    if nvdisasm_path() is None:
        pytest.skip("nvdisasm not found: no machine code to count")
    h200 = get_target("h200")
    spec = get_op("matmul")
    problem = spec.problem(SHAPE, "bfloat16", {})
    v = default_variant(problem, variants("matmul"), h200)
    cfg = v.default_config(problem, h200)
    facts = CompilerFacts(h200, tmp_path_factory.mktemp("facts"))
    try:
        got = facts.sass(v, problem, cfg)
    finally:
        facts.close()
    assert got is not None, facts.error
    return spec, problem, v, cfg, got


def _sample(v, cfg, facts, sass) -> rk.Sample:
    return rk.Sample("matmul", v.name, dict(SHAPE), "bfloat16", {}, dict(cfg), 0.05,
                     facts.to_json(), "test", [c.to_json() for c in sass] if sass else None)


def test_static_features_are_the_static_models_prediction_from_the_sass(compiled):
    spec, problem, v, cfg, (facts, sass) = compiled
    h200 = get_target("h200")
    (row,) = rk.features([_sample(v, cfg, facts, sass)], facts=True, target="h200")
    out_bytes = float(sum(math.prod(s) * dt.itemsize for s, dt in spec.outputs(problem)))
    assert len(sass) == 1  # the default config is one tiled kernel
    want = predict(sass[0], facts.kernels[0], h200, spec.flops(problem), spec.min_bytes(problem),
                   roofline(spec, problem, h200).bound_ms, out_bytes)
    assert row["static.log_ms"] == pytest.approx(math.log(want.ms))
    assert row["static.bound"] == want.bound and row["static.sol"] == pytest.approx(want.sol)
    # other counts, another prediction: a loop full of integer instructions makes it ALU- or issue-bound
    busy = dataclasses.replace(sass[0], classes={**sass[0].classes, "int": 10_000},
                               loop_classes={**sass[0].loop_classes, "int": 10_000})
    (slow,) = rk.features([_sample(v, cfg, facts, [busy])], facts=True, target="h200")
    assert slow["static.log_ms"] > row["static.log_ms"] + 1 and slow["static.bound"] in ("alu", "issue")


def test_no_sass_or_no_facts_mode_means_no_static_features(compiled):
    _, _, v, cfg, (facts, sass) = compiled
    (without,) = rk.features([_sample(v, cfg, facts, None)], facts=True, target="h200")
    (plain,) = rk.features([_sample(v, cfg, facts, sass)], facts=False, target="h200")
    assert not any(k.startswith("static.") for k in (*without, *plain))
    assert "facts.regs" in without  # the compiler's other facts stay


def test_a_facts_ranker_trains_on_the_static_features(compiled):
    _, _, v, cfg, (facts, sass) = compiled
    samples = [dataclasses.replace(_sample(v, cfg, facts, sass), time_ms=t) for t in (0.05, 0.06, 0.07)]
    r = rk.fit(samples, "h200", facts=True)
    assert {"static.log_ms", "static.sol", "static.bound"} <= set(r.featurizer.names)
    assert r.predict_log_ms(samples[:1]).shape == (1,)


def test_sass_is_not_counted_for_a_kernel_without_a_cubin():
    class Launch:
        kernel = object()

    assert _count_sass([Launch()]) is None and _count_sass([]) is None
