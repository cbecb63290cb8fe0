"""The hardened harness: the candidate runs in its own process; the verdict is made here.

**Two processes.** This process (the *parent*) loads the reference from the bytes of its files,
hashed before anything else runs, draws every input, computes the reference, the fp64 oracle and
the oracle on inputs each moved by one rounding (the probes of each element's scale), judges, owns
the exit code and writes the JSON. The candidate is imported only in a *child* (:mod:`.child`): a
fresh interpreter started through a launcher (:mod:`.isolation`, :mod:`.sandbox`) in a sandbox
(namespaces, a read-only filesystem, no capabilities), in an empty temporary working directory,
with limits on memory, CPU time and file size, and a deadline on every request (SIGKILL). Inputs
and outputs cross as files; the child never holds a reference output or the oracle, and nothing it
does to its own interpreter (``sys.exit``, ``atexit``, patches of torch, ``torch.library``
overrides, autocast, ``gc`` walks, frame inspection, patches of the harness's objects) reaches
this process. A child that exits, crashes or hangs is a rejection with the reason code
``exited``, ``crashed`` or ``timeout``; never exit 0, never a harness traceback.

**The reference first.** Before the child starts, the reference runs on the first draw twice, from
two different random states: a reference that raises, or that differs from itself on identical
inputs (dropout in training mode), is unusable input (exit 2, :class:`ReferenceUnusable`), not the
candidate's fault. ``eval_mode=True`` (``--eval``) puts both models in eval mode.

**The protocol** (its counts drawn at random here, from the OS's entropy, not from ``--seed``):

1. Load the candidate in the child (``no_patching`` after the load; ``runs``).
2. One or two warm-up calls on their own draws, judged like every other call.
3. For each selected workload, ``--trials`` plus 0 to 2 extra trials, cycling through the
   distributions. Trial 1 writes its draw into trial 0's input tensors *without* bumping their
   version counters (the memoization probe defeats a cache keyed on ``(data_ptr, _version)``).
   About one call in four runs with no harness state observable from inside: no torch function
   mode, gradients enabled. Each call is judged on the values it returned: types, shapes, dtypes,
   layout (dense, or exactly the reference's strides, e.g. an expanded output), what the child saw
   around the call (threads, late writes within a short pause, aliasing, input integrity, reuse of
   the previous output), history (a constant or memoized result), poison left, the error contract.
4. Two or three repeats of the first trial's values in new tensors (``deterministic``: every
   output, every repeat), one of them plain; then the endurance phase (:meth:`_Session.endurance`):
   a heavy-tailed number of further judged calls, so that no count of calls bounds the judged ones.
5. After a pause of a random length, every output of every call is re-read from the child and
   must be bitwise what it was at return (a thread that zeroes outputs later; ``synchronous``).
6. On a GPU, if accepted so far: the candidate is timed in the child with timer functions bound
   before it was imported; the last timed output and a synchronized re-run are judged against the
   reference and compared with each other; the re-read of step 5 is repeated; the reference is
   timed here.
7. The child is killed (its whole sandbox: the harness waits until every process in it has been
   reaped); the reference's files are hashed again and restored if they changed
   (``reference_intact``); only then is the report made. The verdict is
   :attr:`~.report.CheckReport.accepted`: the protocol ran to its end, every call was judged
   (``complete``), nothing failed.

**Coverage.** ``workloads`` selects workloads (indices or labels) and ``budget_s`` stops starting
new ones; ``progress`` is told about each workload. The report states what was covered.

**Limits.** With the sandbox (:mod:`.sandbox`) the child cannot write outside its folders, name
this process or outlive the check; without it (the machine refuses namespaces: the report's
``protocol.isolation`` says why, exit status 3) it is an ordinary process of the same user, and the
parent still writes its report last, after every process it knows of is dead, and restores the
reference. What the child reports about the call (threads, aliasing, pointer reuse) can be hidden
by a candidate that subverts the child's own code; values, determinism, memoization, input
integrity (the inputs sent back against this process's copies) and late writes are judged here.
"""
from __future__ import annotations

import hashlib
import math
import os
import random
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..core.errors import InvalidInputError
from .compare import bitwise_equal, dense, describe, judge, probe_oracle, same_layout, snapshot, unwritten
from .formats import CheckProblem, Workload, candidate_form, fork_rng, load_problem, parse_overrides, problem_format
from .guards import PatchGuard
from .isolation import ChildGone, spawn
from .report import CheckReport, Ledger

_Tensor = torch.Tensor
SETTLE_S = 0.05
ENDURANCE_TAIL = 1.5  # the Pareto exponent of the number of endurance calls (heavier tail: smaller)
ENDURANCE_MIN_S = 10.0  # the endurance phase may always take this long
POOL = 16  # earlier calls kept for repeats
CALL_TIMEOUT_S = 300.0
_GIB = 1 << 30


class ReferenceUnusable(InvalidInputError):
    """The reference raises on its own inputs, or differs from itself: exit 2, with the reason code."""

    def __init__(self, reason: str, expected: str, given: object) -> None:
        super().__init__("reference", expected, given)
        self.reason = reason


def _raised(w: Workload, e: Exception) -> ReferenceUnusable:
    return ReferenceUnusable("reference_error", "to run on its own inputs",
                             f"it raised {type(e).__name__}: {e} (workload {w.label})")


class _Stop(Exception):
    """A failure after which no further observation means anything."""


@dataclass
class _Call:
    workload: Workload
    dist: str
    inputs: list[Any]
    ref: tuple[Any, ...]
    oracle: tuple[Any, ...]
    perturbed: tuple[Any, ...]
    outs: list[Any]
    call_id: int = 0
    declared: tuple[Any, ...] | None = None  # the float64 program with its declared deviation (compare rule 4)

    def deviation(self, i: int) -> Any:
        return self.declared[i].cpu() if self.declared is not None and i < len(self.declared) else None


