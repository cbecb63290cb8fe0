"""Symmetric buffers on the CPU: every rank of a process group maps every rank's buffer.

Each rank owns one data buffer file ``buf<rank>`` of ``capacity`` bytes, and rank 0 creates the
signal file ``signal``: int64 ``[5, world]``, row 0 the ``ready`` counters, row 1 the ``done``
counters of :mod:`.protocol`, rows 2-4 each rank's header of its current collective (kind, bytes,
dtype). Each rank also owns a tile-flag file ``tiles<rank>``: int64 ``[world, MAX_TILES]``, entry
``[src, t]`` the last step in which rank ``src`` pushed its partial of tile ``t`` into this rank's
buffer (the tile steps of :mod:`.protocol`); its peers write it, from inside a kernel. And a
chunk-flag file ``chunks<rank>``: int64 ``[2, MAX_CHUNKS]``, entry ``[0, c]`` the last step in which
this rank wrote its chunk ``c``, ``[1, c]`` the last in which it finished reading every peer's
(the in-kernel waits of ``runtime.all_reduce_in_kernel``); it writes them, its peers read them,
from inside kernels. The files live in one folder (under ``/dev/shm`` by default, so the
pages are shared memory); every process maps them all with ``numpy.memmap`` and hands the Triton
kernels the addresses of its own mappings (``table``). Flags are read and written on the host:
under Triton's interpreter a kernel cannot wait on another process's stores, so the waits of the
protocol run between kernel launches (:mod:`.runtime`).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from ..core.errors import InvalidInputError
from .protocol import CommTimeoutError

READY, DONE = 0, 1
MAX_TILES = 1024  # output tiles per owner in one tile step (the tile-flag file's columns)
MAX_CHUNKS = 4096  # chunks of one in-kernel-flag collective (the chunk-flag file's length)
HEADER = slice(2, 5)  # kind, bytes, dtype of the rank's current collective
ROWS = 5


class SymmetricWorld:
    """The calling rank's view of the shared buffers of a ``world``-rank group (see the module)."""

    def __init__(self, folder: str | Path, rank: int, world: int, capacity: int, timeout_s: float = 60.0,
                 topology: str = "nvlink") -> None:
        if not (isinstance(world, int) and world >= 1 and isinstance(rank, int) and 0 <= rank < world):
            raise InvalidInputError("rank and world", "ints with 0 <= rank < world", (rank, world))
        if not (isinstance(capacity, int) and capacity > 0 and capacity % 16 == 0):
            raise InvalidInputError("capacity", "bytes: a positive multiple of 16", capacity)
        self.folder, self.rank, self.world, self.capacity = Path(folder), rank, world, capacity
        self.timeout_s, self.topology = float(timeout_s), topology
        self.step = 0  # the last protocol step this rank started
        self.broken: str | None = None  # why the world is unusable (an earlier failure), else None
        self._maps: list[np.memmap] = []
        self.buffers: list[torch.Tensor] = []
        self.signal: np.ndarray | None = None
        self.table: torch.Tensor | None = None
        self.tile_flags: list[torch.Tensor] = []  # every rank's tile flags, int64 [world, MAX_TILES]
        self.tile_table: torch.Tensor | None = None  # their addresses
        self.chunk_flags: list[torch.Tensor] = []  # every rank's chunk flags, int64 [2, MAX_CHUNKS]
        self.host_flags = True  # ready/done counters and headers in host memory (signal); False: CUDA
        self.last_in_kernel = 0  # the last step run by all_reduce_in_kernel
        self.chunk_table: torch.Tensor | None = None  # their addresses

    # -- setup: create own files, then (after every rank created its own) map them all ----------------
    def create(self) -> "SymmetricWorld":
        np.memmap(self.folder / f"buf{self.rank}", dtype=np.uint8, mode="w+", shape=(self.capacity,)).flush()
        np.memmap(self.folder / f"tiles{self.rank}", dtype=np.int64, mode="w+", shape=(self.world, MAX_TILES)).flush()
        np.memmap(self.folder / f"chunks{self.rank}", dtype=np.int64, mode="w+", shape=(2, MAX_CHUNKS)).flush()
        if self.rank == 0:
            np.memmap(self.folder / "signal", dtype=np.int64, mode="w+", shape=(ROWS, self.world)).flush()
        return self

    def map(self) -> "SymmetricWorld":
        self._maps = [np.memmap(self.folder / f"buf{p}", dtype=np.uint8, mode="r+", shape=(self.capacity,))
                      for p in range(self.world)]
        self.buffers = [torch.from_numpy(m) for m in self._maps]
        self.signal = np.memmap(self.folder / "signal", dtype=np.int64, mode="r+", shape=(ROWS, self.world))
        self.table = torch.tensor([b.data_ptr() for b in self.buffers], dtype=torch.int64)
        self._maps += [np.memmap(self.folder / f"tiles{p}", dtype=np.int64, mode="r+", shape=(self.world, MAX_TILES))
                       for p in range(self.world)]
        self.tile_flags = [torch.from_numpy(m) for m in self._maps[self.world:]]
        self.tile_table = torch.tensor([f.data_ptr() for f in self.tile_flags], dtype=torch.int64)
        chunk_maps = [np.memmap(self.folder / f"chunks{p}", dtype=np.int64, mode="r+", shape=(2, MAX_CHUNKS))
                      for p in range(self.world)]
        self._maps += chunk_maps
        self.chunk_flags = [torch.from_numpy(m) for m in chunk_maps]
        self.chunk_table = torch.tensor([f.data_ptr() for f in self.chunk_flags], dtype=torch.int64)
        return self

    def mine(self, dtype: torch.dtype, offset: int, n: int) -> torch.Tensor:
        """``n`` elements of ``dtype`` of my own buffer, starting at element ``offset``."""
        return self.buffers[self.rank].view(dtype)[offset:offset + n]

    def close(self, remove: bool = False) -> None:
        self.buffers, self.table, self.signal, self._maps = [], None, None, []
        self.tile_flags, self.tile_table, self.chunk_flags, self.chunk_table = [], None, [], None
        if remove:
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- flags -----------------------------------------------------------------------------------
    def raise_flag(self, which: int, step: int) -> None:
        assert self.signal is not None
        self.signal[which, self.rank] = step  # one aligned 8-byte store: seen whole by the peers

    def write_header(self, header: tuple[int, int, int]) -> None:
        assert self.signal is not None
        self.signal[HEADER, self.rank] = header

    def peers_headers(self) -> dict[int, tuple[int, ...]]:
        """The ranks whose header differs from mine, with theirs."""
        assert self.signal is not None
        hdr = self.signal[HEADER]
        mine = tuple(int(v) for v in hdr[:, self.rank])
        theirs = {p: tuple(int(v) for v in hdr[:, p]) for p in range(self.world)}
        return {p: h for p, h in theirs.items() if h != mine}

    def wait_flags(self, which: int, step: int) -> None:
        """Wait until every rank's ``which`` counter is ``>= step``; poll with a growing sleep
        (up to 1 ms); raise :class:`CommTimeoutError` naming the ranks behind after ``timeout_s``."""
        assert self.signal is not None
        row, deadline, pause = self.signal[which], time.monotonic() + self.timeout_s, 1e-6
        while True:
            if int(row.min()) >= step:
                return
            if time.monotonic() > deadline:
                behind = {p: int(row[p]) for p in range(self.world) if int(row[p]) < step}
                raise CommTimeoutError(self.rank, ("ready", "done")[which], step, behind, self.timeout_s)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)


def new_folder(base: str | None = None) -> Path:
    """A fresh folder for one world's files, in ``/dev/shm`` where it exists."""
    if base is None and os.path.isdir("/dev/shm"):
        base = "/dev/shm"
    return Path(tempfile.mkdtemp(prefix="warpsmith-comm-", dir=base))
