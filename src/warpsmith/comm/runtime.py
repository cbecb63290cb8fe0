"""The collectives over a :class:`.symmetric.SymmetricWorld`: each is a sequence of protocol steps
(:func:`.protocol.step_program`, executed here op by op), whose ``WRITE`` and ``READ`` are the
Triton kernels of :mod:`.kernel`. Arguments are validated by :mod:`.api`; tensors here are
contiguous, on the CPU, of a supported dtype, and fit the buffer.
"""
from __future__ import annotations

from typing import Callable

import torch

from ..core._triton import INTERPRET, triton
from .kernel import (copy_kernel, dequant_reduce_kernel, gather_kernel, quantize_block_kernel,
                     reduce_add_rms_norm_kernel, reduce_kernel)
from .protocol import (RAISE_DONE, RAISE_READY, READ, WAIT_DONE, WAIT_READY, WRITE, CollectiveMismatchError, CommError,
                       Op, step_program)
from .symmetric import DONE, READY, SymmetricWorld

BLOCK = 1024
# A test's fault injection: called with each protocol operation before it runs (None: no fault).
FAULT: Callable[[SymmetricWorld, Op], None] | None = None


def _emulate(dtype: torch.dtype) -> bool:
    return INTERPRET and dtype == torch.bfloat16


KINDS = ("all_reduce_one_shot", "all_reduce_two_shot", "all_reduce_ring", "all_reduce_int8", "all_gather",
         "reduce_scatter", "all_reduce_add_rms_norm", "all_reduce_fp8", "matmul_reduce_scatter")
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _describe(h: tuple[int, ...]) -> str:
    kind = KINDS[h[0]] if 0 <= h[0] < len(KINDS) else f"kind {h[0]}"
    dtype = _DTYPES[h[2]] if 0 <= h[2] < len(_DTYPES) else f"dtype {h[2]}"
    return f"{kind} of {h[1]} bytes of {dtype}"


def run_step(w: SymmetricWorld, kind: str, x: torch.Tensor, write: Callable[[], None],
             read: Callable[[], None]) -> None:
    """One protocol step: the next step number, :func:`step_program`'s operations in order; the
    header (``kind``, ``x``'s bytes and dtype) goes with the write and is checked with the reads;
    the ``READ`` operations are one kernel launch (``read``) reading every peer. A failure marks the
    world broken."""
    if w.broken is not None:
        raise CommError(f"rank {w.rank}: this world is unusable after an earlier failure: {w.broken}")
    try:
        _step(w, (KINDS.index(kind), x.numel() * x.element_size(), _DTYPES.index(x.dtype)), write, read)
    except CommError as e:
        w.broken = str(e)
        raise


def _step(w: SymmetricWorld, header: tuple[int, int, int], write: Callable[[], None],
          read: Callable[[], None]) -> None:
    w.step += 1
    read_done = False
    for op in step_program(w.rank, w.world, w.step):
        if FAULT is not None:
            FAULT(w, op)
        if op.kind == WAIT_DONE:
            w.wait_flags(DONE, op.step)
        elif op.kind == WRITE:
            write()
            w.write_header(header)
        elif op.kind == RAISE_READY:
            w.raise_flag(READY, op.step)
        elif op.kind == WAIT_READY:
            w.wait_flags(READY, op.step)
        elif op.kind == READ:
            if not read_done:
                if others := w.peers_headers():
                    raise CollectiveMismatchError(w.rank, w.step, _describe(header),
                                                  {p: _describe(h) for p, h in others.items()})
                read()
                read_done = True
        elif op.kind == RAISE_DONE:
            w.raise_flag(DONE, op.step)


def _copy_in(w: SymmetricWorld, src: torch.Tensor, offset: int) -> None:
    n = src.numel()
    if n:
        copy_kernel[(triton.cdiv(n, BLOCK),)](src, w.mine(src.dtype, offset, n), n, BLOCK=BLOCK)


def _reduce(w: SymmetricWorld, out: torch.Tensor, src_offset: int) -> None:
    n = out.numel()
    if n:
        reduce_kernel[(triton.cdiv(n, BLOCK),)](w.table, out, src_offset, n, WORLD=w.world, BLOCK=BLOCK,
                                                 EMULATE=_emulate(out.dtype))


def _gather(w: SymmetricWorld, out: torch.Tensor, chunk: int, src_step: int) -> None:
    if chunk:
        gather_kernel[(triton.cdiv(chunk, BLOCK), w.world)](w.table, out, chunk, src_step, out.numel(),
                                                             WORLD=w.world, BLOCK=BLOCK)


def shard_rows(n_rows: int, world: int, rank: int) -> tuple[int, int]:
    """Rank ``rank``'s rows ``[lo, hi)`` of ``n_rows`` split in ``ceil(n_rows / world)``-row chunks
    (as ``torch.chunk``; the last ranks' shards may be short or empty)."""
    per = -(-n_rows // world)
    lo = min(n_rows, rank * per)
    return lo, min(n_rows, lo + per)


def all_reduce_one_shot(w: SymmetricWorld, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    run_step(w, "all_reduce_one_shot", x, lambda: _copy_in(w, x.view(-1), 0), lambda: _reduce(w, out.view(-1), 0))
    return out


def all_reduce_two_shot(w: SymmetricWorld, x: torch.Tensor) -> torch.Tensor:
    """Step 1: every rank reduces its shard of the flat tensor from every peer; step 2: every rank
    publishes its reduced shard in place and gathers the others'."""
    out, n = torch.empty_like(x), x.numel()
    flat = out.view(-1)
    lo, hi = shard_rows(n, w.world, w.rank)
    shard = -(-n // w.world)
    run_step(w, "all_reduce_two_shot", x, lambda: _copy_in(w, x.view(-1), 0), lambda: _reduce(w, flat[lo:hi], lo))
    run_step(w, "all_reduce_two_shot", x, lambda: _copy_in(w, flat[lo:hi], lo),
             lambda: _gather(w, flat, shard, shard))
    return out


def _ring_table(w: SymmetricWorld, *addresses: int) -> torch.Tensor:
    return torch.tensor(addresses, dtype=torch.int64)


def all_reduce_ring(w: SymmetricWorld, x: torch.Tensor) -> torch.Tensor:
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
        _copy_in(w, flat[lo:hi], lo)

    def add_left(c: int) -> None:
        lo, hi = bounds[c]
        if hi > lo:
            table = _ring_table(w, left + lo * esize, flat[lo:hi].data_ptr())
            reduce_kernel[(triton.cdiv(hi - lo, BLOCK),)](table, flat[lo:hi], 0, hi - lo, WORLD=2, BLOCK=BLOCK,
                                                          EMULATE=_emulate(x.dtype))

    def copy_left(c: int) -> None:
        lo, hi = bounds[c]
        if hi > lo:
            table = _ring_table(w, left + lo * esize)
            gather_kernel[(triton.cdiv(hi - lo, BLOCK), 1)](table, flat[lo:hi], hi - lo, 0, hi - lo, WORLD=1,
                                                            BLOCK=BLOCK)
    for k in range(world - 1):
        run_step(w, "all_reduce_ring", x, lambda k=k: publish((r - k) % world),
                 lambda k=k: add_left((r - k - 1) % world))
    for k in range(world - 1):
        run_step(w, "all_reduce_ring", x, lambda k=k: publish((r + 1 - k) % world),
                 lambda k=k: copy_left((r - k) % world))
    return part


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
