"""Exhaustive model check of the flag protocol (:mod:`.protocol`): every interleaving of ``world``
ranks each running :func:`.protocol.program` for ``steps`` steps.

The model: each operation of :func:`~.protocol.step_program` is one atomic action under sequential
consistency (a GPU needs release stores for the flags and acquire loads in the waits to give this;
the CPU path runs on x86, whose stores are seen in order). ``READ s, p`` is a separate action per
peer, so the checker covers every order in which one rank's reads interleave with the others'
writes (a kernel reading all peers at once is one of these orders). A wait is enabled only when its
condition holds. The state is every rank's program counter, the ``ready``/``done`` counters, the
per-tile flags, and the step whose data each region of each buffer holds (a buffer has one region
per (source rank, tile): a tile step's ``WRITE_TILE`` fills one, a plain step's ``WRITE`` all of the
writer's buffer, as the runtime's data of every collective starts at the buffer's byte 0).

``kinds`` mixes plain steps (``f``) and tile steps (``t``, :func:`~.protocol.tile_step_program`,
``tiles`` tiles per owner). Inside a tile step the checker fixes one order of a rank's tile writes
(tile programs run in parallel on a GPU); those writes touch disjoint regions and flags and wait for
nothing, so their order does not change which reads they can race with.

Checked in every reachable state:

- **no bad read**: ``READ s, p`` finds every region of peer ``p``'s buffer holding step ``s``'s data,
  ``READ_TILE s, p, t`` finds my region (``p``, ``t``) holding it (not an older step: read before
  write; not a newer one: overwritten before read);
- **no deadlock**: a state where no action is enabled has every rank at the end of its program.

Program counters only grow, so every run is finite: no deadlock means every run ends with every
rank done. The result holds for the bound checked (``world`` ranks, ``steps`` steps), not beyond.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .protocol import (RAISE_DONE, RAISE_READY, RAISE_TILE, READ, READ_TILE, WAIT_DONE, WAIT_READY, WAIT_TILE, WRITE,
                       WRITE_TILE, Op, program)

# pcs, ready, done, version of each buffer region, per-tile flags (regions and flags: owner, source, tile)
State = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass
class CheckResult:
    world: int
    steps: int
    bug: str | None
    kinds: str = "f"
    tiles: int = 1
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
        shape = "" if self.kinds == "f" else f", steps {self.kinds!r} with {self.tiles} tiles per owner"
        return (f"world {self.world}, {self.steps} steps{shape}, bug {self.bug}: {self.states} states explored, "
                f"{verdict}")


def check(world: int, steps: int, bug: str | None = None, max_states: int = 2_000_000, kinds: str = "f",
          tiles: int = 1) -> CheckResult:
    """Enumerate every reachable state breadth first; record each bad read and deadlock (each with
    the rank, the operation, and for the first, the action trace that reaches it). ``kinds`` and
    ``tiles``: :func:`~.protocol.program`'s."""
    progs = [program(r, world, steps, bug, kinds, tiles) for r in range(world)]
    per = world * tiles  # regions (and tile flags) per owner

    def at(owner: int, src: int, tile: int) -> int:
        return owner * per + src * tiles + tile

    def enabled(op: Op, r: int, ready: tuple[int, ...], done: tuple[int, ...], flags: tuple[int, ...]) -> bool:
        if op.kind == WAIT_DONE:
            return min(done) >= op.step
        if op.kind == WAIT_READY:
            return min(ready) >= op.step
        if op.kind == WAIT_TILE:
            return flags[at(r, op.peer, op.tile)] >= op.step
        return True

    zero = (0,) * world
    start: State = (zero, zero, zero, (0,) * (world * per), (0,) * (world * per))
    parent: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    res = CheckResult(world, steps, bug, kinds, tiles)

    def trace_to(state: State, last: str) -> list[str]:
        out = [last]
        while parent[state] is not None:
            state, label = parent[state]  # type: ignore[misc]
            out.append(label)
        return out[::-1]

    while queue:
        state = queue.popleft()
        pcs, ready, done, version, flags = state
        moved = False
        for r in range(world):
            if pcs[r] == len(progs[r]):
                continue
            op = progs[r][pcs[r]]
            if not enabled(op, r, ready, done, flags):
                continue
            moved = True
            label = (f"rank {r}: {op.kind} step {op.step}" + (f" peer {op.peer}" if op.peer >= 0 else "")
                     + (f" tile {op.tile}" if op.tile >= 0 else ""))
            rd, dn, ver, fl = list(ready), list(done), list(version), list(flags)
            seen: list[int] = []  # the versions a read finds
            if op.kind == WRITE:
                ver[r * per:(r + 1) * per] = [op.step] * per
            elif op.kind == WRITE_TILE:
                ver[at(op.peer, r, op.tile)] = op.step
            elif op.kind == RAISE_TILE:
                fl[at(op.peer, r, op.tile)] = op.step
            elif op.kind == RAISE_READY:
                rd[r] = op.step
            elif op.kind == RAISE_DONE:
                dn[r] = op.step
            elif op.kind == READ:
                seen = list(version[op.peer * per:(op.peer + 1) * per])
            elif op.kind == READ_TILE:
                seen = [version[at(r, op.peer, op.tile)]]
            for v in {v for v in seen if v != op.step}:
                what = "read before write" if v < op.step else "overwritten before read"
                res.bad_reads.append(f"{label}: buffer holds step {v} ({what})")
                if not res.trace:
                    res.trace = trace_to(state, label)
            new_pcs = list(pcs)
            new_pcs[r] += 1
            nxt: State = (tuple(new_pcs), tuple(rd), tuple(dn), tuple(ver), tuple(fl))
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
# Tile steps (world, steps, kinds, tiles per owner): mixed with plain steps both ways round, so a
# tile step's pushes into peers' buffers race with the plain steps' reads and writes before and after.
TILE_BOUNDS: tuple[tuple[int, int, str, int], ...] = ((2, 4, "tftt", 2), (3, 3, "tft", 1), (3, 3, "ftt", 1))


def main(argv: list[str] | None = None) -> int:
    """``python -m warpsmith.comm.modelcheck [--world N] [--steps S] [--bug NAME]``: check one bound
    (default: every bound of BOUNDS) and print the verdicts; exit 1 on a violation."""
    import argparse

    from .protocol import BUGS

    p = argparse.ArgumentParser(description="Exhaustive model check of warpsmith.comm's flag protocol.")
    p.add_argument("--world", type=int, default=None, help="ranks (default: every bound of BOUNDS)")
    p.add_argument("--steps", type=int, default=4, help="consecutive protocol steps per rank (default 4)")
    p.add_argument("--bug", choices=BUGS, default=None, help="plant a protocol bug (the checker must find it)")
    p.add_argument("--kinds", default="f", help="step kinds, cycled: f plain, t tile (default f)")
    p.add_argument("--tiles", type=int, default=1, help="tiles per owner in a tile step (default 1)")
    args = p.parse_args(argv)
    bounds = ([(args.world, args.steps, args.kinds, args.tiles)] if args.world else
              [(w, s, "f", 1) for w, s in BOUNDS] + list(TILE_BOUNDS))
    failed = False
    for world, steps, kinds, tiles in bounds:
        res = check(world, steps, args.bug, kinds=kinds, tiles=tiles)
        print(res.summary())
        if not res.ok:
            failed = True
            print("  first violation:", (res.bad_reads or res.deadlocks)[0])
            print("  trace:", " -> ".join(res.trace))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
