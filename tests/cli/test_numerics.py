"""`warpsmith numerics`: the format study's table is sane, its files are written, the PNG is a PNG."""
import builtins
import csv
import json

import pytest
import torch
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.numerics import round_float, round_int, study

PATHS = "fp16,bf16,fp8-e4m3-tensor,fp8-e5m2-tensor,fp8-e4m3-block128,int8-token-channel,int4-g32"


def _run(tmp_path, *extra):
    res = CliRunner().invoke(cli, ["numerics", "--shape", "M=8,N=16,K=128", "--paths", PATHS, "--dists",
                                   "normal,outliers", "--out", str(tmp_path), *extra])
    assert res.exit_code == 0, res.output
    return res


def test_numerics_table_is_sane_and_files_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    res = _run(tmp_path)
    rows = json.loads((tmp_path / "numerics.json").read_text())["rows"]
    assert len(rows) == 7 * 2 * 2
    get = {(r["path"], r["dist"], r["rounding"]): r for r in rows}
    rn = lambda p, d="normal": get[(p, d, "rn")]  # noqa: E731
    # precision ordering on normal inputs: fp16 < bf16 < fp8 e4m3 < e5m2 (error), SNR the other way round
    order = ["fp16", "bf16", "fp8-e4m3-tensor", "fp8-e5m2-tensor"]
    for a, b in zip(order, order[1:]):
        assert rn(a)["rel"] < rn(b)["rel"] and rn(a)["max_abs"] < rn(b)["max_abs"], (a, b)
        assert rn(a)["snr_db"] > rn(b)["snr_db"] and rn(a)["calc_diff"] < rn(b)["calc_diff"], (a, b)
    # fp16's relative error is about its unit roundoff (2^-11), e4m3's about 2^-4 / sqrt(3)-ish
    assert 1e-5 < rn("fp16")["rel"] < 2e-3 and 5e-3 < rn("fp8-e4m3-tensor")["rel"] < 0.1
    # a fixed-point format loses to outliers (its step is set by the row's max), a float format does not
    assert rn("int8-token-channel", "outliers")["snr_db"] < rn("int8-token-channel")["snr_db"] - 5
    assert rn("fp8-e4m3-tensor", "outliers")["snr_db"] > rn("fp8-e4m3-tensor")["snr_db"] - 3
    for r in rows:
        assert r["max_abs"] > 0 and 0 < r["rel"] < 1 and 0 < r["calc_diff"] < 1
    with open(tmp_path / "numerics.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert "fp8-e5m2-tensor" in (tmp_path / "numerics.txt").read_text()
    assert (tmp_path / "numerics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "png" in res.output


def test_without_matplotlib_the_table_is_written_and_the_plot_is_explained(tmp_path, monkeypatch):
    real = builtins.__import__

    def no_mpl(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    res = _run(tmp_path, "--rounding", "rn")
    assert "needs matplotlib" in res.output and not (tmp_path / "numerics.png").exists()
    assert (tmp_path / "numerics.csv").exists()


def test_stochastic_rounding_is_unbiased_and_lands_on_neighbours():
    gen = torch.Generator().manual_seed(0)
    v = torch.full((20000,), 1.0 + 3 / 32, dtype=torch.float64)  # between e4m3 neighbours 1.0 and 1.125 (step 1/8)
    r = round_float(v, "e4m3", True, gen)
    assert set(r.unique().tolist()) == {1.0, 1.125}
    assert abs(float(r.mean()) - (1 + 3 / 32)) < 2e-3
    assert round_float(v, "e4m3")[0] == 1.125  # nearest
    i = round_int(torch.full((20000,), 2.25, dtype=torch.float64), -8, 7, True, gen)
    assert set(i.unique().tolist()) == {2.0, 3.0} and abs(float(i.mean()) - 2.25) < 0.02


def test_bad_names_are_refused():
    with pytest.raises(Exception, match="numerics path"):
        study(4, 8, 32, ["fp7"])
    res = CliRunner().invoke(cli, ["numerics", "--shape", "M=4,N=8", "--paths", "fp16"])
    assert res.exit_code == 2


def test_the_hybrid_fp8_path_lies_between_its_two_formats():
    """x in e5m2 and w in e4m3: its error lies between both operands in e4m3 and both in e5m2 (SNR on the
    same inputs: 29.1 > 24.6 > 22.5 dB on normal inputs at this shape, seed 0), and each operand is
    quantized in its own format (the weight's values sit on e4m3's grid, x's on e5m2's)."""
    names = ["fp8-e4m3-row", "fp8-e5m2xe4m3-row", "fp8-e5m2-row"]
    rows = study(8, 16, 128, names, dists=["normal", "outliers"], stochastic=(False,))
    for d in ("normal", "outliers"):
        snr = [next(r.snr_db for r in rows if r.path == n and r.dist == d) for n in names]
        assert snr[0] > snr[1] > snr[2], (d, snr)
    from warpsmith.numerics import paths

    x, w = torch.randn(8, 128, dtype=torch.float64), torch.randn(128, 16, dtype=torch.float64)
    xq, wq = paths()["fp8-e5m2xe4m3-row"](x, w, False, None)
    sx = x.abs().amax(1, keepdim=True) / 57344.0
    sw = w.abs().amax(0, keepdim=True) / 448.0
    on_grid = lambda v, dt: torch.allclose(v.to(dt).double(), v, rtol=1e-12, atol=0)  # noqa: E731  (q s / s: one ulp)
    assert on_grid(xq / sx, torch.float8_e5m2) and on_grid(wq / sw, torch.float8_e4m3fn)
    assert not on_grid(xq / sx, torch.float8_e4m3fn)  # x is not on e4m3's grid (e5m2 reaches 57344)
