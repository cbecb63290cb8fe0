"""One row of the tuning database and the canonical keys used to look it up.

A :class:`TuningRecord` says: for this problem (``op``, ``shape``, ``dtype``,
``attrs``) on this hardware model (``target``), this ``variant`` with this
``config`` took ``time_ms``. ``fingerprint`` pins the software that produced
it; its ``source_hash`` lets a lookup skip records of a kernel whose source has
changed since.

:meth:`TuningRecord.from_json` is the single validator: everything the store
writes or imports passes through it first.
"""
from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any

from ..core.errors import DatabaseError, InvalidInputError

DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32")
TIMING_KINDS: tuple[str, ...] = ("measured", "predicted")
FINGERPRINT_KEYS: tuple[str, ...] = ("gpu", "driver", "triton", "torch", "warpsmith", "source_hash")


class RecordError(DatabaseError):
    """A record field is not acceptable.

    Attributes:
        field: name of the offending field (``"shape"``, ``"fingerprint.source_hash"``...).
        expected: what was expected, in words.
        given: the value that was given.
    """

    def __init__(self, field: str, expected: str, given: object) -> None:
        self.field, self.expected, self.given = field, expected, given
        super().__init__(f"record field {field!r}: expected {expected}, got {given!r}")


@dataclass
class TuningRecord:
    """One tuning result. See the module docstring for the meaning of each field."""

    op: str
    variant: str
    shape: dict[str, int]
    dtype: str
    attrs: dict[str, Any]
    target: str
    fingerprint: dict[str, Any]
    config: dict[str, Any]
    timing_kind: str
    time_ms: float
    baseline_ms: float | None
    verified: bool
    certificate: dict | None
    created: str = ""
    id: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the record as a JSON-able dict (a deep copy; every field, in declaration order)."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> TuningRecord:
        """Build a record from :meth:`to_json` output, validating every field.

        Args:
            d: a mapping with exactly the record's field names (``created`` and
                ``id`` may be left out).

        Returns:
            A new record holding copies of the values.

        Raises:
            RecordError: (a :class:`DatabaseError`) naming the first bad field,
                what was expected and what was given.
        """
        if not isinstance(d, Mapping):
            raise RecordError("record", "a JSON object", d)
        names = [f.name for f in fields(TuningRecord)]
        unknown = sorted(set(d) - set(names))
        if unknown:
            raise RecordError(str(unknown[0]), "one of the record fields " + ", ".join(names), d[unknown[0]])
        for name in names:
            if name not in d and name not in ("created", "id"):
                raise RecordError(name, "a value (field is missing)", None)
        v = copy.deepcopy(dict(d))
        for name in ("op", "variant", "target"):
            _nonempty_str(name, v[name])
        _check_shape("shape", v["shape"])
        if v["dtype"] not in DTYPES:
            raise RecordError("dtype", "one of " + ", ".join(DTYPES), v["dtype"])
        for name in ("attrs", "config"):
            _json_object(name, v[name])
        _check_fingerprint(v["fingerprint"])
        if v["timing_kind"] not in TIMING_KINDS:
            raise RecordError("timing_kind", "one of " + ", ".join(TIMING_KINDS), v["timing_kind"])
        v["time_ms"] = _positive_float("time_ms", v["time_ms"])
        if v["baseline_ms"] is not None:
            v["baseline_ms"] = _positive_float("baseline_ms", v["baseline_ms"])
        if not isinstance(v["verified"], bool):
            raise RecordError("verified", "true or false", v["verified"])
        if v["certificate"] is not None:
            _json_object("certificate", v["certificate"])
        created = v.get("created", "")
        if not isinstance(created, str) or (created and _parse_time(created) is None):
            raise RecordError("created", "an ISO-8601 timestamp or an empty string", created)
        rid = v.get("id")
        if rid is not None and (isinstance(rid, bool) or not isinstance(rid, int) or rid < 1):
            raise RecordError("id", "a positive integer or null", rid)
        v["created"], v["id"] = created, rid
        return TuningRecord(**v)

    def created_at(self) -> datetime:
        """``created`` as an aware UTC datetime (the epoch when ``created`` is empty)."""
        return _parse_time(self.created) or datetime.fromtimestamp(0, timezone.utc)


def shape_key(shape: Mapping[str, int]) -> str:
    """Canonical text of a shape: ``"K=300,M=257,N=129"`` (keys sorted).

    Raises:
        InvalidInputError: if ``shape`` is not a non-empty mapping of names to positive ints.
    """
    _check_shape_arg(shape)
    return ",".join(f"{k}={shape[k]}" for k in sorted(shape))


def bucket(shape: Mapping[str, int]) -> str:
    """Like :func:`shape_key` with every dim rounded up to a power of two (``257 -> 512``, ``256 -> 256``)."""
    _check_shape_arg(shape)
    return ",".join(f"{k}={1 << (shape[k] - 1).bit_length()}" for k in sorted(shape))


def attrs_key(attrs: Mapping[str, Any]) -> str:
    """Canonical JSON of ``attrs`` (sorted keys, no spaces), equal for equal dicts.

    Raises:
        InvalidInputError: if ``attrs`` is not a JSON-able mapping.
    """
    try:
        return canonical_json(dict(attrs))
    except (TypeError, ValueError) as e:
        raise InvalidInputError("attrs", "a JSON-able mapping with string keys", attrs) from e


def canonical_json(value: Any) -> str:
    """Deterministic compact JSON (sorted keys; NaN and infinities refused)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _parse_time(text: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def _nonempty_str(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise RecordError(name, "a non-empty string", value)


def _positive_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise RecordError(name, "a finite number > 0", value)
    return float(value)


def _check_shape(name: str, shape: Any) -> None:
    expected = "a non-empty object of dimension names to positive integers"
    if not isinstance(shape, dict) or not shape:
        raise RecordError(name, expected, shape)
    for k, n in shape.items():
        if not isinstance(k, str) or not k or "=" in k or "," in k:
            raise RecordError(name, expected + " (bad dimension name)", shape)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise RecordError(f"{name}.{k}", "a positive integer", n)


def _check_shape_arg(shape: Any) -> None:
    try:
        _check_shape("shape", dict(shape) if isinstance(shape, Mapping) else shape)
    except RecordError as e:
        raise InvalidInputError(e.field, e.expected, e.given) from None


def _json_object(name: str, value: Any) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise RecordError(name, "a JSON object with string keys", value)
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        raise RecordError(name, "JSON-able values (no NaN or infinity)", value) from None


def _check_fingerprint(fp: Any) -> None:
    _json_object("fingerprint", fp)
    for key in FINGERPRINT_KEYS:
        if key not in fp:
            raise RecordError(f"fingerprint.{key}", "a value (key is missing)", None)
        if key == "driver":
            if fp[key] is not None and not isinstance(fp[key], str):
                raise RecordError("fingerprint.driver", "a string or null", fp[key])
        elif not isinstance(fp[key], str) or (key == "source_hash" and not fp[key]):
            expected = "a non-empty string" if key == "source_hash" else "a string"
            raise RecordError(f"fingerprint.{key}", expected, fp[key])
