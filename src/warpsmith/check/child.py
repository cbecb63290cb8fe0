"""The candidate's side of ``warpsmith check``: a fresh interpreter that loads and calls the candidate.

Started by :mod:`.isolation` as ``python -m warpsmith.check.child CTRL_FD REPLY_FD EXCHANGE``.
It never sees the reference's outputs or the oracle: it receives inputs, runs the candidate, and
sends back what the candidate returned, with what it observed around the call (threads still
running, outputs changed after a pause, memory shared with inputs, inputs modified, patches).

Before the candidate is imported it sets its resource limits (memory, CPU time, file size), moves
to a private empty working directory, imports Triton (the interpreter where there is no GPU),
binds every function it uses and takes the patch snapshot. Everything it reports is evidence
*against* the candidate only: the parent judges values itself, and a candidate that subverts this
process can at most hide its own misbehaviour inside it (the limit stated in :mod:`.hardened`).

Messages are JSON lines on two pipes; tensors cross as ``torch.save`` files in the exchange
folder, read back by the parent with ``weights_only=True``.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

_sleep, _dumps, _loads = time.sleep, json.dumps, json.loads
_write, _read, _exit, _urandom = os.write, os.read, os._exit, os.urandom


def _random_fraction() -> float:
    """In [0, 1), from the OS's entropy (not from a generator state the candidate could read)."""
    return int.from_bytes(_urandom(4), "little") / 2**32


def _limits(doc: dict[str, Any]) -> None:
    """Soft and hard limits alike (a process cannot raise a hard limit without privileges)."""
    for name, key in (("RLIMIT_AS", "memory_bytes"), ("RLIMIT_CPU", "cpu_s"), ("RLIMIT_FSIZE", "file_bytes")):
        value = doc.get(key)
        if value:
            resource.setrlimit(getattr(resource, name), (int(value), int(value)))


