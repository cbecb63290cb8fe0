"""Tests of the ``warpsmith db`` CLI group."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from warpsmith.cli.db_cmd import db as db_group
from warpsmith.db import TuningDB, TuningRecord


def make(**over: object) -> TuningRecord:
    d: dict = {
        "op": "matmul", "variant": "tiled", "shape": {"M": 257, "N": 129, "K": 300}, "dtype": "float16",
        "attrs": {"bias": False, "activation": "none", "layout": "nn"}, "target": "h100",
        "fingerprint": {"gpu": "H100", "driver": None, "triton": "3.6.0", "torch": "2.13.0",
                        "warpsmith": "0.1.0", "source_hash": "abc"},
        "config": {"BLOCK_M": 64}, "timing_kind": "measured", "time_ms": 1.25, "baseline_ms": 2.0, "verified": True,
        "certificate": None,
    }
    d.update(over)
    return TuningRecord(**d)


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(db_group, list(args), input=input)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "t.db"
    store = TuningDB(p)
    store.put(make())
    store.put(make(op="conv", variant="splitk", target="h200", dtype="bfloat16", timing_kind="predicted"))
    return p


def test_list_empty_creates_nothing(tmp_path: Path) -> None:
    p = tmp_path / "none" / "t.db"
    res = run("list", "--db", str(p))
    assert res.exit_code == 0, res.output
    assert f"no records in {p}" in res.stdout
    assert not p.parent.exists()


def test_list_uses_settings_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "env.db"))
    res = run("list")
    assert res.exit_code == 0 and str(tmp_path / "env.db") in res.stdout


def test_list_table_and_filters(path: Path) -> None:
    res = run("list", "--db", str(path))
    assert res.exit_code == 0, res.output
    for text in ("matmul", "conv", "tiled", "splitk", "K=300,M=257,N=129", "h200", "predicted", "1.25"):
        assert text in res.stdout
    res = run("list", "--db", str(path), "--op", "conv")
    assert res.exit_code == 0 and "conv" in res.stdout and "matmul" not in res.stdout
    res = run("list", "--db", str(path), "--target", "h100", "--dtype", "bfloat16")
    assert res.exit_code == 0 and "no records in" in res.stdout


def test_show(path: Path) -> None:
    res = run("show", "2", "--db", str(path))
    assert res.exit_code == 0, res.output
    assert TuningRecord.from_json(json.loads(res.stdout)) == TuningDB(path).get(2)


@pytest.mark.parametrize("rid", ["99", "0"])
def test_show_missing_id_exits_2(path: Path, rid: str) -> None:
    res = run("show", rid, "--db", str(path))
    assert res.exit_code == 2
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1 and rid in res.stderr
    assert res.stdout == ""


def test_not_a_database_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "junk.db"
    p.write_text("hello, not sqlite\n" * 100)
    res = run("list", "--db", str(p))
    assert res.exit_code == 2 and res.stderr.startswith("error: ") and "junk.db" in res.stderr


def test_export_import_round_trip(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "dump.json"
    res = run("export", str(out), "--db", str(path))
    assert res.exit_code == 0, res.output
    fresh = tmp_path / "fresh.db"
    res = run("import", str(out), "--db", str(fresh))
    assert res.exit_code == 0, res.output
    assert "imported 2" in res.stdout
    strip = [{k: v for k, v in r.to_json().items() if k != "id"} for r in TuningDB(path).list()]
    assert [{k: v for k, v in r.to_json().items() if k != "id"} for r in TuningDB(fresh).list()] == strip
    res = run("import", str(out), "--db", str(fresh))
    assert res.exit_code == 0 and "imported 0" in res.stdout


def test_export_stdout_and_import_stdin(path: Path, tmp_path: Path) -> None:
    res = run("export", "-", "--db", str(path), "--op", "conv")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["warpsmith_db"] == 1 and [r["op"] for r in doc["records"]] == ["conv"]
    fresh = tmp_path / "fresh.db"
    res = run("import", "-", "--db", str(fresh), input=res.stdout)
    assert res.exit_code == 0, res.output
    assert [r.op for r in TuningDB(fresh).list()] == ["conv"]


def test_bad_import_file_exits_2_and_writes_nothing(path: Path, tmp_path: Path) -> None:
    good = make().to_json()
    bad = dict(good, dtype="float64")
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"warpsmith_db": 1, "records": [good, bad]}))
    before = TuningDB(path).list()
    res = run("import", str(f), "--db", str(path))
    assert res.exit_code == 2
    assert res.stderr.startswith("error: ") and "record 1" in res.stderr and "dtype" in res.stderr
    assert TuningDB(path).list() == before
    f.write_text("{not json")
    res = run("import", str(f), "--db", str(tmp_path / "new.db"))
    assert res.exit_code == 2 and "bad.json" in res.stderr
    assert not (tmp_path / "new.db").exists()
    res = run("import", str(tmp_path / "missing.json"), "--db", str(path))
    assert res.exit_code == 2 and "missing.json" in res.stderr


def test_unverified_import_needs_flag(tmp_path: Path) -> None:
    f = tmp_path / "u.json"
    f.write_text(json.dumps({"warpsmith_db": 1, "records": [make(verified=False).to_json()]}))
    res = run("import", str(f), "--db", str(tmp_path / "u.db"))
    assert res.exit_code == 2 and "verified" in res.stderr
    res = run("import", str(f), "--db", str(tmp_path / "u.db"), "--allow-unverified")
    assert res.exit_code == 0 and len(TuningDB(tmp_path / "u.db").list()) == 1
