"""Proving the generated kernels of an emitted program, for ``warpsmith solve`` and ``warpsmith prove --solution``.

For each kernel of the file's ``_WS_LAUNCHES`` table (:mod:`.contracts`): the launch check (the
emitted launch is an instance of the contract), then every obligation of ``warpsmith prove`` on the
symbolic contract, traced from the file's own kernel text. A ``failed`` obligation rejects the
program (``solve`` writes nothing); ``bounded`` and ``unknown`` are reported as they are, never as
proved. Budgets are z3 resource units (verify/symbolic/budget.py): the same kernel gets the same
statuses on any load. A kernel whose text and launch description, up to names (its own, its
docstring, its local variables and the program's node names: :mod:`.canonical`), and constexprs
were proved before in this process reuses that proof (the report names the kernel it came from);
its own launch check still runs. A proof of every obligation is also reused by such a kernel at
other sizes where the symbolic contract leaves them free (a repeated layer at another width); a
bounded or unknown verdict, which depends on the shapes tried, only at the same sizes.
"""
from __future__ import annotations

import copy
import hashlib
import inspect
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..verify.symbolic import prove
from ..verify.symbolic.prove import Obligation
from . import contracts as C
from .canonical import canonical_kernel, launch_shape

DEFAULT_TIMEOUT_MS = 2000  # solver budget per obligation (deterministic units, see budget.py)
_CACHE: dict[str, tuple[str, list[Obligation]]] = {}  # key -> (kernel first proved, its obligations)


@dataclass
class KernelProof:
    kernel: str
    kind: str  # pointwise, rows (whole rows) or rows (looped)
    domain: list[int]
    constexprs: dict[str, Any]
    obligations: list[Obligation] = field(default_factory=list)
    seconds: float = 0.0
    reused_from: str | None = None  # the identical kernel whose proof this is

    @property
    def status(self) -> str:
        sts = [o.status for o in self.obligations]
        return "failed" if "failed" in sts else "proved" if sts and all(s == "proved" for s in sts) else "partial"

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "kind": self.kind, "domain": self.domain, "constexprs": self.constexprs,
                "status": self.status, "seconds": round(self.seconds, 3), "reused_from": self.reused_from,
                "obligations": [o.to_json() for o in self.obligations]}


@dataclass
class ProgramProofs:
    file: str
    timeout_ms: int
    kernels: list[KernelProof] = field(default_factory=list)

    @property
    def obligations(self) -> list[Obligation]:
        return [o for k in self.kernels for o in k.obligations]

    @property
    def failed(self) -> list[tuple[str, Obligation]]:
        return [(k.kernel, o) for k in self.kernels for o in k.obligations if o.status == "failed"]

    def summary(self) -> str:
        obs = self.obligations
        proved = sum(o.status == "proved" for o in obs)
        failed = len(self.failed)
        return (f"{len(self.kernels)} generated kernel(s): {proved} of {len(obs)} obligations proved, {failed} "
                f"failed, {len(obs) - proved - failed} bounded or unknown "
                f"({sum(k.seconds for k in self.kernels):.1f} s)")

    def verdict(self) -> dict[str, Any]:
        """The rejection a failed obligation gives (``solve``'s verdict format)."""
        kernel, o = self.failed[0]
        return {"accepted": False, "reason": "proof_failed", "coverage": None, "report": {},
                "message": f"{kernel}: {o.name} of {o.subject} failed: {o.detail}; counterexample {o.counterexample}"}

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "timeout_ms": self.timeout_ms, "summary": self.summary(),
                "kernels": [k.to_json() for k in self.kernels]}

    def lines(self) -> list[str]:
        out = [self.summary()]
        for k in self.kernels:
            reused = (f", proof of {k.reused_from} (the same kernel up to names and free sizes) reused"
                      if k.reused_from else "")
            out.append(f"{k.kernel} ({k.kind} over {k.domain}, {_consts(k.constexprs)}): {k.status}{reused}")
            for o in k.obligations:
                extra = f"; counterexample {o.counterexample}" if o.status == "failed" else ""
                detail = f" ({o.detail})" if o.detail and o.status != "proved" else ""
                out.append(f"  {o.name:<18} {o.status:<18} {o.subject}{detail}{extra}")
        return out


def _consts(c: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in c.items() if k != "EMULATE")


