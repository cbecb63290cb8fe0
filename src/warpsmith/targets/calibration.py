"""Measured peaks that override a target's datasheet table (``models.py``) where a device calibrated them.

``benchmarks/calibrate.py`` runs the microbenchmarks (``profile/microbench.py``) on a GPU and writes a
JSON whose ``peaks`` name the figures measured: ``hbm_tbps`` (copy bandwidth), ``smem_tbps``
(conflict-free shared-memory loads, the static model's shared rate), ``peak_tflops`` per math kind
(tensor-core throughput) and ``launch_us`` (back-to-back launch latency). A target reads them from
``WARPSMITH_CALIBRATION`` (that file, or ``<folder>/<target>.json``), else from
``targets/calibration/<target>.json`` beside this module when one was committed; each override is named
in the target's ``provenance`` ("calibrated on NVIDIA H200 2026-12-06: hbm_tbps, ..."), which
``warpsmith profile`` prints. Without a file the target is unchanged (``nominal (datasheet)``).
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.errors import InvalidInputError
from ..core.settings import settings
from .models import Target

KIND = "warpsmith-calibration"
HERE = Path(__file__).parent / "calibration"
NOMINAL = "nominal (datasheet)"
_cache: dict[tuple[str, int], Target] = {}


def calibration_path(name: str) -> Path | None:
    """The calibration file for target ``name``, if one applies."""
    given = settings().calibration
    if given is not None:
        if given.is_dir():
            path = given / f"{name}.json"
            return path if path.exists() else None
        if not given.exists():
            raise InvalidInputError("WARPSMITH_CALIBRATION", "an existing calibration file or folder", str(given))
        return given if _read(given).get("target") == name else None
    path = HERE / f"{name}.json"
    return path if path.exists() else None


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"calibration file {path}", "a JSON object written by benchmarks/calibrate.py",
                                str(exc)) from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise InvalidInputError(f"calibration file {path}", f'a JSON object with "kind": "{KIND}"',
                                doc.get("kind") if isinstance(doc, dict) else type(doc).__name__)
    return doc


def _positive(path: Path, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidInputError(f"calibration file {path}: peaks.{key}", "a positive number", value)
    return float(value)


def apply(target: Target, path: Path) -> Target:
    """``target`` with the peaks ``path`` measured, and its provenance saying so."""
    doc = _read(path)
    if doc.get("target") != target.name:
        raise InvalidInputError(f"calibration file {path}: target", target.name, doc.get("target"))
    if doc.get("dry_run", True) is not False:
        raise InvalidInputError(f"calibration file {path}", "a measured run (dry_run false)", "a dry run")
    peaks = doc.get("peaks")
    if not isinstance(peaks, dict):
        raise InvalidInputError(f"calibration file {path}: peaks", "an object of measured peaks", peaks)
    kw: dict[str, Any] = {}
    if "hbm_tbps" in peaks:
        kw["hbm_tbps"] = _positive(path, "hbm_tbps", peaks["hbm_tbps"])
    if "launch_us" in peaks:
        kw["launch_us"] = _positive(path, "launch_us", peaks["launch_us"])
    tensor = peaks.get("peak_tflops") or {}
    unknown = sorted(set(tensor) - set(target.peak_tflops) - {"fp8", "int8"})
    if unknown:
        raise InvalidInputError(f"calibration file {path}: peaks.peak_tflops", "math kinds of " + target.name,
                                unknown)
    if tensor:
        kw["peak_tflops"] = {**target.peak_tflops,
                             **{k: _positive(path, f"peak_tflops.{k}", v) for k, v in tensor.items()}}
    rates = target.throughput
    if "smem_tbps" in peaks and rates is not None:
        per_clk = _positive(path, "smem_tbps", peaks["smem_tbps"]) * 1e12 / (target.sms * rates.clock_ghz * 1e9)
        kw["throughput"] = replace(rates, smem_bytes_per_clk=per_clk)
    names = [k for k in ("hbm_tbps", "launch_us", "smem_tbps") if k in peaks] + [f"{k} peak" for k in tensor]
    what = f"calibrated on {doc.get('gpu', '?')} {str(doc.get('date', '?'))[:10]}: {', '.join(names) or 'nothing'}"
    return replace(target, **kw, provenance=f"{what} ({path})")


def calibrated(target: Target) -> Target:
    """``target`` with a calibration file's peaks where one applies, else ``target`` itself."""
    path = calibration_path(target.name)
    if path is None:
        return target
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key not in _cache:
        _cache[key] = apply(target, path)
    return _cache[key]
