"""One row of the tuning database's ``failures`` table: a problem whose tuning failed.

A :class:`FailureRecord` says: tuning this problem (``op``, ``shape``, ``dtype``, ``attrs``) for this
hardware model (``target``) failed, why (``reason``), after how many tries (``attempts``), on which
``executor``, with what ``provenance`` (node, lost tries...), and when (``created``). The store keeps
one per problem key (the latest) and removes it when a verified record of the same key is written.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .record import DTYPES, RecordError, _check_shape, _json_object, _nonempty_str, _parse_time


@dataclass
class FailureRecord:
    """A failed tuning of one problem; see the module docstring for each field."""

    op: str
    shape: dict[str, int]
    dtype: str
    attrs: dict[str, Any]
    target: str
    reason: str
    attempts: int
    executor: str
    provenance: dict[str, Any]
    created: str = ""
    id: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Every field, as a JSON-able dict (a deep copy)."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> FailureRecord:
        """Build one from :meth:`to_json` output, validating every field.

        Raises:
            RecordError: naming the first bad field, what was expected and what was given.
        """
        if not isinstance(d, Mapping):
            raise RecordError("failure", "a JSON object", d)
        names = [f.name for f in fields(FailureRecord)]
        unknown = sorted(set(d) - set(names))
        if unknown:
            raise RecordError(str(unknown[0]), "one of the failure fields " + ", ".join(names), d[unknown[0]])
        for name in names:
            if name not in d and name not in ("created", "id"):
                raise RecordError(name, "a value (field is missing)", None)
        v = copy.deepcopy(dict(d))
        for name in ("op", "target", "reason", "executor"):
            _nonempty_str(name, v[name])
        _check_shape("shape", v["shape"])
        if v["dtype"] not in DTYPES:
            raise RecordError("dtype", "one of " + ", ".join(DTYPES), v["dtype"])
        for name in ("attrs", "provenance"):
            _json_object(name, v[name])
        a = v["attempts"]
        if isinstance(a, bool) or not isinstance(a, int) or a < 0:
            raise RecordError("attempts", "a non-negative integer", a)
        created = v.get("created", "")
        if not isinstance(created, str) or (created and _parse_time(created) is None):
            raise RecordError("created", "an ISO-8601 timestamp or an empty string", created)
        v["created"], v["id"] = created, v.get("id")
        return FailureRecord(**v)
