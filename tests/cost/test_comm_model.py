"""The alpha-beta model of collectives (warpsmith.cost.comm_model)."""
import pytest

from warpsmith.cost import comm_model as cm
from warpsmith.errors import InvalidInputError, UnknownNameError


def test_nvlink_all_reduce_goes_one_shot_then_two_shot():
    """On an all-to-all fabric two-shot moves the ring's bytes in 2 steps, not 2 (W-1): the model
    never picks the ring there."""
    points = cm.crossovers("all_reduce", 8, "nvlink")
    assert [(a, b) for _, a, b in points] == [("one_shot", "two_shot")]
    small = points[0][0]
    # one_shot vs two_shot: alpha = (W-1) n beta - 2 (W-1)/W n beta  ->  n = alpha / ((W-1)(1 - 2/W) beta)
    t = cm.TOPOLOGIES["nvlink"]
    assert small == pytest.approx(t.alpha_s / (7 * (1 - 2 / 8) * t.beta_s_per_byte), rel=0.02)
    assert cm.best("all_reduce", small / 2, 8, "nvlink") == "one_shot"
    assert cm.best("all_reduce", 1 << 30, 8, "nvlink") == "two_shot"


def test_two_ranks_one_shot_never_loses_to_two_shot():
    """With W=2 one-shot moves n bytes in one step, two-shot moves n in two."""
    for n in (1e2, 1e6, 1e9):
        assert cm.predict_s("all_reduce", "one_shot", n, 2, "nvlink") <= cm.predict_s("all_reduce", "two_shot", n, 2, "nvlink")


def test_pcie_ring_pays_hops_for_direct_reads():
    w, n = 8, 1 << 24
    assert cm.predict_s("all_gather", "one_shot", n, w, "pcie") > cm.predict_s("all_gather", "ring", n, w, "pcie")
    assert cm.best("all_gather", 64, w, "pcie") == "one_shot"  # latency-bound: one step wins
    assert [(a, b) for _, a, b in cm.crossovers("all_reduce", w, "pcie")][-1][1] == "ring"


def test_multinode_offers_only_ring_and_hierarchical_across_nodes():
    assert cm.available("all_reduce", 16, "multinode") == ("ring", "hierarchical")
    assert cm.available("all_reduce", 8, "multinode") == ("one_shot", "two_shot", "ring")
    assert cm.best("all_reduce", 1 << 30, 16, "multinode") == "hierarchical"
    with pytest.raises(InvalidInputError, match="one of ring, hierarchical"):
        cm.predict_s("all_reduce", "one_shot", 1024, 16, "multinode")


def test_bad_names_and_sizes():
    with pytest.raises(UnknownNameError, match="topology"):
        cm.topology("infiniband")
    with pytest.raises(UnknownNameError, match="collective"):
        cm.predict_s("broadcast", "ring", 1, 2, "nvlink")
    with pytest.raises(InvalidInputError, match="world size"):
        cm.predict_s("all_reduce", "ring", 1, 0, "nvlink")


def test_crossover_plot_script(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "comm_crossovers.py"
    spec = importlib.util.spec_from_file_location("comm_crossovers", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--out", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "nvlink W=8 all_reduce: one_shot -> two_shot at 252." in out
    assert "pcie W=8 all_reduce: two_shot -> ring" in out