def prove_text(text: str, name: str = "solution.py", timeout_ms: int = DEFAULT_TIMEOUT_MS) -> ProgramProofs:
    """Prove every generated kernel of one emitted file's text (``name`` names it in the report)."""
    res = ProgramProofs(name, timeout_ms)
    with tempfile.TemporaryDirectory(prefix="warpsmith-prove-") as tmp:
        path = Path(tmp) / Path(name).name
        try:
            module = C.kernel_module(text, path)
        except Exception as exc:  # noqa: BLE001 - an unusable file is reported, never a crash
            res.kernels.append(KernelProof("(file)", "?", [], {}, [Obligation(
                "launch", name, "unknown", f"the file's kernels could not be loaded: {type(exc).__name__}: {exc}")]))
            return res
        table = getattr(module, C.TABLE, [])
        listed = {s["kernel"] for s in table}
        for spec in table:
            kp = _prove_kernel(module, spec, timeout_ms)
            for o in kp.obligations:  # sources name the file, at its own line numbers
                if o.counterexample and "source" in o.counterexample:
                    o.counterexample["source"] = json.loads(json.dumps(o.counterexample["source"]).replace(
                        json.dumps(str(path))[1:-1], name))
            res.kernels.append(kp)
        sys.modules.pop(module.__name__, None)
        for extra in sorted(n for n in vars(module) if n.startswith("_ws_fused_") and not n.endswith("_launch")
                            and hasattr(getattr(module, n), "fn") and n not in listed):
            res.kernels.append(KernelProof(extra, "?", [], {}, [Obligation(
                "launch", extra, "unknown", f"a generated kernel with no entry in the file's {C.TABLE} table")]))
    return res


def _prove_kernel(module: Any, spec: dict[str, Any], timeout_ms: int) -> KernelProof:
    t0 = time.perf_counter()
    kind = spec["kind"] if spec["kind"] == "pointwise" else f"rows ({'looped' if spec['looped'] else 'whole rows'})"
    kp = KernelProof(spec["kernel"], kind, list(spec["domain"]), {})
    try:
        launch = C.record(module, spec)
        kernel = getattr(module, spec["kernel"])
        c, syms = C.contract(kernel, spec, launch.constexprs)
    except Exception as exc:  # noqa: BLE001
        kp.obligations.append(Obligation("launch", spec["launcher"], "unknown", f"the contract could not be built "
                                         f"from the launch: {type(exc).__name__}: {exc}"))
        kp.seconds = time.perf_counter() - t0
        return kp
    kp.constexprs = dict(c.constexprs[0])
    kp.obligations.append(C.launch_check(c, syms, spec, launch))
    key, general = (_key(module, kernel, spec, kp.constexprs, timeout_ms, sized) for sized in (True, False))
    hit = _CACHE.get(key) or _CACHE.get(general)
    if hit is not None:
        kp.reused_from, obs = hit[0], copy.deepcopy(hit[1])
    else:
        obs = [o for r in prove(c, timeout_ms=timeout_ms) for o in r.obligations]
        _CACHE[key] = (spec["kernel"], copy.deepcopy(obs))
        if obs and all(o.status == "proved" for o in obs):  # proved for every shape: no captured size in it
            _CACHE[general] = _CACHE[key]
    kp.obligations += obs
    kp.seconds = time.perf_counter() - t0
    return kp


def _key(module: Any, kernel: Any, spec: dict[str, Any], consts: dict[str, Any], timeout_ms: int,
         sized: bool = True) -> str:
    """The kernel's text up to names (:func:`.canonical.canonical_kernel`: its name, docstring and local
    variables), its launch description with the program's node names dropped, the constexprs, the
    budget and the text of every other jit function of the file (the helpers). ``sized=False`` also
    drops the captured sizes the symbolic contract leaves free (every domain dim but the fixed ones,
    :func:`.contracts.contract`): two kernels with that key have one symbolic contract, so a proof
    of *every* obligation for one holds for the other (a bounded or unknown verdict, which depends
    on the concrete shapes tried, is shared only under the sized key)."""
    src = canonical_kernel(inspect.getsource(kernel.fn), spec["kernel"])
    helpers = sorted((n, inspect.getsource(v.fn)) for n, v in vars(module).items()
                     if hasattr(v, "fn") and hasattr(v, "arg_names") and not n.startswith("_ws_fused_"))
    desc = launch_shape(spec, sized)
    blob = json.dumps([src, desc, consts, timeout_ms, helpers], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def prove_file(path: str | Path, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[ProgramProofs]:
    """``warpsmith prove --solution``: an emitted ModelNew / program file, or a solution.json (each
    inline source with a launch table)."""
    from ..core.errors import InvalidInputError

    p = Path(path)
    if not p.is_file():
        raise InvalidInputError("--solution FILE", "an emitted .py file or a solution.json", str(p))
    if p.suffix == ".json":
        try:
            doc = json.loads(p.read_text())
            sources = [(s["path"], s["content"]) for s in doc["sources"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInputError(f"{p}", "a solution.json with sources [{path, content}]",
                                    f"{type(exc).__name__}: {exc}") from None
        return [prove_text(text, f"{p.name}:{name}", timeout_ms) for name, text in sources if C.TABLE in text]
    text = p.read_text()
    if C.TABLE not in text:
        raise InvalidInputError(f"{p}", f"a file emitted by `warpsmith solve` (with its {C.TABLE} table)",
                                "a file with no launch table")
    return [prove_text(text, p.name, timeout_ms)]
