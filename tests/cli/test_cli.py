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


def _invoke_tune(*extra):
    return CliRunner().invoke(cli, ["tune", "rms_norm", "--shape", "M=5,N=300", "--dtype", "float16", "--target",
                                    "h100", "--budget", "16", "--no-compiler-facts", *extra], catch_exceptions=False)


def test_tune_reports_progress_ties_and_the_db_when_not_a_terminal(monkeypatch, tmp_path):
    """Issue 27: piped (stderr not a terminal, where the progress bar does not render) `tune` says
    what it is doing line by line; the leaderboard says when predicted times tie; the DB location
    (here the default, $WARPSMITH_DB) is printed with how to change it."""
    db = tmp_path / "default.db"
    monkeypatch.setenv("WARPSMITH_DB", str(db))
    r = _invoke_tune("--prove")
    assert r.exit_code == 0, r.output
    err = r.stderr.splitlines()
    assert err[0].startswith("tuning rms_norm[M=5,N=300]") and "predicted times" in err[0]
    for stage in ("prescreen: ranked", "search: 8/16 candidates evaluated", "search: 16 candidates evaluated",
                  "verifying finalist 1 of 4: row", "  proving the kernels symbolically",
                  "  testing: error contract", "  passed"):
        assert any(line.startswith(stage) for line in err), (stage, r.stderr)
    out = r.stdout
    assert "cannot separate them" in out and "configs (#1-#" in out and "µs (predicted)" in out, out
    assert "│ =1 │" in out  # tied ranks are shown as shared
    assert f"recorded as #1 in {db} (--db or WARPSMITH_DB to change)" in out, out
    assert db.exists()


def test_tune_says_where_rejected_finalists_are_recorded(monkeypatch, tmp_path):
    from warpsmith import tune as T
    from warpsmith.verify.certificate import Check

    real = T.verify_candidate

    def failing(*a, **k):
        cert = real(*a, **k)
        cert.checks.append(Check("error_contract", "failed(planted)"))
        return cert

    monkeypatch.setattr(T, "verify_candidate", failing)
    db = tmp_path / "t.db"
    r = _invoke_tune("--no-prove", "--finalists", "1", "--db", str(db))
    assert r.exit_code == 1, r.output
    assert "  rejected: error_contract: failed(planted)" in r.stderr.splitlines()
    assert f"the rejected finalists are recorded (never dispatched) in {db} (--db or WARPSMITH_DB to change)" in r.stderr


def test_tie_groups_count_the_whole_board_and_only_shown_rows_start_one():
    from types import SimpleNamespace as S

    from warpsmith.cli.tune_cmd import _tie_groups

    board = [S(ms=x) for x in (1.0, 1.0, 2.0, 3.0, 3.0 * (1 + 1e-12), 3.0, 4.0, 5.0, 5.0)]
    assert _tie_groups(board, rows=10) == [(0, 2), (3, 3), (7, 2)]
    assert _tie_groups(board, rows=4) == [(0, 2), (3, 3)]  # the second tie starts at #4, runs past the rows
    assert _tie_groups([S(ms=1.0), S(ms=1.5)], rows=10) == []
