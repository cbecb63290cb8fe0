"""The SQLite tuning database.

Two tables: ``records``, with a column per :class:`TuningRecord` field (dicts
as canonical JSON text) plus the derived lookup columns ``shape_key``,
``bucket`` and ``attrs_key``; and ``failures`` (schema version 2), one
:class:`FailureRecord` per problem key (op, shape, dtype, key attributes,
target) whose tuning failed, the latest, removed when a verified record of
that key is written. The schema version lives in ``PRAGMA user_version``.

**Migration.** A version 1 file (records only) is read as it is (it has no
failures); the first write to it adds the ``failures`` table and sets the
version to 2, in the same transaction, leaving every record untouched.

The file is created on the first write only: reading a database that does not
exist yields empty results and creates nothing. Each operation opens its own
short-lived connection, so several processes may share one file.
"""
from __future__ import annotations

import builtins
import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from ..core.errors import DatabaseError
from ..core.settings import settings
from .failure import FailureRecord
from .record import RecordError, TuningRecord, attrs_key, bucket, canonical_json, shape_key

SCHEMA_VERSION = 2
EXPORT_FORMAT = 1

_COLUMNS = (
    "op", "variant", "shape", "dtype", "attrs", "target", "fingerprint", "config", "timing_kind",
    "time_ms", "baseline_ms", "verified", "certificate", "created", "shape_key", "bucket", "attrs_key",
)
_SCHEMA = (
    """CREATE TABLE records (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        op TEXT NOT NULL, variant TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,
        attrs TEXT NOT NULL, target TEXT NOT NULL, fingerprint TEXT NOT NULL, config TEXT NOT NULL,
        timing_kind TEXT NOT NULL, time_ms REAL NOT NULL, baseline_ms REAL, verified INTEGER NOT NULL,
        certificate TEXT, created TEXT NOT NULL,
        shape_key TEXT NOT NULL, bucket TEXT NOT NULL, attrs_key TEXT NOT NULL)""",
    "CREATE INDEX records_lookup ON records (op, dtype, attrs_key, target, bucket)",
)
_FAILURES = (  # added by version 2
    """CREATE TABLE failures (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        op TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL, attrs TEXT NOT NULL, target TEXT NOT NULL,
        reason TEXT NOT NULL, attempts INTEGER NOT NULL, executor TEXT NOT NULL, provenance TEXT NOT NULL,
        created TEXT NOT NULL, shape_key TEXT NOT NULL, attrs_key TEXT NOT NULL,
        UNIQUE (op, shape_key, dtype, attrs_key, target))""",
)
# the statements taking a file of version v (the key) to v + 1
_MIGRATIONS: dict[int, tuple[str, ...]] = {1: _FAILURES}
_FAILURE_COLUMNS = ("op", "shape", "dtype", "attrs", "target", "reason", "attempts", "executor", "provenance",
                    "created", "shape_key", "attrs_key")
_FAILURE_FIELDS = _FAILURE_COLUMNS[:10]  # FailureRecord's fields (the last two are derived keys)
_KEY_WHERE = "op = ? AND shape_key = ? AND dtype = ? AND attrs_key = ? AND target = ?"
_generation = 0  # writes committed by this process to any tuning DB (see generation())


def generation() -> int:
    """How many writes (put, delete, import) this process has committed to tuning DBs: a cache of
    lookups (dispatch's) is stale once this changes, so writing a record invalidates it."""
    return _generation


_DUP_COLUMNS = ("op", "shape_key", "dtype", "attrs_key", "target", "variant", "config", "fingerprint",
                "timing_kind", "time_ms", "verified")


