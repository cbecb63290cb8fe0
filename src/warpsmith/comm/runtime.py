"""The collectives over a :class:`.symmetric.SymmetricWorld`: each is a sequence of protocol steps
(:func:`.protocol.step_program`, executed here op by op), whose ``WRITE`` and ``READ`` are the
Triton kernels of :mod:`.kernel`. Arguments are validated by :mod:`.api`; tensors here are
contiguous, on the CPU, of a supported dtype, and fit the buffer.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, NamedTuple

import torch

from ..core._triton import INTERPRET, triton
from ..core.errors import InvalidInputError
from .kernel import (copy_kernel, dequant_reduce_kernel, gather_kernel, matmul_push_tiles_kernel, one_shot_in_kernel,
                     quantize_block_kernel, reduce_add_rms_norm_kernel, reduce_kernel, reduce_tiles_kernel)
from .protocol import (RAISE_DONE, RAISE_READY, RAISE_TILE, READ, READ_TILE, WAIT_DONE, WAIT_READY, WAIT_TILE, WRITE,
                       WRITE_TILE, CollectiveMismatchError, CommError, CommTimeoutError, Op, step_program,
                       tile_step_program)
from .symmetric import DONE, MAX_CHUNKS, MAX_TILES, READY, SymmetricWorld

BLOCK = 1024


class Launch(NamedTuple):
    """How the data-moving kernels of one collective are launched: ``programs`` (None: one per
    chunk) each moving chunks of ``block`` elements, strided over the programs (the knobs the
    alpha-beta model and the tuner choose, :mod:`.family`)."""

    programs: int | None = None
    block: int = BLOCK

    def grid(self, n: int) -> int:
        chunks = max(1, triton.cdiv(n, self.block))
        return chunks if self.programs is None else max(1, min(self.programs, chunks))


DEFAULT = Launch()
# A test's fault injection: called with each protocol operation before it runs (None: no fault).
FAULT: Callable[[SymmetricWorld, Op], None] | None = None
# Held around every kernel launch of a step: a world of threads in one process (local.run_threads)
# sets a lock, as Triton's interpreter runs one kernel at a time; processes need none. Kernels that
# wait on flags inside (matmul_reduce_scatter's, all_reduce_in_kernel's) would hold it while waiting
# for another thread: they run on worlds of processes only.
KERNEL_LOCK: Any = contextlib.nullcontext()


def _emulate(dtype: torch.dtype) -> bool:
    return INTERPRET and dtype == torch.bfloat16


# A kernel that waits on flags has no clock: it polls each flag at most SPIN_BATCH times, reports the
# flags still behind, and the host launches it again until the flags arrive or the timeout (a wall
# clock) passes. SPIN_BATCH is about a quarter second of polls: about 1 ms a poll under the
# interpreter on a shared 2-core CPU (seen), a nominal microsecond on a GPU.
SPIN_BATCH = 250 if INTERPRET else 250_000


KINDS = ("all_reduce_one_shot", "all_reduce_two_shot", "all_reduce_ring", "all_reduce_int8", "all_gather",
         "reduce_scatter", "all_reduce_add_rms_norm", "all_reduce_fp8", "matmul_reduce_scatter")
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _describe(h: tuple[int, ...]) -> str:
    kind = KINDS[h[0]] if 0 <= h[0] < len(KINDS) else f"kind {h[0]}"
    dtype = _DTYPES[h[2]] if 0 <= h[2] < len(_DTYPES) else f"dtype {h[2]}"
    return f"{kind} of {h[1]} bytes of {dtype}"


def run_step(w: SymmetricWorld, kind: str, x: torch.Tensor, write: Callable[[], None],
             read: Callable[[], None], tiles: list[int] | None = None, nbytes: int | None = None) -> None:
    """One protocol step: the next step number, :func:`step_program`'s operations in order; the
    header (``kind``, ``x``'s bytes and dtype) goes with the write and is checked with the reads;
    the ``READ`` operations are one kernel launch (``read``) reading every peer. A failure marks the
    world broken. ``tiles`` (owner ``o``'s tile count at ``o``): a tile step
    (:func:`.protocol.tile_step_program`); ``nbytes``: the header's bytes if not ``x``'s."""
    if w.broken is not None:
        raise CommError(f"rank {w.rank}: this world is unusable after an earlier failure: {w.broken}")
    header = (KINDS.index(kind), x.numel() * x.element_size() if nbytes is None else nbytes, _DTYPES.index(x.dtype))
    try:
        w.step += 1
        ops = (step_program(w.rank, w.world, w.step) if tiles is None
               else tile_step_program(w.rank, w.world, w.step, tiles))
        _run_ops(w, ops, header, write, read)
    except CommError as e:
        w.broken = str(e)
        raise


def _run_ops(w: SymmetricWorld, ops: list[Op], header: tuple[int, int, int], write: Callable[[], None],
             read: Callable[[], None]) -> None:
    """Execute one step's operations: waits and done flags on the host; ``write`` (with the header)
    at the first ``WRITE``/``WRITE_TILE``, the tile kernel raising the ``RAISE_TILE`` flags itself;
    ``read`` at the first ``READ``/``WAIT_TILE`` (one kernel for every read, and in a tile step every
    tile wait), after the header check (a tile step checks it after its kernel: a peer's tile flag
    follows its header)."""
    wrote = read_done = False
    for op in ops:
        if FAULT is not None:
            FAULT(w, op)
        if op.kind == WAIT_DONE:
            w.wait_flags(DONE, op.step)
        elif op.kind in (WRITE, WRITE_TILE):
            if not wrote:
                w.write_header(header)
                with KERNEL_LOCK:
                    write()
                wrote = True
        elif op.kind in (RAISE_TILE, READ_TILE):
            pass  # inside the write and read kernels
        elif op.kind == WAIT_TILE:
            if not read_done:
                with KERNEL_LOCK:
                    read()
                read_done = True
                _check_headers(w, header)
        elif op.kind == RAISE_READY:
            w.raise_flag(READY, op.step)
        elif op.kind == WAIT_READY:
            w.wait_flags(READY, op.step)
        elif op.kind == READ:
            if not read_done:
                _check_headers(w, header)
                with KERNEL_LOCK:
                    read()
                read_done = True
        elif op.kind == RAISE_DONE:
            w.raise_flag(DONE, op.step)


def _check_headers(w: SymmetricWorld, header: tuple[int, int, int]) -> None:
    if others := w.peers_headers():
        raise CollectiveMismatchError(w.rank, w.step, _describe(header), {p: _describe(h) for p, h in others.items()})


def _copy_in(w: SymmetricWorld, src: torch.Tensor, offset: int, launch: Launch = DEFAULT) -> None:
    n = src.numel()
    if n:
        copy_kernel[(launch.grid(n),)](src, w.mine(src.dtype, offset, n), n, BLOCK=launch.block)


def _reduce(w: SymmetricWorld, out: torch.Tensor, src_offset: int, launch: Launch = DEFAULT) -> None:
    n = out.numel()
    if n:
        reduce_kernel[(launch.grid(n),)](w.table, out, src_offset, n, WORLD=w.world, BLOCK=launch.block,
                                         EMULATE=_emulate(out.dtype))


def _gather(w: SymmetricWorld, out: torch.Tensor, chunk: int, src_step: int, launch: Launch = DEFAULT) -> None:
    if chunk:
        gather_kernel[(launch.grid(chunk), w.world)](w.table, out, chunk, src_step, out.numel(), WORLD=w.world,
                                                     BLOCK=launch.block)


def shard_rows(n_rows: int, world: int, rank: int) -> tuple[int, int]:
    """Rank ``rank``'s rows ``[lo, hi)`` of ``n_rows`` split in ``ceil(n_rows / world)``-row chunks
    (as ``torch.chunk``; the last ranks' shards may be short or empty)."""
    per = -(-n_rows // world)
    lo = min(n_rows, rank * per)
    return lo, min(n_rows, lo + per)


def all_reduce_one_shot(w: SymmetricWorld, x: torch.Tensor, launch: Launch = DEFAULT) -> torch.Tensor:
    out = torch.empty_like(x)
    run_step(w, "all_reduce_one_shot", x, lambda: _copy_in(w, x.view(-1), 0, launch),
             lambda: _reduce(w, out.view(-1), 0, launch))
    return out


def all_reduce_two_shot(w: SymmetricWorld, x: torch.Tensor, launch: Launch = DEFAULT) -> torch.Tensor:
    """Step 1: every rank reduces its shard of the flat tensor from every peer; step 2: every rank
    publishes its reduced shard in place and gathers the others'."""
    out, n = torch.empty_like(x), x.numel()
    flat = out.view(-1)
    lo, hi = shard_rows(n, w.world, w.rank)
    shard = -(-n // w.world)
    run_step(w, "all_reduce_two_shot", x, lambda: _copy_in(w, x.view(-1), 0, launch),
             lambda: _reduce(w, flat[lo:hi], lo, launch))
    run_step(w, "all_reduce_two_shot", x, lambda: _copy_in(w, flat[lo:hi], lo, launch),
             lambda: _gather(w, flat, shard, shard, launch))
    return out


def _ring_table(w: SymmetricWorld, *addresses: int) -> torch.Tensor:
    return torch.tensor(addresses, dtype=torch.int64)


def all_reduce_ring(w: SymmetricWorld, x: torch.Tensor, launch: Launch = DEFAULT) -> torch.Tensor:
    """The ring: 2 (W-1) steps, each moving one 1/W chunk from every rank to its right neighbour.
    Reduce-scatter half, step k: publish my partial of chunk (r - k) mod W, add my left neighbour's
    partial of chunk (r - k - 1) mod W to my own (fp32 add, rounded to the dtype: a ring rounds each
    partial sum, as NCCL's and gloo's do). All-gather half, step k: publish my full chunk
    (r + 1 - k) mod W, copy the neighbour's chunk (r - k) mod W. Every step is one protocol step
    (a barrier of all ranks, more than a ring needs)."""
    part, n, world, r = x.clone(), x.numel(), w.world, w.rank
    flat, esize = part.view(-1), x.element_size()
    left = w.buffers[(r - 1) % world].data_ptr()
    bounds = [shard_rows(n, world, c) for c in range(world)]

    def publish(c: int) -> None:
        lo, hi = bounds[c]
        _copy_in(w, flat[lo:hi], lo, launch)

    def add_left(c: int) -> None:
        lo, hi = bounds[c]
        if hi > lo:
            table = _ring_table(w, left + lo * esize, flat[lo:hi].data_ptr())
            reduce_kernel[(launch.grid(hi - lo),)](table, flat[lo:hi], 0, hi - lo, WORLD=2, BLOCK=launch.block,
                                                   EMULATE=_emulate(x.dtype))

    def copy_left(c: int) -> None:
        lo, hi = bounds[c]
        if hi > lo:
            table = _ring_table(w, left + lo * esize)
            gather_kernel[(launch.grid(hi - lo), 1)](table, flat[lo:hi], hi - lo, 0, hi - lo, WORLD=1,
                                                     BLOCK=launch.block)
    for k in range(world - 1):
        run_step(w, "all_reduce_ring", x, lambda k=k: publish((r - k) % world),
                 lambda k=k: add_left((r - k - 1) % world))
    for k in range(world - 1):
        run_step(w, "all_reduce_ring", x, lambda k=k: publish((r + 1 - k) % world),
                 lambda k=k: copy_left((r - k) % world))
    return part


def _relaunch_until(w: SymmetricWorld, launch: Callable[[], None], status: torch.Tensor) -> None:
    """Launch a kernel that polls flags at most SPIN_BATCH times each and reports in ``status``
    (0: done) until it completes or ``w.timeout_s`` passes (the kernel has no clock); a relaunch
    redoes every program, which the callers' protocols allow (no peer moves on before this rank's
    done flag, raised after)."""
    deadline = time.monotonic() + w.timeout_s
    while True:
        launch()
        if not status.any() or time.monotonic() > deadline:
            return


def all_reduce_in_kernel(w: Any, x: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """The one-shot all-reduce with the flag protocol inside its kernel (:func:`.kernel.one_shot_in_kernel`):
    the plain step's operations done per chunk of ``block`` elements, by the chunk's program, with
    acquire polls and release stores; the form a GPU needs (no host round trip). ``w``: a CPU
    :class:`.symmetric.SymmetricWorld` (which also keeps its host counters, so host-waited
    collectives may come before and after: the host waits for the previous step's done flags, the
    kernel for the previous in-kernel step's, and the host raises this step's) or a
    :class:`.cuda.CudaWorld` (``host_flags`` False: the kernel's flags only, no header check). Not
    for a world of threads (its kernel waits while holding the interpreter's lock)."""
    if w.broken is not None:
        raise CommError(f"rank {w.rank}: this world is unusable after an earlier failure: {w.broken}")
    n = x.numel()
    chunks = triton.cdiv(n, block)
    if chunks > MAX_CHUNKS:
        raise InvalidInputError("all_reduce_in_kernel size", f"at most {MAX_CHUNKS} chunks of {block} elements",
                                f"{n} elements")
    header = (KINDS.index("all_reduce_one_shot"), n * x.element_size(), _DTYPES.index(x.dtype))
    out = torch.empty_like(x)
    status = torch.full((max(1, chunks),), -1, dtype=torch.int32, device=x.device)
    try:
        w.step += 1
        done_step = w.step - 1 if w.last_in_kernel == w.step - 1 else 0
        if w.host_flags:
            if w.step > 1:
                w.wait_flags(DONE, w.step - 1)
            w.write_header(header)
        if n:
            _relaunch_until(w, lambda: one_shot_in_kernel[(chunks,)](
                x.view(-1), w.table, w.chunk_table, out.view(-1), status, n, w.rank, w.step, done_step,
                SPIN_BATCH, WORLD=w.world, MAX_CHUNKS=MAX_CHUNKS, BLOCK=block, EMULATE=_emulate(x.dtype)), status)
            if status.any():
                ready = [f.view(2, MAX_CHUNKS)[0, :chunks] for f in w.chunk_flags]
                behind = {p: int(r.min()) for p, r in enumerate(ready) if int(r.min()) < w.step}
                raise CommTimeoutError(w.rank, "chunk ready", w.step, behind, w.timeout_s)
            if w.host_flags:
                _check_headers(w, header)
        w.last_in_kernel = w.step
        if w.host_flags:
            w.raise_flag(READY, w.step)
            w.raise_flag(DONE, w.step)
    except CommError as e:
        w.broken = str(e)
        raise
    return out


ALL_REDUCE = {"one_shot": all_reduce_one_shot, "two_shot": all_reduce_two_shot, "ring": all_reduce_ring}


QBLOCK = 128  # elements per scale of the quantized all-reduce
WIRE = {"int8": ("int8", 127.0), "fp8": ("e4m3", 448.0)}  # quantize= -> (format on the wire, its largest value)


def wire_bytes(n: int) -> int:
    """Buffer bytes of a quantized all-reduce of ``n`` elements: one byte per value, then (16-aligned)
    an fp32 scale per ``QBLOCK`` elements (int8 and fp8 alike)."""
    return scale_offset(n) + 4 * -(-n // QBLOCK)


def scale_offset(n: int) -> int:
    return -(-n // 16) * 16


def all_reduce_quantized(w: SymmetricWorld, x: torch.Tensor, quantize: str) -> torch.Tensor:
    """One-shot all-reduce with 8 bits per value on the wire: each rank writes its input quantized per
    block of ``QBLOCK`` elements (``quantize`` "int8": int8 values, scale max|x| / 127; "fp8": e4m3
    values, scale max|x| / 448; one fp32 scale per block) into its buffer; each rank dequantizes every
    peer's blocks and sums in fp32. Error per element, plus the output's rounding: int8 at most half a
    step per rank, ``sum_p max|x_p, block| / 254``; fp8 at most half an e4m3 ulp per rank,
    ``sum_p (|x_p| / 16 + max|x_p, block| / (448 * 1024))`` (docs/ops/comm.md)."""
    fmt, qmax = WIRE[quantize]
    out, n = torch.empty_like(x), x.numel()
    soff = scale_offset(n)
    nblk = -(-n // QBLOCK)
    mine = w.buffers[w.rank]

    def write() -> None:
        if n:
            quantize_block_kernel[(nblk,)](x.view(-1), mine[:n].view(torch.int8 if fmt == "int8" else torch.uint8),
                                           mine[soff:soff + 4 * nblk].view(torch.float32), n, qmax, QBLOCK=QBLOCK,
                                           FMT=fmt, EMULATE=INTERPRET)

    def read() -> None:
        if n:
            dequant_reduce_kernel[(nblk,)](w.table, out.view(-1), n, soff, WORLD=w.world, QBLOCK=QBLOCK, FMT=fmt,
                                           EMULATE=_emulate(x.dtype), DECODE=INTERPRET)
    run_step(w, f"all_reduce_{quantize}", x, write, read)
    return out


def all_gather(w: SymmetricWorld, x: torch.Tensor) -> torch.Tensor:
    """Concatenation of every rank's ``x`` along dim 0 (rank order)."""
    out = torch.empty((w.world * x.shape[0], *x.shape[1:]), dtype=x.dtype)
    run_step(w, "all_gather", x, lambda: _copy_in(w, x.view(-1), 0), lambda: _gather(w, out.view(-1), x.numel(), 0))
    return out


def reduce_scatter(w: SymmetricWorld, x: torch.Tensor) -> torch.Tensor:
    """This rank's rows (:func:`shard_rows` of dim 0) of the sum over ranks of ``x``."""
    lo, hi = shard_rows(x.shape[0], w.world, w.rank)
    row = x[0].numel() if x.shape[0] else 0
    out = torch.empty((hi - lo, *x.shape[1:]), dtype=x.dtype)
    run_step(w, "reduce_scatter", x, lambda: _copy_in(w, x.view(-1), 0), lambda: _reduce(w, out.view(-1), lo * row))
    return out


def launch_reduce_add_rms_norm(table: torch.Tensor, world: int, residual: torch.Tensor, weight: torch.Tensor,
                               y: torch.Tensor, s: torch.Tensor, eps: float, y_scale: torch.Tensor | None = None) -> None:
    """The fused kernel over the ``world`` buffers ``table`` addresses (each holding [rows, H] of
    ``residual``'s dtype): ``s = round(sum) + residual``, ``y = rms_norm(s) * weight``; with ``y_scale``
    ([rows] fp32), ``y`` is [rows, H] float8_e4m3fn: ``y * y_scale[row]`` approximates the norm's output."""
    rows, h = s.shape
    fp8 = y_scale is not None
    if rows:
        reduce_add_rms_norm_kernel[(rows,)](table, residual, weight, y.view(torch.uint8) if fp8 else y, s,
                                            y_scale if fp8 else s, h, eps, WORLD=world,
                                            BLOCK_H=triton.next_power_of_2(h), EMULATE=_emulate(s.dtype),
                                            FP8_OUT=fp8, FP8_EMULATE=INTERPRET)


def reduce_add_rms_norm_local(peers: list[torch.Tensor], residual: torch.Tensor, weight: torch.Tensor,
                              eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The fused kernel on one device, ``peers`` standing in for the ranks' buffers (contiguous
    [rows, H] tensors of one dtype on one device): the single-device part of benchmarks/comm.py."""
    table = torch.tensor([p.data_ptr() for p in peers], dtype=torch.int64, device=peers[0].device)
    y, s = torch.empty_like(peers[0]), torch.empty_like(peers[0])
    launch_reduce_add_rms_norm(table, len(peers), residual, weight, y, s, eps)
    return y, s


def all_reduce_add_rms_norm(w: SymmetricWorld, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                            eps: float, fp8_out: bool = False) -> tuple[torch.Tensor, ...]:
    """One-shot all-reduce of ``x`` [rows, H] fused with ``s = sum + residual`` and RMSNorm of ``s``
    (one kernel reading every peer): returns ``(y, s)``, or with ``fp8_out`` ``(y_e4m3, y_scale, s)``
    (``y_scale`` [rows] fp32, the row's max|y| / 448)."""
    s = torch.empty_like(x)
    y = torch.empty(x.shape, dtype=torch.float8_e4m3fn) if fp8_out else torch.empty_like(x)
    ys = torch.empty(x.shape[0], dtype=torch.float32) if fp8_out else None
    run_step(w, "all_reduce_add_rms_norm", x, lambda: _copy_in(w, x.view(-1), 0),
             lambda: launch_reduce_add_rms_norm(w.table, w.world, residual, weight, y, s, eps, ys))
    return (y, ys, s) if fp8_out else (y, s)


MM_BLOCK = 16  # BLOCK_M = BLOCK_N = BLOCK_K of the GEMM's tiles


def matmul_tiles(m: int, n: int, world: int) -> list[int]:
    """Output tiles (``MM_BLOCK`` square) of each owner's rows of an ``[m, n]`` result."""
    return [triton.cdiv(hi - lo, MM_BLOCK) * triton.cdiv(n, MM_BLOCK)
            for lo, hi in (shard_rows(m, world, o) for o in range(world))]


def matmul_wire_bytes(m: int, n: int, world: int) -> int:
    """Bytes of each owner's buffer: ``world`` fp32 slots of ``ceil(m / world)`` rows of ``n``."""
    return world * -(-m // world) * n * 4


def matmul_reduce_scatter(w: SymmetricWorld, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """This rank's rows (:func:`shard_rows`) of ``sum_p x_p @ weight_p^T`` (``x`` [M, K_p] and
    ``weight`` [N, K_p] this rank's shards of the reduction dimension: a row-parallel linear): one
    tile step. Every rank's kernel computes its fp32 partial tile by tile and pushes each tile into
    its owner's buffer with a per-tile flag as it finishes; the owner's kernel sums each tile's
    contributions as they arrive, in rank order (fp32, rounded once: deterministic)."""
    (m, k), n = x.shape, weight.shape[0]
    lo, hi = shard_rows(m, w.world, w.rank)
    per, bn = -(-m // w.world), triton.cdiv(n, MM_BLOCK)
    tiles = matmul_tiles(m, n, w.world)
    out = torch.empty((hi - lo, n), dtype=x.dtype)
    status = torch.zeros(max(1, tiles[w.rank]), dtype=torch.int32)

    def push() -> None:
        if m and n:
            matmul_push_tiles_kernel[(triton.cdiv(per, MM_BLOCK), bn, w.world)](
                x, weight, w.table, w.tile_table, m, n, k, x.stride(0), weight.stride(0), w.rank, w.step,
                WORLD=w.world, MAX_TILES=MAX_TILES, BLOCK_M=MM_BLOCK, BLOCK_N=MM_BLOCK, BLOCK_K=MM_BLOCK,
                IS_FP32=x.dtype == torch.float32, EMULATE=INTERPRET)

    def reduce() -> None:
        _relaunch_until(w, lambda: reduce_tiles_kernel[(triton.cdiv(hi - lo, MM_BLOCK), bn)](
            w.buffers[w.rank].view(torch.float32), w.tile_flags[w.rank], out, status, hi - lo, n, per, w.step,
            SPIN_BATCH, WORLD=w.world, MAX_TILES=MAX_TILES, BLOCK_M=MM_BLOCK, BLOCK_N=MM_BLOCK,
            EMULATE=_emulate(x.dtype)), status)
        if status.any():
            flags = w.tile_flags[w.rank][:, :tiles[w.rank]]
            behind = {p: int(flags[p].min()) for p in range(w.world) if int(flags[p].min()) < w.step}
            raise CommTimeoutError(w.rank, "tile", w.step, behind, w.timeout_s)
    run_step(w, "matmul_reduce_scatter", x, push, reduce, tiles=tiles, nbytes=m * n * 4)
    return out
