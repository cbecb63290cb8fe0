"""`warpsmith profile --ncu`: ncu's CSV parsed and merged into the table (marked measured), and a clear
error without a GPU or ncu. The CSV fixture is hand-written in ncu's format, not a measurement."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.core.errors import WarpsmithError
from warpsmith.profile import ncu, report
from warpsmith.profile.collect import KernelRow

FIXTURE = Path(__file__).parent / "data" / "ncu_matmul.csv"


def _row(name: str) -> KernelRow:
    return KernelRow(name=name, grid=(1024, 1), predicted_ms=0.15, flops=1.0, bytes=1.0, counted_from="op definition",
                     bound="tensor", sol=0.9, regs=168, spill_bytes=0, smem_bytes=0, occupancy=1, num_warps=8)


def test_parse_reads_every_launch_in_order_with_units_and_separators():
    kernels = ncu.parse_csv(FIXTURE.read_text())
    assert [(k.launch, k.name) for k in kernels] == [(i, "matmul_tiled_kernel") for i in range(3)]
    assert kernels[0].metrics["time"] == pytest.approx(1.912)  # "1,912,000" nsecond
    assert kernels[1].metrics["time"] == pytest.approx(0.2051)  # usecond
    last = kernels[2].metrics
    assert last == {"time": pytest.approx(0.2), "DRAM % of peak": 12.5, "tensor pipe % (GMMA)": 71.25,
                    "stall long_scoreboard": 0.84, "stall barrier": 0.31}  # "n/a" and unlisted metrics left out


def test_merge_puts_the_last_launch_beside_the_prediction_marked_measured():
    rows = [_row("matmul_tiled_kernel"), _row("helper_kernel")]
    missing = ncu.merge(rows, ncu.parse_csv(FIXTURE.read_text()))
    assert missing == ["helper_kernel"] and rows[1].ncu == {}
    assert rows[0].ncu["time"] == pytest.approx(0.2) and rows[0].ncu["DRAM % of peak"] == 12.5
    html = report.html_table(rows, [])
    assert "<th>ncu (measured)</th>" in html and "time 0.2 ms, DRAM % of peak 12.5" in html
    assert report.table(rows, "t").columns[-1].header == "ncu (measured)"
    assert "ncu (measured)" not in report.html_table([_row("k")], [])  # no ncu, no column


def test_metrics_this_gpus_ncu_does_not_list_are_left_out():
    """A hand-written `ncu --query-metrics` listing (name, type, unit, description), not a real one."""
    query = ("Device NVIDIA H200 (GH100)\n---------------\nMetric Name  Metric Type  Metric Unit  Metric Description\n"
             "gpu__time_duration  Counter  nsecond  total duration\n"
             "dram__throughput  Throughput  %  DRAM throughput\n"
             "smsp__average_warps_issue_stalled_barrier_per_issue_active  Ratio  inst  stalls at a barrier\n")
    keep, dropped = ncu.supported(list(ncu.METRICS), query)
    assert keep == ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"]
    assert len(dropped) == len(ncu.METRICS) - 3 and "sm__pipe_tensor_op_gmma_cycles_active" in dropped[0]


def test_output_without_a_csv_header_is_an_error_naming_it():
    with pytest.raises(WarpsmithError, match='no CSV header.*ncu: command not found'):
        ncu.parse_csv("==ERROR== something\nncu: command not found")


def test_ncu_without_a_gpu_exits_2_saying_what_is_missing():
    res = CliRunner().invoke(cli, ["profile", "rms_norm", "--shape", "M=64,N=4096", "--no-compile", "--ncu"])
    assert res.exit_code == 2
    assert "--ncu: expected a machine with an NVIDIA GPU and Nsight Compute's ncu on PATH" in res.output
    assert "no GPU here" in res.output
