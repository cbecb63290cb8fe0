"""The flag protocol of the symmetric-buffer collectives: one state machine, written once.

Every rank owns one data buffer (peer-readable) and two monotone counters in the shared signal
buffer: ``ready[rank]`` and ``done[rank]``. A collective is a sequence of *steps* (one-shot
all-reduce, all-gather and reduce-scatter: one step; two-shot all-reduce: two); steps are numbered
1, 2, 3, ... across all collectives of one world, identically on every rank (every rank issues the
same collectives in the same order, as with any collective library). Rank ``r`` runs step ``s`` as:

1. ``WAIT_DONE s-1``: wait until ``done[p] >= s-1`` for every rank ``p`` (no peer still reads my
   buffer for the previous step; skipped for ``s == 1``);
2. ``WRITE s``: write my step-``s`` data into my buffer, and my header (which collective, how many
   bytes, which dtype) into my slot of the signal buffer;
3. ``RAISE_READY s``: ``ready[r] = s`` (a release store after the write);
4. ``WAIT_READY s``: wait until ``ready[p] >= s`` for every ``p`` (every peer's data is written);
5. ``READ s, p`` for every ``p`` (my own buffer too): check that the peer's header equals mine
   (else :class:`CollectiveMismatchError` naming the ranks that issued another collective), read
   its step-``s`` data;
6. ``RAISE_DONE s``: ``done[r] = s``.

:func:`step_program` returns this list of operations; :mod:`.runtime` executes it (waits on the
host, ``WRITE`` and the ``READ`` group as Triton kernels) and :mod:`.modelcheck` enumerates every
interleaving of it. ``bug`` plants a protocol bug for the model checker's own test.

**Tile steps** (:func:`tile_step_program`: the reduce-scatter of a GEMM's output tiles as they
finish) push instead of publishing: rank ``r`` writes its partial of each tile ``t`` of owner ``o``
into ``o``'s buffer (slot ``r``) and raises the per-tile flag ``tile[o][r][t] = s`` after it (a
release); the owner waits for ``tile[o][p][t] >= s`` (an acquire) before reading slot ``p``'s tile
``t``, each tile as soon as its contributions arrived, peers in rank order. Step ``s`` of rank ``r``:

1. ``WAIT_DONE s-1`` (as above: no rank still reads a buffer ``r`` is about to write);
2. for every owner ``o`` and tile ``t`` of ``o``: ``WRITE_TILE s, o, t`` then ``RAISE_TILE s, o, t``;
3. for every tile ``t`` of mine, every peer ``p`` in rank order: ``WAIT_TILE s, p, t``, ``READ_TILE s, p, t``;
4. ``RAISE_DONE s``.

A wait that does not complete within the timeout raises :class:`CommTimeoutError` naming the ranks
whose flags stayed behind (a peer that died, or one that issues a different collective).
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

from ..core.errors import WarpsmithError

WAIT_DONE, WRITE, RAISE_READY, WAIT_READY, READ, RAISE_DONE = (
    "wait_done", "write", "raise_ready", "wait_ready", "read", "raise_done")
WRITE_TILE, RAISE_TILE, WAIT_TILE, READ_TILE = "write_tile", "raise_tile", "wait_tile", "read_tile"
BUGS = ("no_wait_done", "no_wait_ready", "wait_ready_ahead", "no_wait_tile", "tile_flag_before_write")


class CommError(WarpsmithError):
    """A collective over symmetric buffers failed; the world is unusable afterwards (later calls on
    it raise this at once)."""


class CollectiveMismatchError(CommError):
    """Ranks issued different collectives (kind, size or dtype) at the same step."""

    def __init__(self, rank: int, step: int, mine: str, others: dict[int, str]) -> None:
        self.rank, self.step, self.others = rank, step, others
        theirs = "; ".join(f"rank {p} issued {v}" for p, v in sorted(others.items()))
        super().__init__(f"rank {rank}: at step {step} this rank issued {mine}, but {theirs}")


class CommTimeoutError(CommError, TimeoutError):
    """A peer's flag did not reach the awaited step in time."""

    def __init__(self, rank: int, flag: str, step: int, behind: dict[int, int], timeout_s: float) -> None:
        self.rank, self.flag, self.step, self.behind, self.timeout_s = rank, flag, step, behind, timeout_s
        ranks = ", ".join(f"rank {p} (its {flag} flag is at step {v})" for p, v in sorted(behind.items()))
        super().__init__(f"rank {rank}: timed out after {timeout_s:g} s waiting for {flag} flags to reach "
                         f"step {step}: missing {ranks}; a peer died or issued a different collective")


class Op(NamedTuple):
    kind: str
    step: int
    peer: int = -1  # READ: the peer read; tile ops: the owner written to (WRITE/RAISE) or the source (WAIT/READ)
    tile: int = -1


def step_program(rank: int, world: int, step: int, bug: str | None = None) -> list[Op]:
    """Rank ``rank``'s operations for step ``step`` (>= 1), in order (see the module docstring)."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown planted bug {bug!r}")
    ops: list[Op] = []
    if step > 1 and bug != "no_wait_done":
        ops.append(Op(WAIT_DONE, step - 1))
    ops += [Op(WRITE, step), Op(RAISE_READY, step)]
    if bug != "no_wait_ready":
        ops.append(Op(WAIT_READY, step + 1 if bug == "wait_ready_ahead" else step))
    ops += [Op(READ, step, (rank + k) % world) for k in range(world)]
    ops.append(Op(RAISE_DONE, step))
    return ops


def tile_step_program(rank: int, world: int, step: int, tiles: int | Sequence[int],
                      bug: str | None = None) -> list[Op]:
    """Rank ``rank``'s operations for a tile step ``step`` in which owner ``o`` has ``tiles[o]``
    tiles (an int: every owner that many; see the module docstring)."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown planted bug {bug!r}")
    counts = [tiles] * world if isinstance(tiles, int) else list(tiles)
    ops: list[Op] = [Op(WAIT_DONE, step - 1)] if step > 1 and bug != "no_wait_done" else []
    for o in range(world):
        for t in range(counts[o]):
            pair = [Op(WRITE_TILE, step, o, t), Op(RAISE_TILE, step, o, t)]
            ops += pair[::-1] if bug == "tile_flag_before_write" else pair
    for t in range(counts[rank]):
        for p in range(world):
            ops += ([] if bug == "no_wait_tile" else [Op(WAIT_TILE, step, p, t)]) + [Op(READ_TILE, step, p, t)]
    return ops + [Op(RAISE_DONE, step)]


def program(rank: int, world: int, steps: int, bug: str | None = None, kinds: str | None = None,
            tiles: int = 1) -> list[Op]:
    """Steps 1..``steps`` back to back; ``kinds`` (one letter per step, cycled: ``f`` a step of
    :func:`step_program`, ``t`` a tile step of ``tiles`` tiles per owner; default all ``f``)."""
    kinds = kinds or "f"
    return [op for s in range(1, steps + 1)
            for op in (tile_step_program(rank, world, s, tiles, bug) if kinds[(s - 1) % len(kinds)] == "t"
                       else step_program(rank, world, s, bug))]
