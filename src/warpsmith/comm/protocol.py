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

A wait that does not complete within the timeout raises :class:`CommTimeoutError` naming the ranks
whose flags stayed behind (a peer that died, or one that issues a different collective).
"""
from __future__ import annotations

from typing import NamedTuple

from ..core.errors import WarpsmithError

WAIT_DONE, WRITE, RAISE_READY, WAIT_READY, READ, RAISE_DONE = (
    "wait_done", "write", "raise_ready", "wait_ready", "read", "raise_done")
BUGS = ("no_wait_done", "no_wait_ready", "wait_ready_ahead")


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
    peer: int = -1


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


def program(rank: int, world: int, steps: int, bug: str | None = None) -> list[Op]:
    """Steps 1..``steps`` back to back."""
    return [op for s in range(1, steps + 1) for op in step_program(rank, world, s, bug)]