def default_limits(device: torch.device) -> dict[str, int]:
    """Memory (address space: CPU runs only, CUDA maps far more than it uses), CPU time, file size."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover - not Linux
        ram = 16 * _GIB
    doc = {"cpu_s": 4 * 3600, "file_bytes": 16 * _GIB}
    if device.type != "cuda":
        doc["memory_bytes"] = max(4 * _GIB, ram * 3 // 4)
    return doc


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl", ".py"))
    if path.suffix == ".json":
        return sorted(p for p in path.parent.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))
    return [path]


def _nbytes(ref: Sequence[Any]) -> list[int]:
    return [r.numel() * r.element_size() for r in ref if isinstance(r, _Tensor)]


def _unit_roundoff(args: Sequence[Any]) -> float:
    """One rounding at the precision arithmetic is done in: float64 inputs, else float32's."""
    return 2.0**-53 if any(isinstance(a, _Tensor) and a.dtype == torch.float64 for a in args) else 2.0**-24


class _Session:
    def __init__(self, problem: CheckProblem, ledger: Ledger, device: torch.device, settle_s: float,
                 timeout_s: float, rng: random.Random, exchange: str, declared: Any = None,
                 on_call: Callable[[str], None] | None = None) -> None:
        self.problem, self.ledger, self.device, self.declared = problem, ledger, device, declared
        self.on_call = on_call
        self.settle_s, self.timeout_s, self.rng, self.exchange = settle_s, timeout_s, rng, exchange
        self.child = None
        self.calls, self.plain_calls, self.trials = 0, 0, 0
        self.nondeterministic = self.destination_passing = False
        self.signatures: dict[str, list[str]] = {}
        self.returned: list[list[Any]] = []  # the outputs of every call as they were at return
        self.covered: list[str] = []
        self.partial: tuple[str, int, int] | None = None  # a workload the budget cut short: (label, done, planned)
        self.pool: list[_Call] = []  # earlier calls whose values the endurance phase may repeat
        self.endurance_calls = (0, 0)  # (drawn, made)
        self.warmups = self.endurance_draws = 0  # warm-up calls; endurance calls on new draws
        self.judged: set[int] = set()  # the calls whose values were judged
        self.candidate_path = ""  # whose files the memory_safe proofs read kernels from (set by start)
        self.launch_records: dict[str, dict[str, Any]] = {}  # the distinct Triton launches observed

    # ---- the trusted side ---------------------------------------------------------------------
    def reference(self, w: Workload, args: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
        try:
            ref = self.problem.run_reference([snapshot(a) for a in args])
            oracle = self.problem.run_oracle([snapshot(a) for a in args])
            perturbed = probe_oracle(self.problem.run_oracle, [snapshot(a) for a in args], _unit_roundoff(args))
        except InvalidInputError:
            raise
        except Exception as e:
            raise _raised(w, e) from None
        if not all(isinstance(r, _Tensor) for r in (*ref, *oracle)) or len(ref) != len(oracle):
            raise InvalidInputError("reference outputs", "tensors", [describe(r) for r in ref])
        if self.problem.allocate_outputs is not None and w.label not in self.signatures:
            want = self.problem.allocate_outputs(w, self.device)
            if [describe(t) for t in want] != [describe(r) for r in ref]:
                raise InvalidInputError("reference outputs", "the shapes and dtypes definition.json declares: "
                                        + ", ".join(describe(t) for t in want), [describe(r) for r in ref])
        return ref, oracle, perturbed

    def deviation_of(self, w: Workload, args: list[Any]) -> tuple[Any, ...] | None:
        """The float64 program with the caller's declared deviation on ``args`` (None: none declared, or
        a declaration that cannot run here: the contract is then the strict one, never a looser)."""
        if self.declared is None:
            return None
        try:
            with torch.no_grad():
                return tuple(self.declared.run([snapshot(a) for a in args]))
        except Exception:  # noqa: BLE001 - the caller's declaration, not the candidate: judged without it
            return None

    def reference_is_deterministic(self, w: Workload, args: list[Any]) -> None:
        """Two runs on identical inputs from different random states must agree (module docstring)."""
        outs = []
        for s in (self.rng.getrandbits(62), self.rng.getrandbits(62)):
            with fork_rng(self.device):
                torch.manual_seed(s)
                try:
                    outs.append(self.problem.run_reference([snapshot(a) for a in args]))
                except Exception as e:
                    raise _raised(w, e) from None
        if not all(bitwise_equal(a, b) for a, b in zip(*outs)):
            raise ReferenceUnusable(
                "reference_nondeterministic", "the same output for the same inputs",
                "two runs on identical inputs differ: it depends on the random state (dropout in training mode, "
                "random sampling); run with --eval (eval mode) or make the reference deterministic")

    # ---- talking to the child -----------------------------------------------------------------
    def _patches(self, reply: dict[str, Any], when: str) -> None:
        changes = reply.get("patches") or []
        if changes:
            more = f" (+{len(changes) - 4} more)" if len(changes) > 4 else ""
            self.ledger.fail("no_patching", f"{when}: " + "; ".join(changes[:4]) + more)
            raise _Stop("monkey_patch")
        self.ledger.ok("no_patching")

    def _ask(self, doc: dict[str, Any] | None, what: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Send ``doc`` (None: only wait) and return the reply; a child gone is a failure of its own."""
        if doc is not None and self.on_call is not None:
            self.on_call(what)
        try:
            if doc is not None:
                self.child.send(doc)  # type: ignore[union-attr]
            reply = self.child.recv(timeout_s or self.timeout_s, what)  # type: ignore[union-attr]
        except ChildGone as gone:
            self.ledger.fail({"timeout": "in_time", "exited": "no_exit", "crashed": "no_crash"}[gone.code],
                             gone.detail + self._log_tail())
            raise _Stop(gone.code) from None
        for name in ("in_time", "no_exit", "no_crash"):
            self.ledger.ok(name)
        return reply

    def _log_tail(self) -> str:
        """The last line of the child's output (read from the last 4 KiB only: the log may be huge)."""
        try:
            with open(os.path.join(self.exchange, "child.log"), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
                text = f.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f"; last output: {text[-1][:300]}" if text else ""

    def _save(self, name: str, obj: Any) -> str:
        """Written under a fresh random name (O_EXCL: never through a link), then renamed over ``name``: a
        link the child planted in the exchange folder (to the reference, the report) is replaced, not followed."""
        tmp = os.path.join(self.exchange, f".{os.urandom(8).hex()}")
        with open(tmp, "xb") as f:
            torch.save(obj, f)
        try:
            os.replace(tmp, os.path.join(self.exchange, name))
        except OSError as e:
            self._violation(f"the harness could not put {name!r} into the exchange folder: {e.strerror}")
        return name

    def _violation(self, what: str) -> None:
        """The child broke the harness's protocol (a forged, malformed or out-of-place reply): a rejection
        with its own reason code, and nothing after it is believed."""
        self.ledger.fail("protocol", what)
        raise _Stop("protocol_violation")

    def _load(self, name: Any) -> Any:
        """A file the child wrote into the exchange folder (a plain name, nothing else), loaded with no code run."""
        if not isinstance(name, str) or not name or os.path.basename(name) != name or name in (".", ".."):
            self._violation(f"a reply names the file {name!r}, not a file of the exchange folder")
        path = os.path.join(self.exchange, name)
        try:  # a regular file only, not through a link (a FIFO or a device would block or never end)
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise ValueError("not a regular file")
                doc = torch.load(f, weights_only=True, map_location="cpu")  # no code runs while loading
        except Exception as e:  # noqa: BLE001 - whatever the child wrote there
            self._violation(f"the file {name!r} the reply names cannot be read as tensors: {type(e).__name__}: {e}")
        self.ledger.ok("protocol")
        return doc

    def _load_pair(self, reply: dict[str, Any], what: str) -> tuple[list[Any], list[Any]]:
        """The two lists of the file a reply names (``what`` is the violation when it holds anything else)."""
        loaded = self._load(reply.get("outputs"))
        if not (isinstance(loaded, list) and len(loaded) == 2 and all(isinstance(x, list) for x in loaded)):
            self._violation(what)
        return loaded[0], loaded[1]

    def start(self, setup: dict[str, Any], load_timeout_s: float) -> None:
        self.child = spawn(self.exchange, writable=[setup["workdir"]])
        self.candidate_path = setup["candidate"]  # whose files the memory_safe proofs read kernels from
        reply = self._ask(setup, "loading the candidate", load_timeout_s)
        if not reply.get("ok") and reply.get("kind") == "invalid_input":
            raise InvalidInputError("CANDIDATE", "a loadable candidate", reply.get("error"))
        self._outcome(reply, "while loading the candidate", "after loading the candidate")
        self.nondeterministic = reply.get("nondeterministic") is True
        self.destination_passing = reply.get("destination_passing") is True

    def _destinations(self, w: Workload) -> list[list[Any]] | None:
        """Shapes and dtypes of the destination buffers the child allocates (destination-passing only)."""
        if not self.destination_passing:
            return None
        if self.problem.allocate_outputs is None:
            raise InvalidInputError("candidate", "value-returning for this format", "destination-passing")
        return [[list(t.shape), str(t.dtype).replace("torch.", "")]
                for t in self.problem.allocate_outputs(w, torch.device("meta"))]

    def _outcome(self, reply: dict[str, Any], raised: str, returned: str) -> None:
        """A reply that says the candidate raised is ``candidate_error`` (unless it also patched something,
        which comes first, or raised only because it asked for a CUDA side stream where there is no CUDA:
        ``async_work``, the class of what it tried; :func:`.guards.side_stream_attempt`); any reply is
        checked for patches."""
        if not reply.get("ok"):
            self._patches(reply, raised)
            side = reply.get("side_stream")
            if isinstance(side, str) and side:  # evidence against the candidate only: it cannot help it
                self.ledger.fail("synchronous", f"{raised}: it asked for {side[:200]}, which cannot exist on this "
                                 f"machine without CUDA ({str(reply.get('error'))[:300]}); whether work is left "
                                 "on a side stream after a call is observed on a GPU only")
                raise _Stop("async_work")
            self.ledger.fail("runs", str(reply.get("error")))
            raise _Stop("candidate_error")
        self._patches(reply, returned)

    def invoke(self, w: Workload, args: list[Any], ref: tuple[Any, ...], *, refill: bool = False,
               plain: bool = False) -> tuple[list[Any], dict[str, Any]]:
        self.calls += 1
        self.plain_calls += bool(plain)
        n = self.calls
        dests = self._destinations(w)
        name = self._save(f"in_{n}.pt", [a.cpu() if isinstance(a, _Tensor) else a for a in args])
        reply = self._ask({"op": "call", "id": n, "inputs": name, "refill": refill, "plain": plain,
                           "destinations": dests, "sizes": _nbytes(ref)}, f"call {n}")
        self._outcome(reply, "during a call that raised", "after a call")
        self.ledger.ok("runs")
        self.collect_launches(reply)
        outs, after = self._load_pair(reply, f"call {n}: the reply's file does not hold [outputs, inputs after the call]")
        if not all(o is None or isinstance(o, _Tensor) for o in outs):
            self._violation(f"call {n}: the reply's outputs are not tensors")
        self.returned.append(list(outs))
        self.judge_inputs(args, after, n)
        return list(outs), reply

    def judge_inputs(self, args: list[Any], after: list[Any], n: int) -> None:
        """The inputs as the child holds them after the call, against this process's own copy of what it
        sent: a candidate that rewrites the child's records of its inputs still has its writes seen here."""
        bad = []
        if len(after) != len(args):
            self._violation(f"call {n}: {len(after)} inputs sent back after the call, {len(args)} sent")
        for j, (a, b) in enumerate(zip(args, after)):
            if isinstance(a, _Tensor) and (not isinstance(b, _Tensor) or not bitwise_equal(a.cpu(), b)):
                bad.append(f"input {j} was modified by call {n} (its values, shape or dtype differ from the "
                           "harness's own copy)")
        self.ledger.record("inputs_unmodified", bad)

    # ---- per-call checks ----------------------------------------------------------------------
    def validate(self, outs: list[Any], kinds: list[str], ref: tuple[Any, ...]) -> None:
        dev = f"tensor@{ref[0].device}" if ref else ""
        for i, k in enumerate(kinds):
            if k.startswith("subclass:"):
                self.ledger.fail("plain_tensor", f"output {i} is a {k.split(':', 1)[1]}, a torch.Tensor subclass")
                raise _Stop("tensor_subclass")
        self.ledger.ok("plain_tensor")
        for i, k in enumerate(kinds):
            if k.startswith("object:"):
                lazy = " (it defines __torch_function__: a deferred proxy)" if k.endswith(":lazy") else ""
                self.ledger.fail("materialized", f"output {i} is a {k.split(':')[1]}, not a tensor{lazy}")
                raise _Stop("lazy_output")
            if k != dev and not (k.startswith("tensor@cuda") and dev.startswith("tensor@cuda")):
                self.ledger.fail("materialized", f"output {i} is {k.replace('tensor@', 'on ')}, the reference's "
                                 f"{dev.replace('tensor@', 'on ')}")
                raise _Stop("lazy_output")
        self.ledger.ok("materialized")
        if len(outs) != len(ref):
            self.ledger.fail("shape", f"{len(outs)} outputs returned, the reference returns {len(ref)}")
            raise _Stop("wrong_shape")
        for i, (o, r) in enumerate(zip(outs, ref)):
            if tuple(o.shape) != tuple(r.shape):
                self.ledger.fail("shape", f"output {i} has shape {list(o.shape)}, the reference's {list(r.shape)}")
                raise _Stop("wrong_shape")
        self.ledger.ok("shape")
        self.ledger.record("dtype", [f"output {i} is {describe(o)}, the reference's {describe(r)}"
                                     for i, (o, r) in enumerate(zip(outs, ref)) if o.dtype != r.dtype])
        bad = []
        for i, (o, r) in enumerate(zip(outs, ref)):
            if o.layout != torch.strided:
                bad.append(f"output {i} is not strided ({o.layout})")
            elif tuple(o.stride()) == tuple(r.stride()):
                continue  # the reference's own layout (an expanded, stride-0 output included)
            elif not dense(o):
                bad.append(f"output {i} is not dense (strides {list(o.stride())}; the reference's "
                           f"{list(r.stride())})")
            elif r.is_contiguous() and not o.is_contiguous():
                bad.append(f"output {i} has strides {list(o.stride())}; the reference's output is contiguous "
                           f"({list(r.stride())})")
        self.ledger.record("layout", bad)

    def observations(self, reply: dict[str, Any]) -> None:
        obs = reply.get("observations") or {}
        for name in ("synchronous", "no_aliasing", "inputs_unmodified", "fresh_buffers"):
            items = obs.get(name)
            self.ledger.record(name, [str(x) for x in items] if isinstance(items, list) else [])

    def history(self, prev: _Call, call: _Call, refill: bool) -> None:
        """An output bitwise equal to the previous call's although the reference's changed, and wrong
        for this call's inputs under the error contract (a constant or memoized answer). An output
        whose exact value barely depends on the inputs (group norm over one element per group: the
        reference changes only by its rounding noise) may repeat: it is right both times."""
        ref, outs = call.ref, call.outs
        repeated = [i for i, (r, pr, s, ps) in enumerate(zip(ref, prev.ref, outs, prev.outs))
                    if not bitwise_equal(r, pr) and s is not None and bitwise_equal(s, ps)
                    and not judge(s, r.cpu(), call.oracle[i].cpu(), perturbed=call.perturbed[i].cpu(),
                                  declared=call.deviation(i))[0]]
        if refill:
            if repeated:
                self.ledger.fail("not_memoized", f"after the inputs were overwritten in place with new values, "
                                 f"output {repeated[0]} is bitwise the previous call's result although the "
                                 "reference's changed")
            else:
                self.ledger.ok("not_memoized")
        elif any(not bitwise_equal(r, pr) for r, pr in zip(ref, prev.ref)):
            if repeated:
                self.ledger.fail("not_constant", f"output {repeated[0]} is bitwise identical for two different inputs "
                                 f"({prev.dist} and the next draw, in new tensors) although the reference's differs")
            else:
                self.ledger.ok("not_constant")

    def values(self, call: _Call, outs: list[Any], where: str) -> None:
        self.judged.add(self.calls)  # called right after the call it judges
        for i, (s, r, y, yp) in enumerate(zip(outs, call.ref, call.oracle, call.perturbed)):
            holes = unwritten(s, r.cpu())
            if holes:
                self.ledger.fail("fully_written", f"{holes} of {s.numel()} elements of output {i} are NaN where the "
                                 f"reference has numbers ({where}; outputs and new allocations are NaN-poisoned)")
            else:
                self.ledger.ok("fully_written")
            ok, msg = judge(s, r.cpu(), y.cpu(), perturbed=yp.cpu(), declared=call.deviation(i))
            if ok:
                self.ledger.ok("error_contract")
            else:
                self.ledger.fail("error_contract", f"output {i}, {where}: {msg}")

    # ---- the protocol -------------------------------------------------------------------------
    def draw(self, w: Workload, dist: str, gen: torch.Generator) -> list[Any]:
        return self.problem.draw_inputs(w, gen, dist, self.device)

    def trial(self, w: Workload, dist: str, gen: torch.Generator, prev: _Call | None, refill: bool) -> _Call:
        args = self.draw(w, dist, gen)
        if refill and (prev is None or not same_layout(prev.inputs, args)):
            refill = False
        ref, oracle, perturbed = self.reference(w, args)
        self.signatures.setdefault(w.label, [describe(a) for a in args])
        plain = self.rng.random() < 0.25
        outs, reply = self.invoke(w, args, ref, refill=refill, plain=plain)
        self.validate(outs, list(reply.get("kinds") or []), ref)
        self.observations(reply)
        call = _Call(w, dist, args, ref, oracle, perturbed, outs, self.calls, self.deviation_of(w, args))
        if len(self.pool) < POOL:
            self.pool.append(call)
        elif self.rng.random() < 0.5:
            self.pool[self.rng.randrange(POOL)] = call
        if prev is not None:
            self.history(prev, call, refill)
        self.values(call, outs, f"{dist} inputs, workload {w.label}")
        return call

    def repeat(self, first: _Call) -> None:
        """Two or three calls on the first trial's values in new tensors: every output bitwise equal."""
        n = self.rng.randint(2, 3)
        plain_at = self.rng.randrange(n)
        differ: list[str] = []
        for k in range(n):
            outs, reply = self.invoke(first.workload, [snapshot(a) for a in first.inputs], first.ref,
                                      plain=(k == plain_at))
            self.validate(outs, list(reply.get("kinds") or []), first.ref)
            reused = reply.get("reuses") if isinstance(reply.get("reuses"), list) else []
            if first.call_id in reused and not self.ledger.has_failed("fresh_buffers"):
                self.ledger.fail("not_memoized", "a repeat of the first trial's input values, in new tensors, "
                                 f"returned memory of the first trial's output (call {first.call_id}): a cache "
                                 "keyed on values")
            else:
                self.ledger.ok("not_memoized")
            self.values(first, outs, f"a repeat of the first trial's {first.dist} inputs, workload {first.workload.label}")
            differ += [f"output {i} at repeat {k + 1}" for i, (s, fs) in enumerate(zip(outs, first.outs))
                       if not bitwise_equal(s, fs)]
        if self.nondeterministic:
            self.ledger.skip("deterministic", f"declared nondeterministic; {n} repeats on identical inputs were "
                             + ("bitwise equal" if not differ else "different"))
        elif differ:
            self.ledger.fail("deterministic", f"calls on identical inputs differ bitwise ({differ[0]}), and the "
                             "candidate does not declare itself nondeterministic")
        else:
            self.ledger.ok("deterministic")

    def endurance(self, gen: torch.Generator, budget_s: float | None, t0: float) -> None:
        """More judged calls, as many as a heavy-tailed draw says, so that no count of calls bounds the
        judged ones (a candidate right for its first N calls and garbage after is caught whenever the
        draw passes N: always for N below 1.5 times the calls made so far, and with probability
        ``(made / 2 / (N - made)) ** 1.5`` beyond). Each is a new draw on a covered workload or, as often,
        a repeat in new tensors of an earlier call's values (judged again, and bitwise equal to that
        call's output unless declared nondeterministic). The calls look like every other call to the
        candidate. Limited in time to ``max(ENDURANCE_MIN_S, the time spent so far)`` and by ``budget_s``;
        the report states how many were drawn and made."""
        made = self.calls
        extra = math.ceil(made / 2 * (1.0 - self.rng.random()) ** (-1 / ENDURANCE_TAIL))
        started = time.perf_counter()
        limit = max(ENDURANCE_MIN_S, started - t0)
        done = 0
        while done < extra:
            now = time.perf_counter()
            if now - started > limit or (budget_s is not None and now - t0 > budget_s):
                break
            done += 1
            if self.rng.random() < 0.5 or not self.pool:
                w = self.rng.choice([u for u in self.problem.workloads if u.label in self.covered] or
                                    [self.problem.workloads[0]])
                dist = self.problem.distributions[self.rng.randrange(len(self.problem.distributions))]
                self.endurance_draws += 1
                self.trial(w, dist, gen, None, refill=False)
                continue
            old = self.rng.choice(self.pool)
            outs, reply = self.invoke(old.workload, [snapshot(a) for a in old.inputs], old.ref,
                                      plain=self.rng.random() < 0.25)
            self.validate(outs, list(reply.get("kinds") or []), old.ref)
            self.observations(reply)
            self.values(old, outs, f"call {self.calls}, a repeat of call {old.call_id}'s {old.dist} inputs")
            if not self.nondeterministic:
                self.ledger.record("deterministic", [f"call {self.calls} differs bitwise from call {old.call_id} on "
                                                     f"the same input values (output {i})"
                                                     for i, (a, b) in enumerate(zip(outs, old.outs))
                                                     if not bitwise_equal(a, b)][:1])
        self.endurance_calls = (extra, done)

    def recheck(self, when: str) -> None:
        """Every output of every call, re-read now, must be what it was at return (late writes)."""
        pause = self.rng.uniform(0.3, 0.6)
        time.sleep(pause)
        reply = self._ask({"op": "recheck", "id": self.calls}, f"re-reading the outputs {when}")
        self._patches(reply, when)
        now, shared = self._load(reply.get("outputs")), reply.get("shared") or []
        if not isinstance(now, list) or len(now) != len(self.returned) or not all(isinstance(c, list) for c in now):
            self._violation(f"re-reading the outputs {when}: the reply holds {type(now).__name__}, not the outputs "
                            f"of the {len(self.returned)} calls")
        late, overwritten = [], []
        for c, (was, cur) in enumerate(zip(self.returned, now)):
            for i, (a, b) in enumerate(zip(was, cur)):
                if a is not None and (b is None or not bitwise_equal(a, b)):
                    through = c < len(shared) and i < len(shared[c]) and shared[c][i] is True
                    (overwritten if through else late).append(f"output {i} of call {c + 1}")
        self.ledger.record("synchronous", [f"{x} changed {when} (re-read {pause:.2f} s after the last call)"
                                           for x in late[:3]])
        self.ledger.record("fresh_buffers", [f"{x} was overwritten later, through memory it shares with a later "
                                             "call's output or an input" for x in overwritten[:3]])

    def run(self, trials: int, gen: torch.Generator, workloads: list[Workload], budget_s: float | None,
            t0: float, progress: Callable[[str], None]) -> None:
        w0 = workloads[0]
        self.warmups = self.rng.randint(1, 2)
        for _ in range(self.warmups):  # warm-up: judged like every other call
            self.trial(w0, self.problem.distributions[0], gen, None, refill=False)
        first: _Call | None = None
        for n, w in enumerate(workloads):
            k_trials = trials + self.rng.randint(0, 2)
            started = time.perf_counter()
            prev, done = None, 0
            for k in range(k_trials):
                if budget_s is not None and first is not None and time.perf_counter() - t0 > budget_s:
                    break  # the budget is checked before every trial but the very first
                dist = self.problem.distributions[k % len(self.problem.distributions)]
                prev = self.trial(w, dist, gen, prev, refill=(k == 1))
                first = first or prev
                done += 1
            self.trials += done
            if done == 0:
                progress(f"time budget of {budget_s:g} s reached after {n} of {len(workloads)} workloads")
                break
            self.covered.append(w.label)
            status = f"failed: {', '.join(self.ledger.failed)}" if self.ledger.failed else "no failure so far"
            progress(f"workload {n + 1}/{len(workloads)} {w.label}: {done} of {k_trials} trials, "
                     f"{time.perf_counter() - started:.1f} s, {status}")
            if done < k_trials:
                self.partial = (w.label, done, k_trials)
                progress(f"time budget of {budget_s:g} s reached during workload {n + 1} of {len(workloads)}")
                break
        if first is not None:
            self.repeat(first)
            self.endurance(gen, budget_s, t0)
            self.recheck("after the calls")
        if self.ledger.seen["not_constant"] == 0:
            self.ledger.skip("not_constant", "no two trials on new tensors whose reference outputs differ "
                                             "(needs at least 3 trials per workload)")
        self.prove_launches()

    # ---- memory_safe: the observed Triton launches, proved (launches.py) ------------------------------
    def collect_launches(self, reply: dict[str, Any]) -> None:
        """Keep the launches a call's reply reports (evidence for a rejection only: the child is the candidate's)."""
        from .launches import merge

        merge(self.launch_records, reply.get("launches"))

    def prove_launches(self, budget_s: float | None = None) -> None:
        """Prove every distinct launch observed, once, in a separate process with a time limit: ``memory_safe``
        fails on a proved out-of-bounds access or race, passes when all are proved, else is skipped."""
        from .launches import PROOF_BUDGET_S, prove

        records = list(self.launch_records.values())
        status, message, proved = prove(records, self.candidate_path,
                                        overrides=self.problem.overrides,
                                        kernelbench=self.problem.format == "kernelbench",
                                        budget_s=budget_s or PROOF_BUDGET_S)
        if status == "failed":
            self.ledger.fail("memory_safe", message)
        elif status == "skipped":
            self.ledger.skip("memory_safe", message)
        for _ in range(max(proved, 1 if status == "passed" else 0)):
            self.ledger.ok("memory_safe")

    def timed(self, gen: torch.Generator) -> dict[str, Any]:
        """Time the candidate in the child (step 6) and judge what the timed calls returned."""
        from .speed import INPUT_SETS, time_reference

        w = self.problem.workloads[0]
        sets = [self.draw(w, self.problem.distributions[0], gen) for _ in range(INPUT_SETS)]
        dests = self._destinations(w)
        name = self._save("timing_inputs.pt", [[a.cpu() if isinstance(a, _Tensor) else a for a in s] for s in sets])
        reply = self._ask({"op": "time", "id": self.calls, "inputs": name, "destinations": dests},
                          "timing the candidate", 4 * self.timeout_s)
        self._outcome(reply, "while timing", "after timing")
        last, rerun = self._load_pair(reply, "timing: the reply's file does not hold [last timed outputs, re-run outputs]")
        judged = sets[int((reply.get("timing") or {}).get("judged_set", 0)) % len(sets)]
        ref, oracle, perturbed = self.reference(w, judged)
        call = _Call(w, "timed", judged, ref, oracle, perturbed, last, declared=self.deviation_of(w, judged))
        self.values(call, last, "the last timed call")
        self.values(call, rerun, "a synchronized re-run after timing")
        if not self.nondeterministic and not all(bitwise_equal(a, b) for a, b in zip(last, rerun)):
            self.ledger.fail("deterministic", "the last timed call and a synchronized re-run on the same inputs "
                             "differ bitwise")
        self.recheck("after timing")
        doc = dict(reply.get("timing") or {})
        ref_t = time_reference(self.problem, sets)
        doc.update(ref_t)
        doc["speedup"] = ref_t["reference_ms"] / max(float(doc.get("candidate_ms", 0.0)), 1e-9)
        return doc


def _interpreter_distributions(problem: CheckProblem, probe: Sequence[Any], dev: torch.device) -> None:
    """Under Triton's CPU interpreter, bfloat16 subnormals are decoded wrongly on load (1e-39 reads as
    4.4e-39, 9.2e-41 as 0; checked with Triton 3.9): every correct bfloat16 Triton kernel would fail the
    ``subnormal`` draws there. Those draws are left out on a CPU when an input is bfloat16, and the report
    says so (``problem.skipped_distributions``); on a GPU they run."""
    if dev.type == "cuda" or "subnormal" not in problem.distributions:
        return
    if any(isinstance(a, _Tensor) and a.dtype == torch.bfloat16 for a in probe):
        problem.distributions = tuple(d for d in problem.distributions if d != "subnormal")
        problem.info["skipped_distributions"] = {
            "subnormal": "bfloat16 input under Triton's CPU interpreter, which decodes bfloat16 subnormals "
                         "wrongly on load; judged on a GPU only"}


def _isolation_of(child: Any) -> dict[str, Any]:
    """What the candidate's process was kept from (see :mod:`.isolation`); not isolated when unknown."""
    doc = getattr(child, "isolation", None)
    if isinstance(doc, dict) and "isolated" in doc:
        return dict(doc)
    return {"isolated": False, "missing": ["the candidate's process did not report its isolation"]}


def _select(problem: CheckProblem, chosen: Sequence[str] | None) -> list[Workload]:
    if not chosen:
        return list(problem.workloads)
    labels = [w.label for w in problem.workloads]
    out = []
    for item in chosen:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            if part.isdigit() and int(part) < len(labels):
                out.append(problem.workloads[int(part)])
            elif part in labels:
                out.append(problem.workloads[labels.index(part)])
            else:
                raise InvalidInputError("--workloads", f"indices 0..{len(labels) - 1} or labels "
                                        f"({', '.join(labels[:4])}{', ...' if len(labels) > 4 else ''})", part)
    unique: list[Workload] = []
    for w in out:
        if all(w is not u for u in unique):
            unique.append(w)
    return unique


def check(reference: str | Path, candidate: str | Path, *, trials: int | None = None, seed: int = 0,
          overrides: Sequence[str] | dict[str, Any] | None = None, settle_s: float = SETTLE_S,
          device: str | torch.device | None = None, timing: bool = True, workloads: Sequence[str] | None = None,
          budget_s: float | None = None, call_timeout_s: float = CALL_TIMEOUT_S,
          limits: dict[str, int] | None = None, eval_mode: bool = False,
          progress: Callable[[str], None] | None = None, declared: Any = None,
          cpu_cap: int | None = None, on_call: Callable[[str], None] | None = None) -> CheckReport:
    """Run every hardened check of CANDIDATE against REFERENCE (see the module docstring).

    Args:
        reference: a KernelBench ``.py`` file, or a FlashInfer-Bench / SOL-ExecBench problem folder.
        candidate: a KernelBench ``.py`` file with ``ModelNew``, or a ``solution.json`` (or its folder).
        trials: input draws per workload (default: one per distribution; 0 to 2 more are added at random).
        seed: seeds weight initialisation and every input draw.
        overrides: ``--set`` items, ``["NAME=VALUE", ...]`` or a mapping.
        settle_s: the pause before outputs are re-read for late writes, after each call.
        device: where to run (default: CUDA when available, else CPU).
        timing: time candidate and reference on a GPU when the candidate is accepted.
        workloads: workload indices or labels to check (default: all).
        budget_s: no new workload is started after this many seconds; the report states the coverage.
        call_timeout_s: the deadline of each call (loading gets it plus a minute), then SIGKILL.
        limits: the child's resource limits (:func:`default_limits`'s keys).
        eval_mode: put both models in eval mode (KernelBench; e.g. for dropout).
        progress: told one line per workload.
        on_call: told each request sent to the candidate's process (what it is), before it is sent.
        declared: a deviation the candidate's compiler declares (an object with ``run(args)``, the
            program in float64 with the deviation, ``summary`` and ``to_json()``; e.g.
            :class:`warpsmith.compiler.precision.Declaration`): the error contract composed with it and
            capped at KernelBench's tolerance (:func:`~.compare.judge`, rule 4). A library argument
            only: the candidate never supplies it.
        cpu_cap: FlashInfer-Bench / SOL-ExecBench: on a CPU, every axis above it is set to it (the
            consts too, unless the reference refuses them; :mod:`.flashinfer`), so that GPU-sized
            workloads finish under Triton's interpreter. On a GPU it is not applied: full sizes. The
            report's ``problem.cpu_cap`` says what was capped.

    Raises:
        InvalidInputError: the files are unusable, or the reference is (:class:`ReferenceUnusable`):
            the CLI's exit code 2.
    """
    t0 = time.perf_counter()
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sets = parse_overrides(overrides)
    if trials is not None and trials < 1:
        raise InvalidInputError("--trials", "a positive integer", trials)
    if budget_s is not None and budget_s <= 0:
        raise InvalidInputError("--budget", "a positive number of seconds", budget_s)
    ref_path = Path(reference)
    if not ref_path.exists():
        raise InvalidInputError("REFERENCE", "an existing file or folder", str(ref_path))
    candidate_form(candidate, problem_format(ref_path))  # the other format's form is refused before any work
    originals = {p: p.read_bytes() for p in _files(ref_path)}  # before anything runs
    hashes = {p: hashlib.sha256(b).hexdigest() for p, b in originals.items()}
    host_guard = PatchGuard()  # the reference is trusted, but a library call leaves no global state changed
    tell = progress or (lambda _msg: None)
    exchange = tempfile.mkdtemp()  # neutral names: the child sees these paths
    workdir = tempfile.mkdtemp()
    rng = random.Random(int.from_bytes(os.urandom(8), "little"))  # the protocol's shape: not from --seed
    ledger, session, stopped = Ledger(), None, None
    timing_doc: dict[str, Any] = {"kind": "not measured", "reason": "no GPU" if dev.type != "cuda" else "rejected"}
    try:
        problem = load_problem(ref_path, sets, seed=seed, device=dev,
                               cap=cpu_cap if dev.type == "cpu" else None)
        if cpu_cap is not None and dev.type != "cpu":
            problem.info["cpu_cap"] = {"cap": cpu_cap, "applied": False, "reason": f"full sizes on {dev.type}"}
        if eval_mode:
            problem.set_eval()
        chosen = _select(problem, workloads)
        per_workload = trials or len(problem.distributions)
        session = _Session(problem, ledger, dev, settle_s, call_timeout_s, rng, exchange, declared, on_call)
        gen = torch.Generator().manual_seed(seed + 0x5EED)
        probe = problem.draw_inputs(chosen[0], torch.Generator().manual_seed(seed), problem.distributions[0], dev)
        _interpreter_distributions(problem, probe, dev)
        session.reference_is_deterministic(chosen[0], probe)
        session.reference(chosen[0], probe)
        torch.save(problem.child_context, os.path.join(exchange, "context.pt"))
        setup = {"limits": limits if limits is not None else default_limits(dev), "workdir": workdir,
                 "interpret": dev.type != "cuda", "device": str(dev), "name": problem.name,
                 "format": problem.format, "reference": str(ref_path), "candidate": str(Path(candidate).resolve()),
                 "output_names": list(problem.output_names), "seed": seed, "overrides": problem.overrides,
                 "eval_mode": eval_mode, "settle_s": settle_s}
        try:
            session.start(setup, call_timeout_s + 60.0)
            session.run(per_workload, gen, chosen, budget_s, t0, tell)
            if timing and dev.type == "cuda" and not ledger.failed:
                timing_doc = session.timed(gen)
        except _Stop as stop:
            stopped = str(stop)
        except InvalidInputError:
            raise
        except Exception as e:  # noqa: BLE001 - anything else is a reply the harness could not use
            ledger.fail("protocol", f"the harness could not use what the candidate's process sent: "
                        f"{type(e).__name__}: {e}")
            stopped = "protocol_violation"
    finally:
        if session is not None and session.child is not None:
            session.child.close()
        host_guard.restore()
        shutil.rmtree(exchange, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
        changed = [p for p, h in hashes.items() if not p.exists() or hashlib.sha256(p.read_bytes()).hexdigest() != h]
        for p in changed:  # the user's file is put back as it was
            p.write_bytes(originals[p])
    if stopped is None and session is not None:  # the verdict's completeness: every call made was judged
        unjudged = [n for n in range(1, session.calls + 1) if n not in session.judged]
        if session.calls == 0 or unjudged:
            ledger.fail("complete", f"{len(unjudged)} of {session.calls} candidate calls were not judged"
                        if session.calls else "no candidate call was made")
        else:
            ledger.ok("complete")
    elif not ledger.failed:
        ledger.fail("complete", f"the protocol stopped ({stopped}) before its end")
    if changed:
        ledger.fail("reference_intact", "the reference's file(s) changed during the run and were restored: "
                    + ", ".join(p.name for p in changed))
    else:
        ledger.ok("reference_intact")
    assert session is not None
    problem_doc = {"name": problem.name, "overrides": problem.overrides, "distributions": list(problem.distributions),
                   "workloads": [{"label": w.label, "axes": dict(w.axes), "inputs": session.signatures.get(w.label),
                                  "checked": w.label in session.covered} for w in problem.workloads],
                   **problem.info}
    coverage = {"workloads_checked": len(session.covered), "workloads_selected": len(chosen),
                "workloads_total": len(problem.workloads), "budget_s": budget_s,
                "selected": workloads is not None and len(chosen) < len(problem.workloads),
                "partial": ({"workload": session.partial[0], "trials": session.partial[1],
                             "planned": session.partial[2]} if session.partial else None)}
    return CheckReport(reference=str(reference), candidate=str(candidate), format=problem.format, device=str(dev),
                       seed=seed, trials=per_workload, problem=problem_doc, checks=ledger.results(stopped),
                       timing=timing_doc, elapsed_s=time.perf_counter() - t0, calls=session.calls,
                       complete=stopped is None, coverage=coverage,
                       protocol={"calls": session.calls, "plain_calls": session.plain_calls, "trials": session.trials,
                                 "call_timeout_s": call_timeout_s,
                                 "warmup_calls": session.warmups,
                                 "endurance": {"drawn": session.endurance_calls[0], "made": session.endurance_calls[1],
                                               "new_draws": session.endurance_draws},
                                 "isolation": _isolation_of(session.child),
                                 "declared": declared.to_json() if declared is not None else None})
