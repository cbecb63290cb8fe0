"""The tuning DB's failures table (schema version 2): stored, replaced per key, cleared by a verified
record of the key, listed by `warpsmith db failures`, not carried by export/merge; and a version 1
file (records only) opened and migrated without loss."""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from test_db_store import make  # noqa: E402

from warpsmith.db import SCHEMA_VERSION, FailureRecord, RecordError, TuningDB  # noqa: E402
from warpsmith.db.store import _row  # noqa: E402

# the version 1 schema, as warpsmith wrote it before the failures table (kept here verbatim: a test fixture)
V1_SCHEMA = (
    """CREATE TABLE records (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        op TEXT NOT NULL, variant TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,
        attrs TEXT NOT NULL, target TEXT NOT NULL, fingerprint TEXT NOT NULL, config TEXT NOT NULL,
        timing_kind TEXT NOT NULL, time_ms REAL NOT NULL, baseline_ms REAL, verified INTEGER NOT NULL,
        certificate TEXT, created TEXT NOT NULL,
        shape_key TEXT NOT NULL, bucket TEXT NOT NULL, attrs_key TEXT NOT NULL)""",
    "CREATE INDEX records_lookup ON records (op, dtype, attrs_key, target, bucket)",
    "PRAGMA user_version = 1",
)


def fail(**over) -> FailureRecord:
    rec = make()
    d = {"op": rec.op, "shape": dict(rec.shape), "dtype": rec.dtype, "attrs": dict(rec.attrs), "target": rec.target,
         "reason": "worker process lost 3 times: boom", "attempts": 3, "executor": "local",
         "provenance": {"recorded_by": "here", "lost": ["a", "b"]}}
    d.update(over)
    return FailureRecord(**d)


def _version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def test_a_version_1_file_is_read_then_migrated_without_loss(tmp_path):
    old = tmp_path / "v1.db"
    rec = make(created="2026-01-02T03:04:05+00:00")
    row = _row(rec)
    with sqlite3.connect(old) as conn:
        for stmt in V1_SCHEMA:
            conn.execute(stmt)
        cols = [c for c in row]
        conn.execute(f"INSERT INTO records ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                     [row[c] for c in cols])
    db = TuningDB(old)
    (got,) = db.list()
    assert got.to_json() == {**rec.to_json(), "id": 1}
    assert db.failures() == [] and _version(old) == 1  # reading changes nothing
    db.put_failure(fail(shape={"M": 8, "N": 8, "K": 8}))
    assert _version(old) == SCHEMA_VERSION == 2
    assert [r.to_json() for r in db.list()] == [{**rec.to_json(), "id": 1}]
    assert [f.shape for f in db.failures()] == [{"M": 8, "N": 8, "K": 8}]
    db.put(make(time_ms=0.5))  # the migrated file takes records as before
    assert len(db.list()) == 2


def test_failures_are_replaced_per_key_and_cleared_by_a_verified_record(tmp_path):
    db = TuningDB(tmp_path / "t.db")
    db.put_failure(fail())
    db.put_failure(fail(reason="no verified record", attempts=1))  # the same key: the latest replaces it
    other = fail(shape={"M": 1, "N": 2, "K": 3})
    db.put_failure(other)
    found = db.failures()
    assert [(f.reason, f.attempts) for f in found] == [("no verified record", 1), (other.reason, 3)]
    assert found[0].created and found[0].provenance["lost"] == ["a", "b"]
    assert db.failures(op="rms_norm") == [] and len(db.failures(target="h100")) == 2
    db.put(make(verified=False), allow_unverified=True)  # an unverified record clears nothing
    assert len(db.failures()) == 2
    db.put(make())  # a verified record of the first key clears its failure only
    assert [f.shape for f in db.failures()] == [other.shape]
    with pytest.raises(RecordError, match="attempts"):
        db.put_failure(fail(attempts=-1))
    with pytest.raises(RecordError, match="reason"):
        db.put_failure(fail(reason=""))


def test_export_and_import_carry_records_not_failures(tmp_path):
    src = TuningDB(tmp_path / "a.db")
    src.put(make(shape={"M": 1, "N": 2, "K": 3}))
    src.put_failure(fail())
    out = tmp_path / "out.json"
    assert src.export(out) == 1
    doc = json.loads(out.read_text())
    assert set(doc) == {"warpsmith_db", "records"}  # no failures in an export
    dst = TuningDB(tmp_path / "b.db")
    dst.put_failure(fail(shape={"M": 1, "N": 2, "K": 3}))
    assert dst.import_(out) == 1
    assert dst.failures() == []  # nothing imported as a failure; the imported verified record cleared dst's own


def test_cli_db_failures(tmp_path):
    from warpsmith.cli.main import cli

    path = tmp_path / "t.db"
    got = CliRunner().invoke(cli, ["db", "failures", "--db", str(path)])
    assert got.exit_code == 0 and "no failures in" in got.output
    TuningDB(path).put_failure(fail())
    got = CliRunner().invoke(cli, ["db", "failures", "--db", str(path)])
    assert got.exit_code == 0, got.output
    assert "matmul K=300,M=257,N=129 float16" in got.output and "worker process lost 3 times: boom" in got.output
    assert "3 tries, executor local, node here" in got.output
    got = CliRunner().invoke(cli, ["db", "failures", "--db", str(path), "--json"])
    (doc,) = json.loads(got.output)
    assert doc["reason"] == "worker process lost 3 times: boom" and doc["attempts"] == 3 and doc["id"] == 1
