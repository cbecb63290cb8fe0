"""Compiler facts for the search: what Triton makes of a config for a target, without a GPU.

:class:`CompilerFacts` answers ``facts(variant, problem, config)`` with the
:class:`~.facts.ConfigFacts` of the kernels that config launches (registers, spills,
shared memory, pipelining), compiled for the target's architecture by a compile-only worker
process (``python -m warpsmith.gpucheck --serve``, see ``warpsmith.core._compile_only``) and cached on
disk per kernel source, config, problem, Triton version and architecture
(``WARPSMITH_FACTS_DIR``). The cost models use them in place of their estimates, and the search
skips configs the compiler says spill or cannot pipeline.

The worker is started on the first miss and kept for the provider's life; one compile takes
about 0.3-2 s on a CPU, a cached answer a file read. Where the worker cannot compile (a Triton
without that back end), the provider answers None and the estimates stand. The worker rebuilds each
problem through the op registry, a layer above this package, so it is a process of its own
(:func:`warpsmith.gpucheck.serve`), reached through its command line only.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

from ...core.settings import settings
from ..models import Target
from .facts import ConfigFacts
from .sass import COUNTING_VERSION, SassCounts

# the compile-only worker process (it imports the op registry, so it lives above targets/)
WORKER = ("-m", "warpsmith.gpucheck", "--serve")


def compile_only_env(target: Target) -> dict[str, str]:
    """The environment of a compile-only process for ``target``: Triton compiles for its architecture
    (no interpreter), dispatch ignores the tuning DB."""
    env = {**os.environ, "WARPSMITH_COMPILE_ONLY": target.arch, "WARPSMITH_TARGET": target.name,
           "WARPSMITH_DISPATCH": "default"}
    env.pop("TRITON_INTERPRET", None)
    return env


def _key(variant: Any, problem: Any, config: Mapping[str, Any], arch: str, triton_version: str,
         sass: bool = False) -> str:
    doc = {"op": problem.op, "variant": variant.name, "source": variant.source_hash(), "shape": dict(problem.shape),
           "dtype": problem.dtype_name, "attrs": problem.key_attrs, "config": dict(config), "arch": arch,
           "triton": triton_version, **({"sass": COUNTING_VERSION} if sass else {})}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:32]


def request(variant: Any, problem: Any, config: Mapping[str, Any], sass: bool = False) -> dict[str, Any]:
    """What the worker needs to rebuild and compile one config (with ``sass``: and count its machine code)."""
    return {"op": problem.op, "variant": variant.name, "shape": dict(problem.shape), "dtype": problem.dtype_name,
            "attrs": dict(problem.attrs), "config": dict(config), **({"sass": True} if sass else {})}


def _write(path: Path, doc: Any) -> None:
    """Write a cache entry atomically (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


class CompilerFacts:
    """Facts per config for one target, from the disk cache or a compile-only worker."""

    def __init__(self, target: Target, cache_dir: Path | None = None) -> None:
        import triton

        self.target = target
        self.cache_dir = cache_dir or settings().facts_dir
        self.triton_version = triton.__version__
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self.compiled = 0  # configs compiled by the worker (cache misses)
        self.failed: str | None = None  # why the worker is unusable, once it is
        self.error: str | None = None  # the worker's answer to the last config it could not compile

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def lookup(self, variant: Any, problem: Any, config: Mapping[str, Any]) -> ConfigFacts | None:
        """The cached facts, or None."""
        p = self._path(_key(variant, problem, config, self.target.arch, self.triton_version))
        try:
            return ConfigFacts.from_json(json.loads(p.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def __call__(self, variant: Any, problem: Any, config: Mapping[str, Any]) -> ConfigFacts | None:
        """The facts of ``config``: cached, else compiled now (None if it cannot be compiled here)."""
        key = _key(variant, problem, config, self.target.arch, self.triton_version)
        hit = self.lookup(variant, problem, config)
        if hit is not None or self.failed:
            return hit
        answer = self._ask(request(variant, problem, config))
        if answer is None or "facts" not in answer:
            return None  # a compile error is the measurement's to report, not the estimate's
        facts = ConfigFacts.from_json(answer["facts"])
        _write(self._path(key), facts.to_json())
        return facts

    def sass(self, variant: Any, problem: Any,
             config: Mapping[str, Any]) -> tuple[ConfigFacts, tuple[SassCounts | None, ...]] | None:
        """The facts of ``config`` and each kernel's machine code, counted (:mod:`.sass`; None for a kernel
        without SASS): cached, else compiled now; None where it cannot be compiled here (``error`` or
        ``failed`` says why)."""
        path = self._path(_key(variant, problem, config, self.target.arch, self.triton_version, sass=True))
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            answer = None if self.failed else self._ask(request(variant, problem, config, sass=True))
            if answer is None or "facts" not in answer:
                self.error = (answer or {}).get("error") or self.failed
                return None
            doc = {"facts": answer["facts"], "sass": answer["sass"]}
            _write(path, doc)
        return (ConfigFacts.from_json(doc["facts"]),
                tuple(SassCounts.from_json(k) if k else None for k in doc["sass"]))

    def _ask(self, req: dict[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            try:
                if self._proc is None:
                    self._proc = subprocess.Popen([sys.executable, *WORKER],
                                                  env=compile_only_env(self.target),
                                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                  stderr=subprocess.DEVNULL, text=True)
                assert self._proc.stdin is not None and self._proc.stdout is not None
                self._proc.stdin.write(json.dumps(req) + "\n")
                self._proc.stdin.flush()
                line = self._proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"compile worker exited ({self._proc.poll()})")
                self.compiled += 1
                return json.loads(line)
            except (OSError, RuntimeError, ValueError) as exc:
                self.failed = f"{type(exc).__name__}: {exc}"
                self.close()
                return None

    def close(self) -> None:
        if self._proc is not None:
            try:
                if self._proc.stdin:
                    self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
            self._proc = None

    def __del__(self) -> None:
        self.close()
