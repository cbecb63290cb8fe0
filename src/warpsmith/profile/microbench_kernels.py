"""The calibration microbenchmarks' kernels (``profile/microbench.py`` launches and times them).

- ``copy_kernel``: ``y = x``, one tile per program; the bits one thread moves per access are set by
  ``BLOCK`` against ``num_warps`` (fp32: ``BLOCK = 32 * num_warps * W`` gives ``W * 32``-bit loads and
  stores). Bytes: ``2 * n * 4``; FLOPs: 0.
- ``shared_kernel``: inline PTX; each thread stores one word to shared memory at word
  ``(lane * stride) % 4096`` and then loads it back ``4 * iters`` times, adding the words (so the loads
  stay). ``stride`` 1 touches 32 banks per warp (conflict-free), ``stride`` 2^k maps 2^k lanes to one
  bank. Shared bytes loaded: ``programs * BLOCK * iters * 16``.
- ``mma_kernel``: ``c = iters * (a @ b)``: a ``BLOCK_M x BLOCK_K`` and a ``BLOCK_K x BLOCK_N`` tile
  loaded once, then ``iters`` tensor-core products accumulated (fp32, int32 for int8) from on-chip
  operands. FLOPs: ``programs * iters * 2 * BLOCK_M * BLOCK_N * BLOCK_K``.
- ``empty_kernel``: nothing, for launch latency.
"""
from __future__ import annotations

from ..core._triton import tl, triton
from ..ops.shared.kernel import dot_acc


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """``y[i] = x[i]``; reads and writes ``n`` elements once."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


# $0: the sum (out); $1: the lane; $2: loop passes; $3: the stride in words. 4 loads a pass.
SHARED_PTX = tl.constexpr("""{
.reg .u32 %ws_a, %ws_v, %ws_t, %ws_i;
.reg .pred %ws_p;
.shared .align 16 .b32 ws_smem[4096];
mul.lo.u32 %ws_a, $1, $3;
and.b32 %ws_a, %ws_a, 4095;
shl.b32 %ws_a, %ws_a, 2;
mov.u32 %ws_t, ws_smem;
add.u32 %ws_a, %ws_a, %ws_t;
st.shared.u32 [%ws_a], $1;
bar.sync 0;
mov.u32 %ws_v, 0;
mov.u32 %ws_i, 0;
ws_loop:
ld.volatile.shared.u32 %ws_t, [%ws_a];
add.u32 %ws_v, %ws_v, %ws_t;
ld.volatile.shared.u32 %ws_t, [%ws_a];
add.u32 %ws_v, %ws_v, %ws_t;
ld.volatile.shared.u32 %ws_t, [%ws_a];
add.u32 %ws_v, %ws_v, %ws_t;
ld.volatile.shared.u32 %ws_t, [%ws_a];
add.u32 %ws_v, %ws_v, %ws_t;
add.u32 %ws_i, %ws_i, 1;
setp.lt.u32 %ws_p, %ws_i, $2;
@%ws_p bra ws_loop;
mov.u32 $0, %ws_v;
}""")


@triton.jit
def shared_kernel(out_ptr, iters, stride, BLOCK: tl.constexpr):
    """One element per thread (``BLOCK = 32 * num_warps``): ``out = 4 * iters * x`` where ``x`` is
    the word the thread's shared address holds (its lane where no other lane shares the address)."""
    lane = tl.arange(0, BLOCK)
    n = tl.full([BLOCK], iters, tl.int32)
    s = tl.full([BLOCK], stride, tl.int32)
    v = tl.inline_asm_elementwise(SHARED_PTX, "=r,r,r,r", [lane, n, s], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out_ptr + tl.program_id(0) * BLOCK + lane, v)


@triton.jit
def mma_kernel(a_ptr, b_ptr, c_ptr, iters, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               IS_INT: tl.constexpr, EMULATE: tl.constexpr):
    """``c[pid] = iters * (a @ b)`` accumulated one tensor-core product a pass (row-major tiles)."""
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = tl.load(a_ptr + rm[:, None] * BLOCK_K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BLOCK_N + rn[None, :])
    if IS_INT:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int32)
        for _ in range(iters):
            acc = tl.dot(a, b, acc)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for _ in range(iters):
            acc = dot_acc(a, b, acc, False, "ieee", EMULATE)
    c = c_ptr + tl.program_id(0) * BLOCK_M * BLOCK_N
    tl.store(c + rm[:, None] * BLOCK_N + rn[None, :], acc)


@triton.jit
def empty_kernel(x_ptr):
    """Does nothing (launch latency)."""
    pass
