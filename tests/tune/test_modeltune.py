"""tune_model on this machine's process pool: capture, ranking, tuning, resume, a lost worker."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from modeltune_helpers import (InProcess, KillFirstTry, NormThenGelu, SpendBudget, TwoNorms, inputs,  # noqa: E402
                               records)

from warpsmith.core.errors import InvalidInputError  # noqa: E402
from warpsmith.db import TuningDB  # noqa: E402
from warpsmith.measure.executor import LocalExecutor, make_executor  # noqa: E402
from warpsmith.modeltune import capture, sizes_arg, tune_model  # noqa: E402


def test_capture_dedups_counts_and_reads_matmuls_off_aten():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norms = TwoNorms()
            self.proj = torch.nn.Linear(16, 24, bias=False)

        def forward(self, x):
            return self.proj(self.norms(x))

    found = {(p.op, tuple(sorted(p.shape.items()))): (p, n) for p, n in capture(M(), inputs(), sizes=[(1, 4), (2, 4)])}
    assert {k: n for k, (_, n) in found.items()} == {
        ("rms_norm", (("M", 4), ("N", 32))): 2, ("rms_norm", (("M", 4), ("N", 16))): 1,
        ("rms_norm", (("M", 8), ("N", 32))): 2, ("rms_norm", (("M", 8), ("N", 16))): 1,
        ("matmul", (("K", 16), ("M", 4), ("N", 24))): 1, ("matmul", (("K", 16), ("M", 8), ("N", 24))): 1}
    mm = found[("matmul", (("K", 16), ("M", 4), ("N", 24)))][0]
    assert mm.attrs["layout"] == "nt" and mm.attrs["bias"] is False  # nn.Linear's weight is B transposed


def test_local_tunes_every_problem_then_resumes(tmp_path):
    db = TuningDB(tmp_path / "t.db")
    rep = tune_model(TwoNorms(), inputs(), budget=4, executor=LocalExecutor(workers=1), db=db)
    assert [m.status for m in rep.problems] == ["tuned", "tuned"]
    assert rep.problems[0].problem.shape["N"] == 32  # called twice: the larger share comes first
    assert rep.problems[0].share > rep.problems[1].share and abs(sum(m.share for m in rep.problems) - 1) < 1e-9
    assert rep.timing_kind == "predicted" and rep.step_gain >= 1.0
    verified = [r for r in db.list() if r.verified]
    assert len(verified) == 2
    prov = verified[0].certificate["provenance"]
    assert prov["executor"] == "local" and prov["attempts"] == 1 and prov["node"] and prov["versions"]["triton"]
    assert "| **step** |" in rep.table() and "(predicted)" in rep.table()
    before = len(db.list())
    again = tune_model(TwoNorms(), inputs(), budget=4, executor=LocalExecutor(workers=1), db=db)
    assert [m.status for m in again.problems] == ["resumed", "resumed"] and len(db.list()) == before


def test_local_worker_lost_is_retried_then_failed(tmp_path):
    db = TuningDB(tmp_path / "t.db")
    rep = tune_model(TwoNorms(), inputs(), budget=4, executor=LocalExecutor(workers=1, attempts=2), db=db,
                     worker_fn=KillFirstTry(tmp_path / "killed"))
    assert (tmp_path / "killed").exists()
    assert [m.status for m in rep.problems] == ["tuned", "tuned"]
    assert any(m.attempts == 2 and m.lost for m in rep.problems)
    assert len(records(db)) == 2
    # with one try, the lost worker's job is recorded failed with the reason
    db2 = TuningDB(tmp_path / "t2.db")
    rep = tune_model(TwoNorms(), inputs(), budget=4, executor=LocalExecutor(workers=1, attempts=1), db=db2,
                     worker_fn=KillFirstTry(tmp_path / "killed2"))
    failed = [m for m in rep.problems if m.status == "failed"]
    assert failed and all("worker process lost 1 times" in m.reason for m in failed)
    stored = db2.failures()  # in the DB's failures table, with the reason, tries and executor
    assert [(f.op, f.shape, f.reason, f.attempts, f.executor) for f in stored] == [
        (m.problem.op, dict(m.problem.shape), m.reason, 1, "local") for m in failed]
    assert stored[0].provenance["recorded_by"] and stored[0].created
    # a re-run tunes what failed; its verified record clears the failure
    again = tune_model(TwoNorms(), inputs(), budget=4, executor=LocalExecutor(workers=1), db=db2)
    assert sorted(m.status for m in again.problems) == sorted(["resumed"] * (2 - len(failed)) + ["tuned"] * len(failed))
    assert db2.failures() == []


def test_bad_input_names_what_was_expected():
    assert sizes_arg("1x8, 2x16") == [(1, 8), (2, 16)]
    for bad in ("", "1x0", "ax8"):
        with pytest.raises(InvalidInputError, match="BATCHxSEQ"):
            sizes_arg(bad)
    with pytest.raises(InvalidInputError, match="executor"):
        make_executor("slurm")
    with pytest.raises(InvalidInputError, match="attempts"):
        LocalExecutor(attempts=0)
    with pytest.raises(InvalidInputError, match="no address"):
        make_executor("local", address="127.0.0.1:6379")
    with pytest.raises(InvalidInputError, match="torch.nn.Module"):
        capture(lambda x: x, inputs())


def test_cli_tune_model(tmp_path):
    from warpsmith.cli.main import cli

    got = CliRunner().invoke(cli, ["tune-model", "--db", str(tmp_path / "t.db")])
    assert got.exit_code == 2 and "exactly one of --hf FAMILY or --model MODULE:FUNCTION" in got.output
    got = CliRunner().invoke(cli, ["tune-model", "--model", "modeltune_helpers:model_and_inputs", "--sizes", "2x3",
                                   "--budget", "4", "--workers", "1", "--db", str(tmp_path / "t.db"),
                                   "--json", str(tmp_path / "r.json")])
    assert got.exit_code == 0, got.output
    assert "| rms_norm | M=6,N=32 | float32 | 2 |" in got.output and "executor local" in got.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [p["status"] for p in doc["problems"]] == ["tuned", "tuned"] and doc["timing_kind"] == "predicted"


def test_local_job_that_raises_fails_at_once():
    (out,) = list(LocalExecutor(workers=1, attempts=3).run(int, [{"not": "a number"}]))  # int(dict) raises TypeError
    assert not out.ok and out.attempts == 1 and out.error.startswith("TypeError") and out.lost == []


def test_time_budget_skips_what_did_not_start_and_a_rerun_resumes(tmp_path):
    db = TuningDB(tmp_path / "t.db")
    spend = SpendBudget()
    rep = tune_model(TwoNorms(), inputs(), budget=4, time_budget_s=20, executor=InProcess(), db=db, worker_fn=spend)
    # the first (largest share) problem started within the budget and was tuned; the second found it spent
    assert [m.status for m in rep.problems] == ["tuned", "skipped"] and spend.calls == 2
    assert rep.problems[1].reason == "time budget" and rep.skipped == [rep.problems[1]]
    doc = rep.to_json()
    assert doc["complete"] is False and doc["problems"][1]["status"] == "skipped"
    assert doc["problems"][1]["reason"] == "time budget"
    assert len(records(db)) == 1
    again = tune_model(TwoNorms(), inputs(), budget=4, executor=InProcess(), db=db)
    assert [m.status for m in again.problems] == ["resumed", "tuned"] and again.to_json()["complete"] is True
    assert len(records(db)) == 2
    with pytest.raises(InvalidInputError, match="time budget"):
        tune_model(TwoNorms(), inputs(), time_budget_s=0, executor=InProcess(), db=db)


def test_cli_time_budget_spent_exits_3(tmp_path):
    from warpsmith.cli.main import cli

    # a budget spent before any job is sent (capture alone takes longer): nothing starts, exit 3
    got = CliRunner().invoke(cli, ["tune-model", "--model", "modeltune_helpers:model_and_inputs", "--time-budget",
                                   "1e-9", "--workers", "1", "--db", str(tmp_path / "t.db"),
                                   "--json", str(tmp_path / "r.json")])
    assert got.exit_code == 3, got.output
    assert "skipped: rms_norm" in got.output and ": time budget" in got.output and "incomplete" in got.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["complete"] is False and {p["status"] for p in doc["problems"]} == {"skipped"}


def test_generated_kernels_join_the_ranking_labelled_and_untuned(tmp_path):
    db = TuningDB(tmp_path / "t.db")
    rep = tune_model(NormThenGelu(), inputs(), sizes=[(1, 4), (1, 4), (2, 4)], budget=4, executor=InProcess(), db=db,
                     generated_kernels=True)
    gen = {k.reads: k for k in rep.generated}
    assert set(gen) == {((1, 4, 32),), ((2, 4, 32),)}  # one fused gelu*2+1 kernel per size, de-duplicated
    assert gen[((1, 4, 32),)].calls == 2 and gen[((2, 4, 32),)].calls == 1  # size 1x4 ran twice
    for k in rep.generated:
        assert k.ops == ("gelu", "mul", "add") and k.kind == "pointwise" and k.dtype == "float32"
        assert set(k.config) == {"BLOCK", "num_warps"} and 0 < k.search_ms <= k.predicted_ms < 1.0
    assert any(line.startswith("inference: compiled; 1 generated kernel(s)") for line in rep.graphs)
    shares = [m.share for m in rep.problems] + [k.share for k in rep.generated]
    assert abs(sum(shares) - 1) < 1e-9 and gen[((1, 4, 32),)].share > gen[((2, 4, 32),)].share * 1.5
    assert [m.status for m in rep.problems] == ["tuned", "tuned"]  # the captured problems are tuned as before
    assert "| generated: gelu+mul+add | 1x4x32 | float32 | 2 |" in rep.table()
    doc = rep.to_json()
    assert {k["status"] for k in doc["generated_kernels"]} == {"generated"} and doc["graphs"] == rep.graphs
    assert {r.op for r in db.list()} == {"rms_norm"}  # nothing stored for the generated kernels


def test_default_path_does_not_compile(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("torch.compile called without generated_kernels")

    monkeypatch.setattr(torch, "compile", refuse)
    rep = tune_model(NormThenGelu(), inputs(), budget=4, executor=InProcess(), db=TuningDB(tmp_path / "t.db"))
    assert rep.generated == [] and rep.graphs == [] and [m.status for m in rep.problems] == ["tuned"]


def test_cli_generated_kernels(tmp_path):
    from warpsmith.cli.main import cli

    got = CliRunner().invoke(cli, ["tune-model", "--model", "modeltune_helpers:gelu_model_and_inputs",
                                   "--generated-kernels", "--budget", "4", "--workers", "1",
                                   "--db", str(tmp_path / "t.db"), "--json", str(tmp_path / "r.json")])
    assert got.exit_code == 0, got.output
    assert "| generated: gelu+mul+add | 1x4x32 | float32 | 1 |" in got.output
    assert "1 generated kernels: the launch configs warpsmith's torch.compile backend emitted" in got.output
    assert "torch.compile graph: inference: compiled" in got.output
    assert len(json.loads((tmp_path / "r.json").read_text())["generated_kernels"]) == 1