class TuningDB:
    """A tuning database file.

    Args:
        path: the SQLite file; ``None`` means ``warpsmith.core.settings.settings().db_path``.

    Raises:
        DatabaseError: if the file exists but is not a warpsmith tuning database
            of a schema version this code reads.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path: Path = Path(path).expanduser() if path is not None else settings().db_path
        if self.path.exists():
            with self._connect(write=False):
                pass

    def __repr__(self) -> str:
        return f"TuningDB({str(self.path)!r})"

    # ----------------------------------------------------------------- writes

    def put(self, record: TuningRecord, *, allow_unverified: bool = False) -> int:
        """Insert ``record`` and return its new id.

        The record is validated first, so nothing invalid is written. Its ``id``
        is ignored; an empty ``created`` is filled with the current UTC time.
        ``record`` itself is not modified.

        Raises:
            DatabaseError: if the record is invalid, or unverified and
                ``allow_unverified`` is false, or the file cannot be written.
        """
        rec = _checked(record.to_json(), allow_unverified)
        with self._connect(write=True) as conn:
            return self._insert(conn, rec)

    def delete(self, id: int) -> None:
        """Remove record ``id``.

        Raises:
            DatabaseError: if there is no such record.
        """
        self.get(id)  # raises without creating a file when the record (or the file) is missing
        with self._connect(write=True) as conn:
            if conn.execute("DELETE FROM records WHERE id = ?", (id,)).rowcount != 1:
                raise DatabaseError(f"{self.path}: no record with id {id!r}")

    def put_failure(self, failure: FailureRecord) -> int:
        """Record that tuning ``failure``'s problem failed, replacing an earlier failure of the same key
        (op, shape, dtype, attrs, target); returns its new id. An empty ``created`` is filled with
        the current UTC time; ``failure`` itself is not modified.

        Raises:
            DatabaseError: if a field is invalid (:class:`RecordError`) or the file cannot be written.
        """
        f = FailureRecord.from_json(failure.to_json())
        f.created = f.created or datetime.now(timezone.utc).isoformat()
        row = {"op": f.op, "shape": canonical_json(f.shape), "dtype": f.dtype, "attrs": canonical_json(f.attrs),
               "target": f.target, "reason": f.reason, "attempts": f.attempts, "executor": f.executor,
               "provenance": canonical_json(f.provenance), "created": f.created, "shape_key": shape_key(f.shape),
               "attrs_key": attrs_key(f.attrs)}
        with self._connect(write=True) as conn:
            conn.execute(f"DELETE FROM failures WHERE {_KEY_WHERE}",
                         (f.op, row["shape_key"], f.dtype, row["attrs_key"], f.target))
            cur = conn.execute(f"INSERT INTO failures ({', '.join(_FAILURE_COLUMNS)}) VALUES "
                               f"({', '.join('?' * len(_FAILURE_COLUMNS))})", tuple(row[c] for c in _FAILURE_COLUMNS))
            return int(cur.lastrowid)  # type: ignore[arg-type]

    def failures(self, op: str | None = None, target: str | None = None) -> builtins.list[FailureRecord]:
        """The recorded failures matching every given filter, oldest id first (none in a version 1
        file, which has no failures table yet)."""
        conds = [(c, v) for c, v in (("op", op), ("target", target)) if v is not None]
        where = ("WHERE " + " AND ".join(f"{c} = ?" for c, _ in conds)) if conds else ""
        with self._connect(write=False) as conn:
            if conn is None or conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                            "AND name = 'failures'").fetchone()[0] == 0:
                return []
            out = []
            for row in conn.execute(f"SELECT id, {', '.join(_FAILURE_FIELDS)} FROM failures {where} ORDER BY id",
                                    tuple(v for _, v in conds)):
                d = {c: row[c] for c in _FAILURE_FIELDS}
                try:
                    for c in ("shape", "attrs", "provenance"):
                        d[c] = json.loads(d[c])
                    out.append(FailureRecord.from_json({**d, "id": row["id"]}))
                except (DatabaseError, ValueError, TypeError) as e:
                    raise DatabaseError(f"{self.path}: failure {row['id']} is corrupt: {e}") from e
            return out

    def import_(self, path: str | Path | IO[str], *, allow_unverified: bool = False) -> int:
        """Insert the records of an export document, all or nothing.

        Every record is validated before anything is written; records that are
        exact duplicates (same problem key, variant, config, fingerprint,
        timing kind, time and verified flag) of stored ones, or of earlier
        ones in the same document, are skipped. Ids in the document are ignored.

        Args:
            path: a file written by :meth:`export`, or an open text file.
            allow_unverified: accept records whose ``verified`` is false.

        Returns:
            The number of records inserted.

        Raises:
            DatabaseError: naming the file, and for a bad record its index and
                field; nothing is written then.
        """
        name, items = read_export(path)
        records = []
        for i, item in enumerate(items):
            try:
                records.append(_checked(item, allow_unverified))
            except DatabaseError as e:
                raise DatabaseError(f"{name}: record {i}: {e}") from e
        if not records:
            return 0
        with self._connect(write=True) as conn:
            seen = {tuple(r) for r in conn.execute(f"SELECT {', '.join(_DUP_COLUMNS)} FROM records")}
            added = 0
            for rec in records:
                row = _row(rec)
                key = tuple(row[c] for c in _DUP_COLUMNS)
                if key not in seen:
                    seen.add(key)
                    self._insert(conn, rec)
                    added += 1
            return added

    # ------------------------------------------------------------------ reads

    def get(self, id: int) -> TuningRecord:
        """Return record ``id``.

        Raises:
            DatabaseError: if there is no such record (or no database file).
        """
        found = self._select("WHERE id = ?", (id,))
        if not found:
            raise DatabaseError(f"{self.path}: no record with id {id!r}")
        return found[0]

    def list(
        self, op: str | None = None, target: str | None = None, dtype: str | None = None
    ) -> builtins.list[TuningRecord]:
        """Return the records matching every given filter, oldest id first."""
        conds = [(c, v) for c, v in (("op", op), ("target", target), ("dtype", dtype)) if v is not None]
        where = ("WHERE " + " AND ".join(f"{c} = ?" for c, _ in conds)) if conds else ""
        return self._select(where, tuple(v for _, v in conds))

    def best(
        self,
        op: str,
        shape: Mapping[str, int],
        dtype: str,
        attrs: Mapping[str, Any],
        target: str,
        source_hashes: Mapping[str, str],
        fingerprint_match: Mapping[str, Any] | None = None,
    ) -> TuningRecord | None:
        """The first of :meth:`ranked`, or ``None``."""
        ranked = self.ranked(op, shape, dtype, attrs, target, source_hashes, fingerprint_match)
        return ranked[0] if ranked else None

    def ranked(
        self,
        op: str,
        shape: Mapping[str, int],
        dtype: str,
        attrs: Mapping[str, Any],
        target: str,
        source_hashes: Mapping[str, str],
        fingerprint_match: Mapping[str, Any] | None = None,
    ) -> list[TuningRecord]:
        """The usable records for a problem, best first.

        Only verified records whose ``fingerprint["source_hash"]`` equals
        ``source_hashes[record.variant]`` count (others are stale), and whose fingerprint
        agrees with every item of ``fingerprint_match`` (e.g. the Triton version that
        compiled and verified it). Records of exactly ``shape`` come first; then records
        of the same power-of-two bucket. Within each: measured before predicted, then
        lowest ``time_ms``, then newest.

        Raises:
            InvalidInputError: if ``shape`` or ``attrs`` is malformed.
        """
        exact = shape_key(shape)
        found = self._select(
            "WHERE op = ? AND dtype = ? AND attrs_key = ? AND target = ? AND bucket = ? AND verified = 1",
            (op, dtype, attrs_key(attrs), target, bucket(shape)),
        )
        match = dict(fingerprint_match or {})
        fresh = [r for r in found
                 if r.variant in source_hashes and r.fingerprint.get("source_hash") == source_hashes[r.variant]
                 and all(r.fingerprint.get(k) == v for k, v in match.items())]
        return sorted(fresh, key=lambda r: (shape_key(r.shape) != exact, r.timing_kind != "measured", r.time_ms,
                                            -r.created_at().timestamp(), -(r.id or 0)))

    def export(self, path_or_file: str | Path | IO[str], records: Iterable[TuningRecord] | None = None) -> int:
        """Write ``records`` (default: all) as ``{"warpsmith_db": 1, "records": [...]}``.

        Args:
            path_or_file: a file path (replaced atomically) or an open text file.
            records: the records to write; ``None`` means every stored record.

        Returns:
            The number of records written.
        """
        recs = list(self.list() if records is None else records)
        text = json.dumps({"warpsmith_db": EXPORT_FORMAT, "records": [r.to_json() for r in recs]}, indent=2) + "\n"
        if hasattr(path_or_file, "write"):
            path_or_file.write(text)  # type: ignore[union-attr]
            return len(recs)
        out = Path(path_or_file)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, out)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise DatabaseError(f"{out}: cannot write export: {e}") from e
        return len(recs)

    # -------------------------------------------------------------- internals

    def _select(self, where: str, params: tuple[Any, ...]) -> builtins.list[TuningRecord]:
        with self._connect(write=False) as conn:
            if conn is None:
                return []
            rows = conn.execute(f"SELECT id, {', '.join(_COLUMNS)} FROM records {where} ORDER BY id", params)
            out = []
            for row in rows:
                try:
                    out.append(_from_row(row))
                except (DatabaseError, ValueError, TypeError) as e:
                    raise DatabaseError(f"{self.path}: record {row['id']} is corrupt: {e}") from e
            return out

    def _insert(self, conn: sqlite3.Connection, rec: TuningRecord) -> int:
        row = _row(rec)
        cur = conn.execute(f"INSERT INTO records ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                           tuple(row[c] for c in _COLUMNS))
        if rec.verified:  # a verified record of the key clears its failure
            conn.execute(f"DELETE FROM failures WHERE {_KEY_WHERE}",
                         (rec.op, row["shape_key"], rec.dtype, row["attrs_key"], rec.target))
        return int(cur.lastrowid)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def _connect(self, write: bool) -> Iterator[Any]:
        """Yield a checked connection, or ``None`` when reading a missing or empty database.

        A write connection runs one transaction, committed when the block ends
        and rolled back if it raises. SQLite and OS errors become DatabaseError.
        """
        if not write and not self.path.exists():
            yield None
            return
        conn = None
        try:
            if write:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                conn.execute("BEGIN IMMEDIATE")
            else:
                uri = self.path.resolve().as_uri() + "?mode=ro"
                conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
            conn.row_factory = sqlite3.Row
            version = self._check_schema(conn)
            fresh = version == 0
            if write and version < SCHEMA_VERSION:
                steps = list(_SCHEMA + _FAILURES) if fresh else [
                    stmt for v in range(version, SCHEMA_VERSION) for stmt in _MIGRATIONS[v]]
                for stmt in steps + [f"PRAGMA user_version = {SCHEMA_VERSION}"]:
                    conn.execute(stmt)
            yield None if fresh and not write else conn
            if write:
                conn.execute("COMMIT")
                global _generation
                _generation += 1
        except (sqlite3.Error, OSError) as e:
            raise DatabaseError(f"{self.path}: {e}") from e
        finally:
            if conn is not None:
                if conn.in_transaction:
                    conn.rollback()
                conn.close()

    def _check_schema(self, conn: sqlite3.Connection) -> int:
        """The file's schema version: 0 for an empty (new) database, 1 .. SCHEMA_VERSION for one this
        code reads (an older one is migrated on the first write); raise DatabaseError for a foreign or
        unknown one."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if 1 <= version <= SCHEMA_VERSION:
            return int(version)
        if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            return 0
        if version == 0:
            raise DatabaseError(f"{self.path}: not a warpsmith tuning database (it has other tables)")
        raise DatabaseError(f"{self.path}: unknown schema version {version} (this warpsmith reads 1 to "
                            f"{SCHEMA_VERSION})")


