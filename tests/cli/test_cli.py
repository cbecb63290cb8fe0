"""The `warpsmith` command: tune, env, and exit code 2 with nothing written on bad input."""
import json

import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_tune_writes_json_db_and_prints_a_leaderboard(tmp_path):
    db, out = tmp_path / "t.db", tmp_path / "r.json"
    r = run("tune", "matmul", "--shape", "M=33,N=17,K=40", "--dtype", "float16", "--target", "h100", "--budget", "12",
            "--strategy", "pattern", "--seed", "1", "--db", str(db), "--json", str(out), "--activation", "relu")
    assert r.exit_code == 0, r.output
    assert "predicted ms" in r.output and "accepted (winner)" in r.output and "recorded as #1" in r.output
    doc = json.loads(out.read_text())
    assert doc["op"] == "matmul" and doc["timing_kind"] == "predicted" and doc["target"] == "h100"
    assert doc["verified"] is True and doc["baseline_ms"] is None and doc["time_ms"] > 0
    assert doc["variant"] in ("tiled", "splitk", "persistent") and doc["certificate"]["verdict"] == "accepted"
    listing = run("db", "list", "--db", str(db))
    assert listing.exit_code == 0 and "matmul" in listing.output


@pytest.mark.parametrize("args, fragment", [
    (["tune", "conv9d", "--shape", "M=1,N=1,K=1"], "unknown op"),
    (["tune", "matmul", "--shape", "M=1,N=1,K=1", "--dtype", "int3"], "unknown dtype"),
    (["tune", "matmul", "--shape", "M=1,N=1,Q=1"], "unknown axis of matmul"),
    (["tune", "matmul", "--shape", "M=1;N=1"], "shape item"),
    (["tune", "matmul", "--shape", "M=0,N=1,K=1"], "size of axis M"),
    (["tune", "matmul", "--shape", "M=-5,N=1,K=1"], "size of axis M"),
    (["tune", "matmul", "--shape", "M=1,N=1,K=1", "--target", "z80"], "unknown target"),
    (["tune", "matmul", "--shape", "M=1,N=1,K=1", "--strategy", "annealing"], "unknown strategy"),
    (["tune", "matmul", "--shape", "M=1,N=1,K=1", "--budget", "0"], "budget"),
    (["tune", "matmul", "--shape", "M=1,N=1,K=1", "--activation", "tanh"], "activation"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, args, fragment):
    db, out = tmp_path / "t.db", tmp_path / "r.json"
    r = CliRunner().invoke(cli, args + ["--db", str(db), "--json", str(out)])
    assert r.exit_code == 2, r.output
    assert fragment in r.output and "expected" in r.output
    assert not db.exists() and not out.exists()


def test_env_reports_device_target_versions_and_db(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "x.db"))
    r = run("env", "--json")
    doc = json.loads(r.output)
    assert doc["timing"] == "predicted" and doc["target"]["name"] == "h100"
    assert doc["db"] == str(tmp_path / "x.db") and doc["versions"]["triton"]
    assert "target:" in run("env").output
