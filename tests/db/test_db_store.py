"""Tests of warpsmith.db: records, keys, the SQLite store, export and import."""
from __future__ import annotations

import io
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from warpsmith.db import SCHEMA_VERSION, RecordError, TuningDB, TuningRecord, attrs_key, bucket, shape_key
from warpsmith.errors import DatabaseError, InvalidInputError

HASHES = {"tiled": "h-tiled", "splitk": "h-splitk", "persistent": "h-persistent"}
ATTRS = {"bias": False, "activation": "none", "layout": "nn"}


def make(**over: Any) -> TuningRecord:
    """A valid verified record; keyword arguments replace fields."""
    variant = over.get("variant", "tiled")
    d: dict[str, Any] = {
        "op": "matmul", "variant": variant, "shape": {"M": 257, "N": 129, "K": 300}, "dtype": "float16",
        "attrs": dict(ATTRS), "target": "h100",
        "fingerprint": {"gpu": "H100", "driver": "550.1", "triton": "3.6.0", "torch": "2.13.0",
                        "warpsmith": "0.1.0", "source_hash": HASHES.get(variant, "h-other")},
        "config": {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4}, "timing_kind": "measured", "time_ms": 1.0,
        "baseline_ms": 2.0, "verified": True, "certificate": {"max_abs_err": 0.001, "trials": 3},
    }
    d.update(over)
    return TuningRecord(**d)


def best(db: TuningDB, shape: dict[str, int] | None = None, hashes: dict[str, str] = HASHES,
         **over: Any) -> TuningRecord | None:
    args: dict[str, Any] = {"op": "matmul", "dtype": "float16", "attrs": dict(ATTRS), "target": "h100"}
    args.update(over)
    return db.best(args["op"], shape or {"M": 257, "N": 129, "K": 300}, args["dtype"], args["attrs"],
                   args["target"], hashes)


def same_content(a: TuningRecord, b: TuningRecord) -> bool:
    da, dbb = a.to_json(), b.to_json()
    da.pop("id"), dbb.pop("id")
    return da == dbb


@pytest.fixture
def db(tmp_path: Path) -> TuningDB:
    return TuningDB(tmp_path / "tuning.db")


# ----------------------------------------------------------------- record / keys

def test_json_round_trip() -> None:
    r = make(created="2025-01-02T03:04:05+00:00", id=7)
    back = TuningRecord.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r and back is not r
    assert back.to_json()["shape"] is not r.shape


def test_keys() -> None:
    assert shape_key({"M": 257, "N": 129, "K": 300}) == "K=300,M=257,N=129"
    assert bucket({"M": 257, "N": 129, "K": 300}) == "K=512,M=512,N=256"
    assert bucket({"B": 1, "M": 256, "N": 2}) == "B=1,M=256,N=2"
    assert attrs_key({"b": 1, "a": [1, 2]}) == attrs_key({"a": [1, 2], "b": 1}) == '{"a":[1,2],"b":1}'
    with pytest.raises(InvalidInputError, match="M"):
        shape_key({"M": 0})
    with pytest.raises(InvalidInputError):
        bucket({})


BAD_FIELDS = [
    ("op", ""),
    ("variant", 3),
    ("shape", {}),
    ("shape", {"M": 0, "N": 1}),
    ("shape", {"M": 1.5}),
    ("shape", {"M": True}),
    ("shape", [1, 2]),
    ("dtype", "float64"),
    ("attrs", ["bias"]),
    ("attrs", {"x": float("nan")}),
    ("target", None),
    ("fingerprint", {"gpu": "H100"}),
    ("fingerprint", {"gpu": "H100", "driver": 5, "triton": "", "torch": "", "warpsmith": "", "source_hash": "h"}),
    ("config", "BLOCK_M=64"),
    ("config", {"f": object()}),
    ("timing_kind", "guessed"),
    ("time_ms", 0),
    ("time_ms", -1.0),
    ("time_ms", math.inf),
    ("time_ms", math.nan),
    ("time_ms", "1.0"),
    ("time_ms", True),
    ("baseline_ms", -2.0),
    ("verified", "yes"),
    ("verified", 1),
    ("certificate", "ok"),
    ("created", "yesterday"),
    ("created", 5),
    ("id", "1"),
]


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
def test_from_json_names_the_bad_field(field: str, value: Any) -> None:
    d = make().to_json()
    d[field] = value
    with pytest.raises(DatabaseError) as info:
        TuningRecord.from_json(d)
    assert isinstance(info.value, RecordError)
    assert info.value.field.split(".")[0] == field
    msg = str(info.value)
    assert field in msg and "expected" in msg and "got" in msg


def test_from_json_missing_and_unknown_fields() -> None:
    d = make().to_json()
    del d["time_ms"]
    with pytest.raises(DatabaseError, match="time_ms"):
        TuningRecord.from_json(d)
    d = make().to_json()
    d["colour"] = "red"
    with pytest.raises(DatabaseError, match="colour"):
        TuningRecord.from_json(d)
    d = make().to_json()
    del d["created"], d["id"]
    assert TuningRecord.from_json(d).created == ""
    with pytest.raises(DatabaseError, match="record"):
        TuningRecord.from_json([1, 2])  # type: ignore[arg-type]


