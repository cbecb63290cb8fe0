"""Certificates: what was established about one kernel config, and how strongly.

Each check ends with a status string as DESIGN.md defines them:
``proved`` / ``bounded(N shapes)`` / ``tested(N trials)`` / ``failed(...)`` / ``unknown``.
Symbolic proofs (memory safety, race freedom, coverage, split coverage) come from
``verify/symbolic``; an obligation that was not attempted is listed as ``unknown``.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

CERT_FORMAT = 1
from .symbolic.prove import OBLIGATIONS as SYMBOLIC_OBLIGATIONS


@dataclass
class Check:
    name: str
    status: str  # proved | bounded(N shapes) | tested(N trials) | failed(reason) | unknown | skipped(reason)
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status.startswith("failed")

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass
class Certificate:
    op: str
    variant: str
    problem: dict[str, Any]
    config: dict[str, Any]
    guards: list[dict[str, Any]]
    target: str
    source_hash: str
    deterministic: bool
    versions: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    symbolic: dict[str, str] = field(default_factory=lambda: {n: "unknown(not attempted)" for n in SYMBOLIC_OBLIGATIONS})
    proofs: list[dict[str, Any]] = field(default_factory=list)
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))

    @property
    def passed(self) -> bool:
        return bool(self.checks) and not any(c.failed for c in self.checks)

    def first_failure(self) -> Check | None:
        return next((c for c in self.checks if c.failed), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CERT_FORMAT, "op": self.op, "variant": self.variant, "problem": self.problem,
            "config": self.config, "guards": self.guards, "target": self.target, "source_hash": self.source_hash,
            "deterministic": self.deterministic, "versions": self.versions, "created": self.created,
            "verdict": "accepted" if self.passed else "rejected",
            "checks": [c.to_json() for c in self.checks],
            "symbolic": dict(self.symbolic), "proofs": list(self.proofs),
        }
