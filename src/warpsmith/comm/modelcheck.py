"""Exhaustive model check of the flag protocol (:mod:`.protocol`): every interleaving of ``world``
ranks each running :func:`.protocol.program` for ``steps`` steps.

The model: each operation of :func:`~.protocol.step_program` is one atomic action under sequential
consistency (a GPU needs release stores for the flags and acquire loads in the waits to give this;
the CPU path runs on x86, whose stores are seen in order). ``READ s, p`` is a separate action per
peer, so the checker covers every order in which one rank's reads interleave with the others'
writes (a kernel reading all peers at once is one of these orders). A wait is enabled only when its
condition holds. The state is every rank's program counter, the ``ready``/``done`` counters and the
step whose data each buffer holds.

Checked in every reachable state:

- **no bad read**: ``READ s, p`` finds peer ``p``'s buffer holding step ``s``'s data (not an older
  step: read before write; not a newer one: overwritten before read);
- **no deadlock**: a state where no action is enabled has every rank at the end of its program.

Program counters only grow, so every run is finite: no deadlock means every run ends with every
rank done. The result holds for the bound checked (``world`` ranks, ``steps`` steps), not beyond.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .protocol import RAISE_DONE, RAISE_READY, READ, WAIT_DONE, WAIT_READY, WRITE, Op, program

State = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # pcs, ready, done, version


@dataclass
class CheckResult:
    world: int
    steps: int
    bug: str | None
    states: int = 0
    bad_reads: list[str] = field(default_factory=list)
    deadlocks: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)  # the shortest path to the first violation

    @property
    def ok(self) -> bool:
        return not self.bad_reads and not self.deadlocks

    def summary(self) -> str:
        verdict = "no deadlock, no bad read" if self.ok else (
            f"{len(self.bad_reads)} bad reads, {len(self.deadlocks)} deadlocks")
        return (f"world {self.world}, {self.steps} steps, bug {self.bug}: {self.states} states explored, "
                f"{verdict}")


def _enabled(op: Op, ready: tuple[int, ...], done: tuple[int, ...]) -> bool:
    if op.kind == WAIT_DONE:
        return min(done) >= op.step
    if op.kind == WAIT_READY:
        return min(ready) >= op.step
    return True


def check(world: int, steps: int, bug: str | None = None, max_states: int = 2_000_000) -> CheckResult:
    """Enumerate every reachable state breadth first; record each bad read and deadlock (each with
    the rank, the operation, and for the first, the action trace that reaches it)."""
    progs = [program(r, world, steps, bug) for r in range(world)]
    zero = (0,) * world
    start: State = (zero, zero, zero, zero)
    parent: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    res = CheckResult(world, steps, bug)

    def trace_to(state: State, last: str) -> list[str]:
        out = [last]
        while parent[state] is not None:
            state, label = parent[state]  # type: ignore[misc]
            out.append(label)
        return out[::-1]

    while queue:
        state = queue.popleft()
        pcs, ready, done, version = state
        moved = False
        for r in range(world):
            if pcs[r] == len(progs[r]):
                continue
            op = progs[r][pcs[r]]
            if not _enabled(op, ready, done):
                continue
            moved = True
            label = f"rank {r}: {op.kind} step {op.step}" + (f" peer {op.peer}" if op.peer >= 0 else "")
            rd, dn, ver = list(ready), list(done), list(version)
            if op.kind == WRITE:
                ver[r] = op.step
            elif op.kind == RAISE_READY:
                rd[r] = op.step
            elif op.kind == RAISE_DONE:
                dn[r] = op.step
            elif op.kind == READ and version[op.peer] != op.step:
                what = "read before write" if version[op.peer] < op.step else "overwritten before read"
                res.bad_reads.append(f"{label}: buffer holds step {version[op.peer]} ({what})")
                if not res.trace:
                    res.trace = trace_to(state, label)
            new_pcs = list(pcs)
            new_pcs[r] += 1
            nxt: State = (tuple(new_pcs), tuple(rd), tuple(dn), tuple(ver))
            if nxt not in parent:
                parent[nxt] = (state, label)
                queue.append(nxt)
                if len(parent) > max_states:
                    raise RuntimeError(f"model check exceeded {max_states} states")
        if not moved and any(pcs[r] < len(progs[r]) for r in range(world)):
            stuck = ", ".join(f"rank {r} at {progs[r][pcs[r]].kind} step {progs[r][pcs[r]].step}"
                              for r in range(world) if pcs[r] < len(progs[r]))
            res.deadlocks.append(f"deadlock: {stuck}")
            if not res.trace:
                res.trace = trace_to(state, "deadlock")
    res.states = len(parent)
    return res


# The bound the protocol is checked to (tests/comm/test_modelcheck.py): worlds 1 to 4 with 12
# consecutive steps (two back-to-back ring all-reduces on 4 ranks, 2 (W-1) = 6 steps each; six
# two-shot ones), world 5 with 8 (one ring all-reduce on 5 ranks, or four two-shot ones); world 5
# explores 269,540 states in under 3 s.
BOUNDS: tuple[tuple[int, int], ...] = ((1, 12), (2, 12), (3, 12), (4, 12), (5, 8))


def main(argv: list[str] | None = None) -> int:
    """``python -m warpsmith.comm.modelcheck [--world N] [--steps S] [--bug NAME]``: check one bound
    (default: every bound of BOUNDS) and print the verdicts; exit 1 on a violation."""
    import argparse

    from .protocol import BUGS

    p = argparse.ArgumentParser(description="Exhaustive model check of warpsmith.comm's flag protocol.")
    p.add_argument("--world", type=int, default=None, help="ranks (default: every bound of BOUNDS)")
    p.add_argument("--steps", type=int, default=4, help="consecutive protocol steps per rank (default 4)")
    p.add_argument("--bug", choices=BUGS, default=None, help="plant a protocol bug (the checker must find it)")
    args = p.parse_args(argv)
    bounds = [(args.world, args.steps)] if args.world else list(BOUNDS)
    failed = False
    for world, steps in bounds:
        res = check(world, steps, args.bug)
        print(res.summary())
        if not res.ok:
            failed = True
            print("  first violation:", (res.bad_reads or res.deadlocks)[0])
            print("  trace:", " -> ".join(res.trace))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
