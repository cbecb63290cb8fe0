"""The all-reduce on the tuning pipeline: its spec and variant (run over a world of threads), the
alpha-beta model's programs and chunk size, `tune` recording a winner in a DB, and
`comm.all_reduce`'s dispatch from that record (else from the model)."""
import pytest
import torch

from warpsmith.comm import api, runtime
from warpsmith.comm.family import ALL_REDUCE, VARIANTS
from warpsmith.cost import comm_model
from warpsmith.targets import get_target

SYM = VARIANTS[0]


@pytest.mark.parametrize("algorithm", ["one_shot", "two_shot", "ring"])
def test_the_variant_runs_the_collective_on_a_world_of_threads_within_the_contract(algorithm):
    p = ALL_REDUCE.problem({"N": 601, "W": 3}, "bfloat16", {"topology": "pcie"})
    x = ALL_REDUCE.make_inputs(p, torch.Generator().manual_seed(0))["x"]
    got = SYM.launch({"x": x}, p, {"algorithm": algorithm, "programs": 2, "chunk": 256})
    ref64, scale = ALL_REDUCE.oracle({"x": x}, p.attrs)
    allowed = ALL_REDUCE.contract(p).allowed(ref64, scale)
    err = (got.double() - ref64).abs()
    assert got.shape == (601,) and (err <= allowed).all(), (err / allowed).max()
    if algorithm != "ring":  # fp32 sum, one rounding: the reference's result exactly
        assert torch.equal(got, ALL_REDUCE.reference({"x": x}, p.attrs))


def test_the_variant_names_a_bad_input():
    p = ALL_REDUCE.problem({"N": 8, "W": 2}, "float32")
    with pytest.raises(Exception, match=r"expected a \[W, N\] CPU tensor .* got '\(8,\) torch.float32 on cpu'"):
        SYM.launch({"x": torch.ones(8)}, p, {"algorithm": "one_shot", "programs": 1, "chunk": 256})


def test_the_variant_refuses_an_algorithm_the_topology_does_not_offer():
    p = ALL_REDUCE.problem({"N": 1024, "W": 16}, "float32", {"topology": "multinode"})  # 2 nodes: ring only
    assert SYM.algorithms(p) == ("ring",)
    why = SYM.invalid(p, {"algorithm": "one_shot", "programs": 1, "chunk": 256}, get_target("h100"))
    assert "not available with 16 ranks on multinode" in why
    assert SYM.default_config(p, get_target("h100"))["algorithm"] == "ring"


def test_programs_and_chunk_change_the_predicted_time_as_the_model_says():
    t = comm_model.topology("nvlink")
    n = 1 << 20  # one-shot on 4 ranks: one step moving 3 MiB over the link
    link = 3 * n
    # one program of 8192-byte chunks is held to one program's bandwidth
    one = comm_model.predict_config_s("all_reduce", "one_shot", n, 4, "nvlink", 1, 8192)
    assert one == pytest.approx(t.alpha_s + (link // 8192) * (8192 / t.program_bw + t.chunk_overhead_s))
    # 64 programs share the link (450 GB/s / 64 < 25 GB/s each): the link's time plus 6 rounds of overhead
    many = comm_model.predict_config_s("all_reduce", "one_shot", n, 4, "nvlink", 64, 8192)
    assert many == pytest.approx(t.alpha_s + 6 * (8192 * 64 * t.beta_s_per_byte + t.chunk_overhead_s))
    assert many < one
    # tiny chunks pay the per-chunk overhead
    assert comm_model.predict_config_s("all_reduce", "one_shot", n, 4, "nvlink", 64, 512) > many
    assert comm_model.best_config("all_reduce", 1 << 26, 8, "nvlink", 2) == ("two_shot", 64, 8192)
    assert comm_model.best_config("all_reduce", 1 << 26, 8, "pcie", 2)[0] == "ring"
    with pytest.raises(Exception, match="programs: expected an int >= 1, got 0"):
        comm_model.predict_config_s("all_reduce", "ring", n, 4, "nvlink", 0, 8192)


def test_tune_records_a_verified_winner_and_all_reduce_dispatches_from_it(tmp_path, monkeypatch):
    from warpsmith.db import TuningDB
    from warpsmith.dispatch import clear_cache
    from warpsmith.tune import tune

    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "t.db"))
    clear_cache()
    x = torch.randn(300, dtype=torch.bfloat16)
    alg, launch, source = api.tuned_config(x, 3, "pcie")  # no DB yet: the model's choice
    model = comm_model.best_config("all_reduce", 600, 3, "pcie", 2, tuple(runtime.ALL_REDUCE))
    assert source == "default" and (alg, launch.programs, launch.block) == model
    p = ALL_REDUCE.problem({"N": 300, "W": 3}, "bfloat16", {"topology": "pcie"})
    res = tune(p, target="h100", budget=6, finalists=1, db=TuningDB(tmp_path / "t.db"), seed=1)
    assert res.timing_kind == "predicted" and res.certificate.passed and res.record_id is not None
    alg, launch, source = api.tuned_config(x, 3, "pcie")
    assert source == "db"
    assert {"algorithm": alg, "programs": launch.programs, "chunk": launch.block} == res.winner.config
    clear_cache()