# --------------------------------------------------------------------- store

def test_put_get_round_trip(db: TuningDB) -> None:
    r = make(shape={"B": 2, "M": 257, "N": 129, "K": 300}, baseline_ms=None, certificate=None)
    rid = db.put(r)
    got = db.get(rid)
    assert got.id == rid and r.id is None and r.created == ""  # the argument is not modified
    assert got.created and got.created_at().tzinfo is not None
    r.created = got.created
    assert same_content(got, r)
    assert db.list() == [got]


def test_put_refuses_unverified_and_invalid(db: TuningDB) -> None:
    with pytest.raises(DatabaseError, match="verified"):
        db.put(make(verified=False))
    with pytest.raises(DatabaseError, match="time_ms"):
        db.put(make(time_ms=float("nan")))
    assert not db.path.exists()  # nothing written, not even an empty file
    rid = db.put(make(verified=False), allow_unverified=True)
    assert db.get(rid).verified is False


def test_list_filters_get_delete(db: TuningDB) -> None:
    a = db.put(make())
    b = db.put(make(target="h200"))
    c = db.put(make(op="conv", dtype="float32"))
    assert [r.id for r in db.list()] == [a, b, c]
    assert [r.id for r in db.list(target="h200")] == [b]
    assert [r.id for r in db.list(op="conv", dtype="float32")] == [c]
    assert db.list(op="conv", dtype="float16") == []
    db.delete(b)
    with pytest.raises(DatabaseError, match=str(b)):
        db.get(b)
    with pytest.raises(DatabaseError):
        db.delete(b)
    assert db.put(make()) not in (a, b, c)  # ids are never reused


def test_missing_file_reads_empty_and_creates_nothing(tmp_path: Path) -> None:
    db = TuningDB(tmp_path / "sub" / "dir" / "t.db")
    assert db.list() == [] and best(db) is None
    with pytest.raises(DatabaseError, match="no record"):
        db.get(1)
    with pytest.raises(DatabaseError):
        db.delete(1)
    db.export(tmp_path / "out.json")
    assert not (tmp_path / "sub").exists()
    db.put(make())
    assert db.path.exists() and len(db.list()) == 1


def test_default_path_comes_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARPSMITH_DB", str(tmp_path / "env.db"))
    assert TuningDB().path == tmp_path / "env.db"
    TuningDB().put(make())
    assert len(TuningDB(tmp_path / "env.db").list()) == 1


def test_rejects_foreign_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all, just some bytes" * 20)
    with pytest.raises(DatabaseError, match="junk.db"):
        TuningDB(junk)
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 98}")
    with pytest.raises(DatabaseError, match=rf"newer\.db.*version {SCHEMA_VERSION + 98}"):
        TuningDB(newer)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(DatabaseError, match="other.db"):
        TuningDB(other)
    empty = tmp_path / "empty.db"
    empty.touch()
    assert TuningDB(empty).list() == []
    TuningDB(empty).put(make())
    with sqlite3.connect(empty) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


# ---------------------------------------------------------------------- best

def test_best_prefers_measured_then_fastest_then_newest(db: TuningDB) -> None:
    db.put(make(timing_kind="predicted", time_ms=0.1))
    slow = db.put(make(time_ms=3.0))
    assert best(db).id == slow  # measured beats a faster prediction
    fast = db.put(make(variant="splitk", time_ms=2.0))
    assert best(db).id == fast
    old = db.put(make(time_ms=1.5, created="2024-01-01T00:00:00Z"))
    new = db.put(make(time_ms=1.5, created="2025-06-01T00:00:00+00:00", config={"BLOCK_M": 128}))
    db.put(make(time_ms=1.5, created="2023-01-01T00:00:00"))
    assert old != new and best(db).id == new
    db.put(make(time_ms=0.5, verified=False), allow_unverified=True)
    assert best(db).id == new  # unverified records never win


def test_best_only_predictions(db: TuningDB) -> None:
    db.put(make(timing_kind="predicted", time_ms=2.0))
    p = db.put(make(timing_kind="predicted", time_ms=1.0))
    assert best(db).id == p


def test_best_skips_stale_records(db: TuningDB) -> None:
    good = db.put(make(time_ms=5.0))
    db.put(make(variant="splitk", time_ms=1.0))
    db.put(make(variant="experimental", time_ms=0.5))  # variant unknown to the caller
    assert best(db, hashes={"tiled": "h-tiled", "splitk": "changed"}).id == good
    assert best(db, hashes={"splitk": "h-splitk", "tiled": "h-tiled"}).variant == "splitk"
    assert best(db, hashes={"tiled": "changed"}) is None
    assert best(db, hashes={}) is None


