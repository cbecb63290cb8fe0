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
_write, _read, _exit = os.write, os.read, os._exit


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
    from .guards import PatchGuard, PoisonEmpty, live_threads, poison_allocator
    from .interpreter import first_config_autotune
    from ..core.variant import poison_fill
    from ..core.errors import WarpsmithError

    _Tensor, _save, _load, _no_grad = torch.Tensor, torch.save, torch.load, torch.no_grad
    device = torch.device(setup["device"])
    _sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if setup.get("interpret"):
        first_config_autotune()
    context = _load(os.path.join(exchange, "context.pt"), weights_only=False)  # written by the parent
    problem = CheckProblem(name=setup["name"], format=setup["format"], path=setup["reference"], workloads=[],
                           distributions=(), output_names=tuple(setup["output_names"]), draw_inputs=None,
                           run_reference=None, run_oracle=None, seed=setup["seed"], overrides=setup["overrides"],
                           context=context)  # type: ignore[arg-type]
    import io

    _save([torch.zeros(1)], io.BytesIO())  # pickling sets torch.Tensor.__slotnames__ once: before the snapshot
    guard = PatchGuard()
    try:
        cand = load_candidate(setup["candidate"], problem, device=device)
    except CandidateError as e:
        chan.send({"ok": False, "kind": "candidate_error", "error": str(e), "patches": guard.changes()})
        return
    except WarpsmithError as e:
        chan.send({"ok": False, "kind": "invalid_input", "error": str(e), "patches": guard.changes()})
        return
    if setup.get("eval_mode"):
        cand.set_eval()
    chan.send({"ok": True, "nondeterministic": cand.nondeterministic, "destination_passing": cand.destination_passing,
               "patches": guard.changes()})

    retained: list[tuple[Any, ...]] = []  # every call's outputs, re-read on request (late writes)
    held: list[list[Any]] = []  # every call's arguments (to tell an overwrite through shared memory)
    by_id: dict[int, tuple[Any, ...]] = {}
    last: dict[str, Any] = {}

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

    def call(req: dict[str, Any]) -> dict[str, Any]:
        fresh = on_device(_load(os.path.join(exchange, req["inputs"]), weights_only=True))
        if req.get("refill") and last.get("args") is not None:
            args = last["args"]
            for i, (a, b) in enumerate(zip(args, fresh)):
                if isinstance(a, _Tensor):
                    a.data.copy_(b)  # same buffers, same version counter: a (data_ptr, _version) cache is stale
                else:
                    args[i] = b
        else:
            args = fresh
        saved = [snapshot(a) for a in args]
        meta = [identity(a) if isinstance(a, _Tensor) else None for a in args]
        dps = None
        if cand.destination_passing:
            dps = [poison_fill(torch.empty(tuple(s), dtype=getattr(torch, d), device=device))
                   for s, d in req["destinations"]]
        dps_meta = [identity(t) for t in dps] if dps is not None else []
        prev = retained[-1] if retained else ()
        prev_snaps = [snapshot(p) if type(p) is _Tensor and not p.is_meta else None for p in prev]
        poison_allocator(req.get("sizes", []), device)
        before = set(live_threads())
        try:
            if req.get("plain"):  # no mode, grad enabled: nothing of the harness to observe
                result = cand.call(args, dps)
            else:
                with _no_grad(), PoisonEmpty():
                    result = cand.call(args, dps)
        except BaseException as e:  # SystemExit included: the process stays ours
            return {"ok": False, "error": f"the call raised {type(e).__name__}: {e}", "patches": guard.changes()}
        _sync()
        outs = tuple(dps) if dps is not None else as_outputs(result, problem.output_names)
        kinds = [describe_kind(o) for o in outs]
        snaps = plain(outs)
        patches = guard.changes()
        obs: dict[str, list[str]] = {}
        started = [t.name for t in live_threads() if t not in before and t.is_alive()]
        _sleep(req.get("settle_s", 0.05))
        _sync()
        changed = [i for i, (o, s) in enumerate(zip(outs, snaps))
                   if s is not None and not bitwise_equal(snapshot(o).cpu(), s)]
        obs["synchronous"] = ([f"thread(s) {', '.join(started)} started by the call still running after it "
                               "returned"] if started else []) + [f"output {i} changed after the call returned"
                                                                  for i in changed]
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
        earlier = by_id.get(req.get("same_as", -1), ())
        reused_first = [i for i, o in enumerate(tensors)
                        if any(type(p) is _Tensor and not p.is_meta and shares_memory(o, p) for p in earlier)]
        retained.append(outs)
        held.append(list(args))
        by_id[req["id"]] = outs
        last["args"] = args
        name = f"out_{req['id']}.pt"
        _save(snaps, os.path.join(exchange, name))
        return {"ok": True, "outputs": name, "kinds": kinds, "observations": obs, "patches": patches,
                "reuses_first": reused_first}

    def recheck(req: dict[str, Any]) -> dict[str, Any]:
        _sync()
        name = f"recheck_{req['id']}.pt"
        _save([plain(outs) for outs in retained], os.path.join(exchange, name))
        inputs = [t for a in held for t in a if type(t) is _Tensor and not t.is_meta]

        def overwritable(c: int, o: Any) -> bool:  # shares memory with a later output or any input
            others = [t for r in retained[c + 1:] for t in r if type(t) is _Tensor and not t.is_meta] + inputs
            return type(o) is _Tensor and not o.is_meta and any(shares_memory(o, t) for t in others)

        shared = [[overwritable(c, o) for o in outs] for c, outs in enumerate(retained)]
        return {"ok": True, "outputs": name, "shared": shared, "patches": guard.changes()}

    def timed(req: dict[str, Any]) -> dict[str, Any]:
        from .speed import time_in_child

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
    while True:
        req = chan.recv()
        if req is None or req.get("op") == "bye":
            break
        chan.send(handlers[req["op"]](req))
    _exit(0)  # no atexit hook of the candidate's runs: the verdict is the parent's anyway


if __name__ == "__main__":
    main(sys.argv[1:])