def read_export(path: str | Path | IO[str]) -> tuple[str, builtins.list[Any]]:
    """The name and the (not yet validated) record objects of an export document (:meth:`TuningDB.export`).

    Raises:
        DatabaseError: naming the file, if it cannot be read or is not an export document.
    """
    name = getattr(path, "name", "<stream>") if hasattr(path, "read") else str(path)
    try:
        if hasattr(path, "read"):
            doc = json.load(path)  # type: ignore[arg-type]
        else:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise DatabaseError(f"{name}: cannot read an import document: {e}") from e
    if not isinstance(doc, dict) or doc.get("warpsmith_db") != EXPORT_FORMAT:
        got = doc.get("warpsmith_db") if isinstance(doc, dict) else type(doc).__name__
        raise DatabaseError(f'{name}: expected a JSON object with "warpsmith_db": {EXPORT_FORMAT}, got {got!r}')
    if not isinstance(doc.get("records"), list):
        raise DatabaseError(f'{name}: "records": expected a list, got {type(doc.get("records")).__name__}')
    return name, doc["records"]


def _checked(data: Any, allow_unverified: bool) -> TuningRecord:
    rec = TuningRecord.from_json(data)
    if not rec.verified and not allow_unverified:
        raise RecordError("verified", "a verified record (pass allow_unverified=True to store others)", False)
    if not rec.created:
        rec.created = datetime.now(timezone.utc).isoformat()
    rec.id = None
    return rec


def _row(rec: TuningRecord) -> dict[str, Any]:
    return {
        "op": rec.op, "variant": rec.variant, "shape": canonical_json(rec.shape), "dtype": rec.dtype,
        "attrs": canonical_json(rec.attrs), "target": rec.target, "fingerprint": canonical_json(rec.fingerprint),
        "config": canonical_json(rec.config), "timing_kind": rec.timing_kind, "time_ms": rec.time_ms,
        "baseline_ms": rec.baseline_ms, "verified": int(rec.verified),
        "certificate": None if rec.certificate is None else canonical_json(rec.certificate),
        "created": rec.created, "shape_key": shape_key(rec.shape), "bucket": bucket(rec.shape),
        "attrs_key": attrs_key(rec.attrs),
    }


def _from_row(row: sqlite3.Row) -> TuningRecord:
    d = {c: row[c] for c in _COLUMNS[:14]}
    for c in ("shape", "attrs", "fingerprint", "config"):
        d[c] = json.loads(d[c])
    d["certificate"] = None if d["certificate"] is None else json.loads(d["certificate"])
    d["verified"] = bool(d["verified"])
    d["id"] = row["id"]
    return TuningRecord.from_json(d)