class _Channel:
    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd, self.buf = rfd, wfd, b""

    def recv(self) -> dict[str, Any] | None:
        while b"\n" not in self.buf:
            chunk = _read(self.rfd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return _loads(line)

    def send(self, doc: dict[str, Any]) -> None:
        data = (_dumps(doc) + "\n").encode()
        while data:
            data = data[_write(self.wfd, data):]


def main(argv: list[str]) -> None:
    ctrl, reply, exchange = int(argv[0]), int(argv[1]), argv[2]
    chan = _Channel(ctrl, reply)
    setup = chan.recv()
    if setup is None:
        _exit(3)
    _limits(setup.get("limits", {}))
    os.chdir(setup["workdir"])
    if setup.get("interpret"):
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    from ..core import _triton  # noqa: F401  (the interpreter, decided before the candidate imports triton)
    from . import flashinfer, kernelbench, solution  # noqa: F401  (imported before the snapshot: guarded)
    from .compare import bitwise_equal, identity, shares_memory, snapshot
    from .formats import CandidateError, CheckProblem, as_outputs, load_candidate
    from .guards import PatchGuard, PoisonEmpty, SideStreams, live_threads, poison_allocator, side_stream_attempt
    from .interpreter import first_config_autotune
    from ..core.variant import poison_fill
    from ..core.errors import WarpsmithError

    _Tensor, _save, _load, _no_grad = torch.Tensor, torch.save, torch.load, torch.no_grad
    device = torch.device(setup["device"])
    _sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if setup.get("interpret"):
        first_config_autotune()
    from . import launches

    launches.install()  # records every Triton launch for the memory_safe proofs (before the patch snapshot)
    context = _load(os.path.join(exchange, "context.pt"), weights_only=False)  # written by the parent
    problem = CheckProblem(name=setup["name"], format=setup["format"], path=setup["reference"], workloads=[],
                           distributions=(), output_names=tuple(setup["output_names"]), draw_inputs=None,
                           run_reference=None, run_oracle=None, seed=setup["seed"], overrides=setup["overrides"],
                           context=context)  # type: ignore[arg-type]
    import io

    _save([torch.zeros(1)], io.BytesIO())  # pickling sets torch.Tensor.__slotnames__ once: before the snapshot
    streams = SideStreams(device)  # a GPU's pooled streams, taken before the candidate can use one
    guard = PatchGuard()

    def side_stream(e: BaseException) -> str | None:  # a side stream asked for where CUDA is missing
        return side_stream_attempt(e) if device.type != "cuda" else None
    try:
        cand = load_candidate(setup["candidate"], problem, device=device)
    except CandidateError as e:
        chan.send({"ok": False, "kind": "candidate_error", "error": str(e), "patches": guard.changes(),
                   "side_stream": side_stream(e)})
        return
    except WarpsmithError as e:
        chan.send({"ok": False, "kind": "invalid_input", "error": str(e), "patches": guard.changes()})
        return
    if setup.get("eval_mode"):
        cand.set_eval()
    settle_s = float(setup.get("settle_s", 0.05))
    chan.send({"ok": True, "nondeterministic": cand.nondeterministic, "destination_passing": cand.destination_passing,
               "patches": guard.changes()})

    # The child's own records are tuples, rebound only here (a candidate that rewrites a list it finds in a
    # closure or a frame changes nothing the parent judges: the parent compares the inputs sent back after
    # each call with its own copies, and keeps its own copy of every output as returned).
    state: dict[str, Any] = {"retained": (), "held": (), "last": None}

    def describe_kind(o: Any) -> str:
        if type(o) is _Tensor:
            return "meta" if o.is_meta else f"tensor@{o.device}"
        if isinstance(o, _Tensor):
            return f"subclass:{type(o).__qualname__}"
        lazy = hasattr(type(o), "__torch_function__")
        return f"object:{type(o).__qualname__}" + (":lazy" if lazy else "")

    def on_device(args: list[Any]) -> list[Any]:
        return [a.to(device) if isinstance(a, _Tensor) else a for a in args]

    def plain(outs: tuple[Any, ...]) -> list[Any]:
        return [snapshot(o).cpu() if type(o) is _Tensor and not o.is_meta else None for o in outs]

    def prepare(req: dict[str, Any]) -> tuple[tuple[Any, ...], list[Any] | None, bool]:
        """The call's arguments (the previous call's buffers refilled in place when the parent asks) and
        destination buffers. The request is consumed here: none of the parent's decisions stays in a frame
        the candidate can inspect while it runs (whether buffers are reused it can see, as any caller's
        static buffers; that they were reused on purpose it cannot)."""
        fresh = on_device(_load(os.path.join(exchange, req["inputs"]), weights_only=True))
        last = state["last"]
        if req.get("refill") and last is not None:
            args = list(last)
            for i, (a, b) in enumerate(zip(args, fresh)):
                if isinstance(a, _Tensor):
                    a.data.copy_(b)  # same buffers, same version counter: a (data_ptr, _version) cache is stale
                else:
                    args[i] = b
        else:
            args = fresh
        dps = None
        if cand.destination_passing:
            dps = [poison_fill(torch.empty(tuple(s), dtype=getattr(torch, d), device=device))
                   for s, d in req["destinations"]]
        poison_allocator(req.get("sizes", []), device)
        return tuple(args), dps, bool(req.get("plain"))

    def call(box: list[Any]) -> dict[str, Any]:
        call_id = int(box[0]["id"])
        args, dps, no_harness_state = prepare(box.pop())
        saved = [snapshot(a) for a in args]
        meta = [identity(a) if isinstance(a, _Tensor) else None for a in args]
        dps_meta = [identity(t) for t in dps] if dps is not None else []
        prev = state["retained"][-1] if state["retained"] else ()
        prev_snaps = [snapshot(p) if type(p) is _Tensor and not p.is_meta else None for p in prev]
        before = set(live_threads())
        try:
            if no_harness_state:  # no mode, grad enabled: nothing of the harness to observe
                result = cand.call(list(args), dps)
            else:
                with _no_grad(), PoisonEmpty():
                    result = cand.call(list(args), dps)
        except BaseException as e:  # SystemExit included: the process stays ours
            return {"ok": False, "error": f"the call raised {type(e).__name__}: {e}", "patches": guard.changes(),
                    "side_stream": side_stream(e)}
        left = streams.left_behind()  # before any synchronization: work left on a side stream (GPU)
        _sync()
        outs = tuple(dps) if dps is not None else as_outputs(result, problem.output_names)
        kinds = [describe_kind(o) for o in outs]
        snaps = plain(outs)
        inputs_after = [snapshot(a).cpu() if type(a) is _Tensor and not a.is_meta else None for a in args]
        patches = guard.changes()
        obs: dict[str, list[str]] = {}
        started = [t.name for t in live_threads() if t not in before and t.is_alive()]
        _sleep(settle_s * (1 + _random_fraction()))  # drawn after the call returned: not knowable before
        _sync()
        changed = [i for i, (o, s) in enumerate(zip(outs, snaps))
                   if s is not None and not bitwise_equal(snapshot(o).cpu(), s)]
        obs["synchronous"] = ([f"thread(s) {', '.join(started)} started by the call still running after it "
                               "returned"] if started else []) + [f"output {i} changed after the call returned"
                                                                  for i in changed] + left
        tensors = [o for o in outs if type(o) is _Tensor and not o.is_meta]
        alias = []
        for i, o in enumerate(outs):
            if type(o) is not _Tensor or o.is_meta:
                continue
            alias += [f"output {i} shares memory with input {j}" for j, a in enumerate(args)
                      if isinstance(a, _Tensor) and shares_memory(o, a)]
            alias += [f"outputs {j} and {i} share memory" for j in range(i)
                      if type(outs[j]) is _Tensor and shares_memory(o, outs[j])]
            if any(shares_memory(o, p) for p in cand.state()):
                alias.append(f"output {i} shares memory with a parameter or buffer of the candidate")
        if dps is not None:
            alias += [f"destination buffer {i} was rebound to other memory"
                      for i, (t, m) in enumerate(zip(dps, dps_meta)) if identity(t) != m]
        obs["no_aliasing"] = alias
        bad = []
        for j, (a, s, m) in enumerate(zip(args, saved, meta)):
            if isinstance(a, _Tensor) and (identity(a) != m or not bitwise_equal(a, s)):
                bad.append(f"input {j} was modified (its values, shape, strides or storage changed)")
        obs["inputs_unmodified"] = bad
        stale = [f"output {i} of the previous call changed during this call"
                 for i, (p, ps) in enumerate(zip(prev, prev_snaps)) if ps is not None and not bitwise_equal(p, ps)]
        stale += [f"output {i} reuses the memory of the previous call's output" for i, o in enumerate(tensors)
                  if any(type(p) is _Tensor and not p.is_meta and shares_memory(o, p) for p in prev)]
        obs["fresh_buffers"] = stale
        # which earlier calls' outputs this call's outputs share memory with (the parent knows which call
        # repeated which values; the child is not told)
        reused = sorted({c + 1 for c, r in enumerate(state["retained"]) for o in tensors
                         if any(type(p) is _Tensor and not p.is_meta and shares_memory(o, p) for p in r)})
        state["retained"] = state["retained"] + (outs,)
        state["held"] = state["held"] + (args,)
        state["last"] = args
        name = f"out_{call_id}.pt"
        _save([snaps, inputs_after], os.path.join(exchange, name))
        return {"ok": True, "outputs": name, "kinds": kinds, "observations": obs, "patches": patches,
                "reuses": reused, "launches": launches.take()}

    def recheck(box: list[Any]) -> dict[str, Any]:
        req = box.pop()
        _sync()
        retained = state["retained"]
        name = f"recheck_{req['id']}.pt"
        _save([plain(outs) for outs in retained], os.path.join(exchange, name))
        inputs = [t for a in state["held"] for t in a if type(t) is _Tensor and not t.is_meta]

        def overwritable(c: int, o: Any) -> bool:  # shares memory with a later output or any input
            others = [t for r in retained[c + 1:] for t in r if type(t) is _Tensor and not t.is_meta] + inputs
            return type(o) is _Tensor and not o.is_meta and any(shares_memory(o, t) for t in others)

        shared = [[overwritable(c, o) for o in outs] for c, outs in enumerate(retained)]
        return {"ok": True, "outputs": name, "shared": shared, "patches": guard.changes()}

    def timed(box: list[Any]) -> dict[str, Any]:
        req = box.pop()
        from .speed import time_in_child

        launches.recording(False)  # the recorder's work is not the candidate's: not timed

        sets = [on_device(s) for s in _load(os.path.join(exchange, req["inputs"]), weights_only=True)]
        try:
            doc, last_out, rerun = time_in_child(cand, sets, req.get("destinations"), device)
        except BaseException as e:
            return {"ok": False, "error": f"a timed call raised {type(e).__name__}: {e}", "patches": guard.changes()}
        name = f"timed_{req['id']}.pt"
        _save([plain(as_outputs(last_out, problem.output_names)), plain(as_outputs(rerun, problem.output_names))],
              os.path.join(exchange, name))
        return {"ok": True, "timing": doc, "outputs": name, "patches": guard.changes()}

    handlers = {"call": call, "recheck": recheck, "time": timed}
    box: list[Any] = []  # the request travels in a box the handler empties: no frame keeps it during a call
    while True:
        box.append(chan.recv())
        op = box[0].get("op") if isinstance(box[0], dict) else None
        if op not in handlers:
            break  # end of the channel, "bye", or a request this child does not know
        chan.send(handlers[op](box))
    _exit(0)  # no atexit hook of the candidate's runs: the verdict is the parent's anyway


if __name__ == "__main__":
    main(sys.argv[1:])
