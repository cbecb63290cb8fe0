"""Tuning DBs for a fleet: merge another machine's export into this DB, keeping the best verified
record per key and refusing any record whose certificate does not re-verify here.

**The key** is what makes two records comparable: the problem (op, exact shape, dtype, key
attributes), the hardware model (``target``) and the software that produced it (the fingerprint:
GPU name, driver, Triton, torch and warpsmith versions, the kernel's source hash). Records of one
GPU model and software stack compete; others are kept side by side (dispatch picks among those
matching its own machine).

**Re-verification** has two parts, both run on every imported record before anything is written:

1. *The certificate matches the record* (no hash is stored, so this is the integrity check that is
   possible): its verdict is ``accepted``, no check ``failed``, and its op, variant, config, source
   hash and problem are the record's. A certificate copied from another record, edited to
   ``accepted`` or left with a failed check is refused.
2. *The config verifies again here* (``reverify=True``, the default): the record's exact config is
   run through the verifier (:func:`warpsmith.verify.verify_candidate`: guards, error contract,
   poisoned outputs, determinism, odd shapes) on this machine (under Triton's interpreter without a
   GPU), against the kernel source installed here, which must have the record's source hash. This
   catches a record whose config was forged or whose certificate lies about a result. It re-checks
   correctness only: a timing is taken on trust (it says where it was measured).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .core.errors import DatabaseError, WarpsmithError
from .db import RecordError, TuningDB, TuningRecord, attrs_key, read_export, shape_key
from .ops import get_op, variants as op_variants
from .targets import current_device, get_target
from .verify import verify_candidate

FINGERPRINT_KEY = ("gpu", "driver", "triton", "torch", "warpsmith", "source_hash")


@dataclass
class MergeReport:
    """What :func:`merge` did: records added, kept out as no better than this DB's, and refused (why)."""

    added: int = 0
    not_better: int = 0
    refused: list[tuple[int, str]] = field(default_factory=list)


def record_key(r: TuningRecord) -> tuple:
    """The fleet key of a record: problem, hardware model, and software fingerprint."""
    return (r.op, shape_key(r.shape), r.dtype, attrs_key(r.attrs), r.target,
            tuple(r.fingerprint.get(k) for k in FINGERPRINT_KEY))


def _rank(r: TuningRecord) -> tuple:
    return (r.timing_kind != "measured", r.time_ms)


def certificate_problem(r: TuningRecord) -> str | None:
    """Why ``r``'s certificate does not vouch for ``r`` (None when it does): see the module docstring."""
    c = r.certificate
    if not isinstance(c, dict):
        return "no certificate"
    if c.get("verdict") != "accepted":
        return f"certificate verdict {c.get('verdict')!r}, expected 'accepted'"
    checks = c.get("checks")
    if not isinstance(checks, list) or not checks:
        return "certificate lists no checks"
    failed = [ch for ch in checks if not isinstance(ch, dict) or str(ch.get("status", "")).startswith("failed")]
    if failed:
        return f"certificate has a failed check: {failed[0]}"
    for name, want in (("op", r.op), ("variant", r.variant), ("config", r.config),
                       ("source_hash", r.fingerprint.get("source_hash"))):
        if c.get(name) != want:
            return f"certificate {name} {c.get(name)!r} is not the record's {want!r}"
    prob = c.get("problem") or {}
    if prob.get("shape") != r.shape or prob.get("dtype") != r.dtype:
        return f"certificate problem {prob!r} is not the record's shape {r.shape} and dtype {r.dtype}"
    return None


def reverify(r: TuningRecord, seed: int = 0) -> str | None:
    """Run the verifier on ``r``'s config here; the first failure (None when it passes)."""
    variants = op_variants(r.op)
    if r.variant not in variants:
        return f"variant {r.variant!r} is not a variant of {r.op} here"
    v = variants[r.variant]
    if v.source_hash() != r.fingerprint.get("source_hash"):
        return (f"the kernel source here (hash {v.source_hash()}) is not the one the record was tuned with "
                f"({r.fingerprint.get('source_hash')})")
    spec = get_op(r.op)
    try:
        problem = spec.problem(r.shape, r.dtype, r.attrs)
        cert = verify_candidate(spec, problem, v, r.config, get_target(r.target),
                                device="cuda" if current_device().measured else "cpu", seed=seed)
    except WarpsmithError as e:
        return f"cannot re-verify: {e}"
    failure = cert.first_failure()
    return None if cert.passed else f"re-verification failed: {failure.name}: {failure.status}" if failure else "?"


def merge(db: TuningDB, source: str | Path | IO[str], *, reverify_configs: bool = True) -> MergeReport:
    """Merge the verified records of an export document into ``db``.

    A record is added when it re-verifies (see the module docstring) and is better (measured before
    predicted, then faster) than every verified record of its key already in ``db`` or earlier in the
    document. Unverified records are refused (a fleet DB holds verified results only).

    Raises:
        DatabaseError: the document cannot be read; nothing is written then.
    """
    name, items = read_export(source)
    report = MergeReport()
    best: dict[tuple, TuningRecord] = {}
    for r in db.list():
        if r.verified and (record_key(r) not in best or _rank(r) < _rank(best[record_key(r)])):
            best[record_key(r)] = r
    new: dict[tuple, TuningRecord] = {}
    for i, item in enumerate(items):
        try:
            r = TuningRecord.from_json(item)
        except RecordError as e:
            report.refused.append((i, str(e)))
            continue
        why = None if r.verified else "not verified"
        why = why or certificate_problem(r) or (reverify(r) if reverify_configs else None)
        if why:
            report.refused.append((i, why))
            continue
        k = record_key(r)
        held = new.get(k) or best.get(k)
        if held is not None and _rank(held) <= _rank(r):
            report.not_better += 1
            continue
        if k in new:
            report.not_better += 1  # an earlier record of the document is displaced
        new[k] = r
    for r in new.values():
        try:
            db.put(r)
        except DatabaseError as e:
            raise DatabaseError(f"{name}: {e}") from e
        report.added += 1
    return report