def test_best_exact_shape_then_bucket(db: TuningDB) -> None:
    near = db.put(make(shape={"M": 300, "N": 200, "K": 500}, time_ms=0.5))  # same bucket, faster
    exact = db.put(make(time_ms=1.0))
    assert best(db).id == exact
    db.delete(exact)
    assert best(db).id == near  # bucket fallback
    assert best(db, shape={"M": 257, "N": 129, "K": 600}) is None  # K bucket 1024
    assert best(db, shape={"M": 257, "N": 129, "K": 300, "B": 2}) is None


def test_best_matches_the_whole_problem_key(db: TuningDB) -> None:
    db.put(make())
    assert best(db) is not None
    assert best(db, op="conv") is None
    assert best(db, dtype="bfloat16") is None
    assert best(db, target="h200") is None
    assert best(db, attrs={**ATTRS, "bias": True}) is None
    assert best(db, attrs=dict(reversed(list(ATTRS.items())))) is not None  # key order is irrelevant


# ------------------------------------------------------------ export / import

def test_export_import_reproduces_records(db: TuningDB, tmp_path: Path) -> None:
    for r in (make(), make(variant="splitk", time_ms=0.7, baseline_ms=None), make(target="h200", certificate=None),
              make(verified=False)):
        db.put(r, allow_unverified=True)
    out = tmp_path / "dump.json"
    assert db.export(out) == 4
    doc = json.loads(out.read_text())
    assert doc["warpsmith_db"] == 1 and len(doc["records"]) == 4
    fresh = TuningDB(tmp_path / "fresh.db")
    with pytest.raises(DatabaseError, match="record 3.*verified"):
        fresh.import_(out)
    assert fresh.list() == []
    assert fresh.import_(out, allow_unverified=True) == 4
    old, new = db.list(), fresh.list()
    assert len(new) == 4 and all(same_content(a, b) for a, b in zip(old, new))
    assert fresh.import_(out, allow_unverified=True) == 0  # exact duplicates are skipped
    assert len(fresh.list()) == 4


def test_export_to_stream_and_subset(db: TuningDB, tmp_path: Path) -> None:
    db.put(make())
    keep = db.put(make(op="conv"))
    buf = io.StringIO()
    db.export(buf, db.list(op="conv"))
    doc = json.loads(buf.getvalue())
    assert [r["id"] for r in doc["records"]] == [keep]
    other = TuningDB(tmp_path / "o.db")
    assert other.import_(io.StringIO(buf.getvalue())) == 1 and other.list()[0].op == "conv"


def test_import_is_all_or_nothing(db: TuningDB, tmp_path: Path) -> None:
    existing = db.put(make())
    good = [make(time_ms=t).to_json() for t in (0.5, 0.6)]
    bad = make().to_json()
    bad["time_ms"] = -1
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"warpsmith_db": 1, "records": [*good, bad]}))
    with pytest.raises(DatabaseError) as info:
        db.import_(f)
    assert "record 2" in str(info.value) and "time_ms" in str(info.value) and "bad.json" in str(info.value)
    assert [r.id for r in db.list()] == [existing]
    fresh = TuningDB(tmp_path / "fresh.db")
    with pytest.raises(DatabaseError):
        fresh.import_(f)
    assert not fresh.path.exists()


def test_import_skips_duplicates_within_a_file(db: TuningDB, tmp_path: Path) -> None:
    r = make(created="2025-01-01T00:00:00+00:00").to_json()
    f = tmp_path / "dup.json"
    f.write_text(json.dumps({"warpsmith_db": 1, "records": [r, r, {**r, "time_ms": 2.0}]}))
    assert db.import_(f) == 2


def test_import_deduplicates_by_fingerprint_too(db: TuningDB, tmp_path: Path) -> None:
    """Records equal but for the fingerprint (another Triton, another kernel source) are different
    results: an import keeps each, and drops only the exact duplicate."""
    r = make(created="2025-01-01T00:00:00+00:00").to_json()
    other_triton = {**r, "fingerprint": {**r["fingerprint"], "triton": "3.9.0"}}
    other_source = {**r, "fingerprint": {**r["fingerprint"], "source_hash": "h-tiled-2"}}
    db.put(make())
    f = tmp_path / "fp.json"
    f.write_text(json.dumps({"warpsmith_db": 1, "records": [r, other_triton, other_source]}))
    assert db.import_(f) == 2
    got = sorted((x.fingerprint["triton"], x.fingerprint["source_hash"]) for x in db.list())
    assert got == [("3.6.0", "h-tiled"), ("3.6.0", "h-tiled-2"), ("3.9.0", "h-tiled")]
    assert db.import_(f) == 0


@pytest.mark.parametrize("text", ["not json", "[]", '{"warpsmith_db": 2, "records": []}',
                                  '{"warpsmith_db": 1, "records": {}}', '{"records": []}'])
def test_import_rejects_bad_documents(db: TuningDB, tmp_path: Path, text: str) -> None:
    f = tmp_path / "doc.json"
    f.write_text(text)
    with pytest.raises(DatabaseError, match="doc.json"):
        db.import_(f)
    assert not db.path.exists()


def test_import_missing_file(db: TuningDB, tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="nope.json"):
        db.import_(tmp_path / "nope.json")
