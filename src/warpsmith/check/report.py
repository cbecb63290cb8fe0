"""The result of ``warpsmith check``: a verdict, every check with its status, timings, JSON.

Checks are listed in priority order. When several fail, the verdict names the first one as
*the* reason (a late-writing thread also leaves rows unwritten at return, for instance; the
reason is ``async_work``). Each check has one stable reason code. Its status is ``passed``,
``failed(<code>: <message>)`` or ``skipped(<why>)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: (check name, reason code, what passing establishes), in priority order.
CHECKS: tuple[tuple[str, str, str], ...] = (
    ("reference_intact", "tampered_reference", "the reference's files are byte for byte what they were before the "
                                               "run (they are restored if not)"),
    ("no_exit", "exited", "the candidate's process does not end while the harness needs it (sys.exit, os._exit, an "
                          "atexit hook, at import, construction or in a call)"),
    ("no_crash", "crashed", "the candidate's process is not killed by a signal (abort, segfault, out of memory, "
                            "resource limits) and its launcher is not killed"),
    ("in_time", "timeout", "loading and every call return within the deadline (SIGKILL otherwise)"),
    ("protocol", "protocol_violation", "every reply of the candidate's process is one the harness asked for, in "
                                        "its form (no forged, malformed or out-of-place replies or files)"),
    ("no_patching", "monkey_patch",
     "torch, triton, time, builtins, threading and the harness are unchanged after loading and after every call"),
    ("runs", "candidate_error", "the candidate imports, constructs and runs without raising"),
    ("plain_tensor", "tensor_subclass", "every output's type is exactly torch.Tensor"),
    ("materialized", "lazy_output", "every output is a real tensor on the reference's device (not meta, not a "
                                    "proxy or future)"),
    ("shape", "wrong_shape", "as many outputs as the reference, each of the reference's shape"),
    ("dtype", "wrong_dtype", "each output has the reference's dtype"),
    ("layout", "wrong_layout", "outputs are dense and strided; contiguous wherever the reference's output is"),
    ("synchronous", "async_work", "no thread (or stream) the call started is still running when it returns, and "
                                  "outputs do not change after a pause and a full synchronize"),
    ("no_aliasing", "aliased_output", "outputs share no memory with inputs, with each other or with the "
                                      "candidate's parameters; destination buffers are not rebound"),
    ("inputs_unmodified", "mutated_input", "inputs are bitwise unchanged, with the same shape, strides and storage"),
    ("not_constant", "constant_output", "the output changes between calls on different inputs whenever the "
                                        "reference's does and the repeated output is wrong for the new inputs"),
    ("not_memoized", "memoized", "after inputs are overwritten in place, the result follows the new values (a "
                                 "repeat of the old output is wrong for them under the error contract); a "
                                 "repeat of earlier values in new tensors gets a new output, not the old object"),
    ("fresh_buffers", "stale_buffer", "no output reuses the previous call's output memory, and a call leaves the "
                                      "previous call's outputs alone"),
    ("fully_written", "unwritten_output", "no output element keeps the NaN poison where the reference has a "
                                          "number"),
    ("memory_safe", "unsafe_kernel", "every Triton launch the harness observed is proved in bounds and race-free "
                                     "(the symbolic prover on the observed grid, shapes and strides)"),
    ("error_contract", "wrong_result", "every element's fp64-oracle error within 4x the larger of the reference's "
                                       "own error and the element's scale, plus two ulps of the element (and the "
                                       "largest error within the tensor-wide bound); NaN/Inf where the reference has "
                                       "them; integers exact"),
    ("deterministic", "nondeterministic", "two calls on identical inputs are bitwise equal (unless the candidate "
                                          "declares itself nondeterministic)"),
    ("complete", "incomplete", "the protocol ran to its end and every candidate call it made was judged"),
)
CODES: dict[str, str] = {name: code for name, code, _ in CHECKS}


@dataclass
class CheckResult:
    name: str
    code: str
    status: str  # passed | failed | skipped
    message: str = ""
    observations: int = 0

    @property
    def text(self) -> str:
        if self.status == "passed":
            return "passed"
        if self.status == "failed":
            return f"failed({self.code}: {self.message})"
        return f"skipped({self.message})"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "reason_code": self.code, "status": self.text, "result": self.status,
                "message": self.message, "observations": self.observations}


class Ledger:
    """Collects observations and failures per check while a check runs."""

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.seen: dict[str, int] = {name: 0 for name, _, _ in CHECKS}
        self.skipped: dict[str, str] = {}

    def ok(self, name: str) -> None:
        self.seen[name] += 1

    def fail(self, name: str, message: str) -> None:
        self.seen[name] += 1
        self.failed.setdefault(name, " ".join(message.split()))

    def record(self, name: str, problems: list[str]) -> None:
        """One observation: a failure listing ``problems``, or a pass when there are none."""
        if problems:
            self.fail(name, "; ".join(problems))
        else:
            self.ok(name)

    def skip(self, name: str, why: str) -> None:
        self.skipped.setdefault(name, why)

    def has_failed(self, name: str) -> bool:
        return name in self.failed

    def results(self, stopped: str | None = None) -> list[CheckResult]:
        out = []
        for name, code, _ in CHECKS:
            n = self.seen[name]
            if name in self.failed:
                out.append(CheckResult(name, code, "failed", self.failed[name], n))
            elif name in self.skipped:
                out.append(CheckResult(name, code, "skipped", self.skipped[name], n))
            elif n:
                out.append(CheckResult(name, code, "passed", "", n))
            else:
                why = f"not reached: the check stopped at {stopped}" if stopped else "nothing to observe"
                out.append(CheckResult(name, code, "skipped", why, 0))
        return out


@dataclass
class CheckReport:
    """What ``warpsmith check`` established about one candidate."""

    reference: str
    candidate: str
    format: str
    device: str
    seed: int
    trials: int
    problem: dict[str, Any]
    checks: list[CheckResult]
    timing: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    calls: int = 0
    complete: bool = True  # the protocol ran to its end (it stops at a fatal failure)
    coverage: dict[str, Any] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)

    @property
    def coverage_line(self) -> str:
        """Which workloads were checked, and why not all (a selection or the time budget)."""
        c = self.coverage
        if not c:
            return ""
        done, total, chosen = c["workloads_checked"], c["workloads_total"], c["workloads_selected"]
        line = f"covered: {done} of {total} workload(s)"
        cap = (self.problem or {}).get("cpu_cap") if isinstance(self.problem, dict) else None
        if cap and cap.get("applied"):
            consts = ", ".join(f"{k} {a}->{b}" for k, (a, b) in cap.get("consts", {}).items())
            line += (f" at the CPU cap {cap['cap']} ({len(cap.get('workloads', {}))} workload(s) shrunk"
                     + (f"; consts {consts}" if consts else "")
                     + ("; consts kept: the reference refuses them capped" if cap.get("consts_kept") else "") + ")")
        if chosen < total:
            line += f" ({chosen} selected with --workloads)"
        if c.get("partial"):
            p = c["partial"]
            line += f" (the last, {p['workload']}, with {p['trials']} of {p['planned']} trials)"
        if done < chosen or c.get("partial"):
            line += (f"; the time budget ({c['budget_s']:g} s) stopped the run" if c.get("budget_s") else
                     "; the run stopped early")
        return line

    @property
    def accepted(self) -> bool:
        """THE verdict, the only place it is decided: the protocol ran to its end, every call it made was
        judged (``complete`` passed), and no check failed. The CLI's exit status and the words it prints
        come from this property alone (:meth:`exit_status`)."""
        return (self.complete and not any(c.status == "failed" for c in self.checks)
                and any(c.name == "complete" and c.status == "passed" for c in self.checks))

    @property
    def isolated(self) -> bool:
        """Whether the candidate ran with no power over this process, the report or the reference."""
        return bool((self.protocol.get("isolation") or {}).get("isolated"))

    def exit_status(self) -> int:
        """0 accepted (isolated), 1 rejected, 3 accepted but the machine did not allow the isolation."""
        if not self.accepted:
            return 1
        return 0 if self.isolated else 3

    @property
    def verdict(self) -> str:
        return "accepted" if self.accepted else "rejected"

    @property
    def first_failure(self) -> CheckResult | None:
        """The highest-priority failed check; a rejection with no failed check (which the harness never
        makes) still gets one: ``complete``."""
        f = next((c for c in self.checks if c.status == "failed"), None)
        if f is None and not self.accepted:
            return CheckResult("complete", CODES["complete"], "failed", "the protocol did not run to its end")
        return f

    @property
    def reason(self) -> str | None:
        """The reason code of the highest-priority failed check (None when accepted)."""
        f = self.first_failure
        return f.code if f else None

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def failed_codes(self) -> list[str]:
        return [c.code for c in self.checks if c.status == "failed"]

    def timing_line(self) -> str:
        t = self.timing
        if t.get("kind") != "measured":
            return f"timing: not measured ({t.get('reason', 'no GPU')})"
        return (f"timing: candidate {t['candidate_ms']:.4g} ms, reference {t['reference_ms']:.4g} ms "
                f"(speedup {t['speedup']:.2f}x; CUDA events, median of {t['runs']}, L2 flushed)")

    def to_json(self) -> dict[str, Any]:
        f = self.first_failure
        return {
            "verdict": self.verdict, "reason": f.code if f else None, "message": f.message if f else None,
            "complete": self.complete, "isolated": self.isolated, "exit_status": self.exit_status(),
            "reference": self.reference, "candidate": self.candidate, "format": self.format, "device": self.device,
            "seed": self.seed, "trials": self.trials, "calls": self.calls, "problem": self.problem,
            "checks": [c.to_json() for c in self.checks], "timing": self.timing,
            "coverage": self.coverage, "protocol": self.protocol,
            "elapsed_s": round(self.elapsed_s, 3)}
