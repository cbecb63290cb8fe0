"""The one place that reads ``WARPSMITH_*`` environment variables.

| variable             | meaning                                              | default                              |
|----------------------|------------------------------------------------------|--------------------------------------|
| WARPSMITH_DB         | path of the SQLite tuning database                   | ``<user cache>/warpsmith/tuning.db`` |
| WARPSMITH_TARGET     | hardware model used where no GPU is present          | ``h100``                             |
| WARPSMITH_INTERPRET  | ``1`` forces Triton's interpreter even with a GPU    | unset                                |
| WARPSMITH_DISPATCH   | ``tuned`` (use the DB) or ``default`` (heuristics)   | ``tuned``                            |
| WARPSMITH_COMPILE_ONLY | a GPU architecture (``sm_90``, ``gfx942``): compile kernels for it, run nothing (``warpsmith gpucheck``) | unset |
| WARPSMITH_FACTS_DIR  | cache of compiler facts (registers, spills, shared memory) per kernel config | ``<user cache>/warpsmith/facts`` |
| WARPSMITH_CALIBRATION | a calibration file (``benchmarks/calibrate.py``'s JSON) or a folder of ``<target>.json``: measured peaks that override the target tables | ``src/warpsmith/targets/calibration/`` |
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_VARIABLES = ("WARPSMITH_DB", "WARPSMITH_TARGET", "WARPSMITH_INTERPRET", "WARPSMITH_DISPATCH",
              "WARPSMITH_COMPILE_ONLY", "WARPSMITH_FACTS_DIR", "WARPSMITH_CALIBRATION", "XDG_CACHE_HOME", "HOME")


def _cache_dir(env: dict[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "warpsmith"


@dataclass(frozen=True)
class Settings:
    db_path: Path
    target: str
    force_interpret: bool
    dispatch: str
    compile_only: str | None
    facts_dir: Path
    calibration: Path | None = None

    @staticmethod
    def from_env() -> "Settings":
        return _from_values(tuple(os.environ.get(k) for k in _VARIABLES))


@lru_cache(maxsize=16)
def _from_values(values: tuple[str | None, ...]) -> Settings:
    """The settings for one set of the variables' values (``_VARIABLES`` order): building them parses
    paths, which every kernel call would otherwise pay (they are read on every call)."""
    env = {k: v for k, v in zip(_VARIABLES, values) if v is not None}
    return Settings(
        db_path=Path(env.get("WARPSMITH_DB") or _cache_dir(env) / "tuning.db").expanduser(),
        target=env.get("WARPSMITH_TARGET", "h100").lower(),
        force_interpret=env.get("WARPSMITH_INTERPRET", "") not in ("", "0"),
        dispatch=env.get("WARPSMITH_DISPATCH", "tuned").lower(),
        compile_only=env.get("WARPSMITH_COMPILE_ONLY", "").lower() or None,
        facts_dir=Path(env.get("WARPSMITH_FACTS_DIR") or _cache_dir(env) / "facts").expanduser(),
        calibration=Path(env["WARPSMITH_CALIBRATION"]).expanduser() if env.get("WARPSMITH_CALIBRATION") else None,
    )


def settings() -> Settings:
    """Current settings (the environment is read on every call so tests may change it; the parsed
    result is cached per set of values)."""
    return Settings.from_env()
