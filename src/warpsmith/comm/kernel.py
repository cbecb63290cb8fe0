"""Triton kernels of the collectives over symmetric buffers (only ``@triton.jit`` code).

Every kernel reads the peers through ``table_ptr``: an int64 tensor of ``WORLD`` addresses, entry
``p`` the base of rank ``p``'s symmetric buffer as mapped in the calling process. Sums accumulate
in fp32 whatever the element type; outputs are rounded once (``to_output``: nearest even).
"""
from ..core._triton import tl, triton
from ..ops.lowprec.quant.kernel import amax_term, fp8_value, quantize_values
from ..ops.shared.kernel import dot_acc, round_to_bf16, to_output


@triton.jit
def _peer(table_ptr, p, like_ptr):
    """Rank ``p``'s buffer as a pointer to ``like_ptr``'s element type."""
    return tl.load(table_ptr + p).to(tl.pointer_type(like_ptr.dtype.element_ty))


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    """``dst[i] = src[i]`` for ``i < n``: a rank writes its data into its own symmetric buffer. Each
    program copies chunks of ``BLOCK`` elements, ``program_id``, ``+ num_programs``, ... (any grid).
    Bytes: 2 n elements."""
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=m), mask=m)


@triton.jit
def reduce_kernel(table_ptr, out_ptr, src_offset, n, WORLD: tl.constexpr, BLOCK: tl.constexpr,
                  EMULATE: tl.constexpr):
    """``out[i] = sum_p peer_p[src_offset + i]`` (fp32 sum, peers in rank order) for ``i < n``: the
    one-shot all-reduce (``src_offset = 0``, ``n`` the whole tensor) and the reduce-scatter half of
    the two-shot one (this rank's shard). Chunks of ``BLOCK`` elements strided over the programs (any
    grid). Bytes: (WORLD + 1) n elements; FLOPs: (WORLD - 1) n."""
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for p in tl.static_range(WORLD):
            acc += tl.load(_peer(table_ptr, p, out_ptr) + src_offset + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, to_output(acc, out_ptr, EMULATE), mask=m)


@triton.jit
def gather_kernel(table_ptr, out_ptr, chunk, src_step, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``out[p chunk + i] = peer_p[p src_step + i]`` for ``i < chunk`` and ``p chunk + i < n``; grid
    ``(programs, WORLD)``, each program copying ``BLOCK``-element pieces strided over
    ``programs``. All-gather: ``src_step = 0`` (each rank's data at the start of its buffer); the
    all-gather half of the two-shot all-reduce: ``src_step = chunk`` (each rank's reduced shard in
    place). Bytes: 2 n elements."""
    p = tl.program_id(1)
    base = tl.load(table_ptr + p).to(tl.pointer_type(out_ptr.dtype.element_ty))
    for start in range(tl.program_id(0) * BLOCK, chunk, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = (offs < chunk) & (p * chunk + offs < n)
        tl.store(out_ptr + p * chunk + offs, tl.load(base + p * src_step + offs, mask=m), mask=m)


@triton.jit
def _round(x, like_ptr, EMULATE: tl.constexpr):
    """fp32 ``x`` rounded to ``like_ptr``'s element type (nearest even), held in fp32."""
    if EMULATE:
        return round_to_bf16(x)
    return x.to(like_ptr.dtype.element_ty).to(tl.float32)


@triton.jit
def reduce_add_rms_norm_kernel(table_ptr, res_ptr, w_ptr, y_ptr, s_ptr, ys_ptr, H, eps, WORLD: tl.constexpr,
                               BLOCK_H: tl.constexpr, EMULATE: tl.constexpr, FP8_OUT: tl.constexpr,
                               FP8_EMULATE: tl.constexpr):
    """One row per program: ``a = round(sum_p peer_p[row])`` (the all-reduce, fp32 sum),
    ``s = round(a + residual[row])`` (stored: the new residual), ``y = s rsqrt(mean(s^2) + eps) w``:
    the unfused all-reduce, add and RMSNorm with their roundings, in one pass. ``FP8_OUT``: ``y``
    (fp32) is stored quantized to e4m3 instead (its bytes into ``y_ptr``, uint8) with the row's scale
    ``max|y| / 448`` (1 for an all-zero row) into ``ys_ptr[row]``; ``FP8_EMULATE`` computes the bytes
    exactly under the interpreter (whose fp32 -> fp8 cast is wrong). Bytes: (WORLD + 4) H elements
    per row (fp8 out: (WORLD + 3) H elements + H + 4)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    m = offs < H
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for p in tl.static_range(WORLD):
        acc += tl.load(_peer(table_ptr, p, res_ptr) + row * H + offs, mask=m, other=0.0).to(tl.float32)
    a = _round(acc, res_ptr, EMULATE)
    s = _round(a + tl.load(res_ptr + row * H + offs, mask=m, other=0.0).to(tl.float32), res_ptr, EMULATE)
    tl.store(s_ptr + row * H + offs, to_output(s, s_ptr, EMULATE), mask=m)
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / H + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    y = s * rstd * w
    if FP8_OUT:
        amax = tl.max(tl.where(m, amax_term(y), 0.0), axis=0)
        scale = tl.where(amax > 0, amax / 448.0, 1.0)
        tl.store(y_ptr + row * H + offs, quantize_values(y, scale, "e4m3", FP8_EMULATE), mask=m)
        tl.store(ys_ptr + row, scale)
    else:
        tl.store(y_ptr + row * H + offs, to_output(y, y_ptr, EMULATE), mask=m)


@triton.jit
def quantize_block_kernel(x_ptr, q_ptr, scale_ptr, n, QMAX, QBLOCK: tl.constexpr, FMT: tl.constexpr,
                          EMULATE: tl.constexpr):
    """One block of ``QBLOCK`` elements per program: ``scale = max|x| / QMAX`` (1 for an all-zero
    block), ``q = saturate(round(x / scale))`` (nearest even) into ``q_ptr`` as int8 (``FMT`` "int8",
    QMAX 127) or as e4m3 bytes (uint8; "e4m3", QMAX 448), the scale (fp32) into ``scale_ptr[block]``.
    ``EMULATE``: the fp8 bytes computed exactly under the interpreter. Bytes: n (in) + n (out) +
    4 n / QBLOCK."""
    blk = tl.program_id(0)
    offs = blk * QBLOCK + tl.arange(0, QBLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    amax = tl.max(amax_term(x), axis=0)
    scale = tl.where(amax > 0, amax / QMAX, 1.0)
    tl.store(q_ptr + offs, quantize_values(x, scale, FMT, EMULATE), mask=m)
    tl.store(scale_ptr + blk, scale)


@triton.jit
def dequant_reduce_kernel(table_ptr, out_ptr, n, scale_offset, WORLD: tl.constexpr, QBLOCK: tl.constexpr,
                          FMT: tl.constexpr, EMULATE: tl.constexpr, DECODE: tl.constexpr):
    """``out[i] = sum_p q_p[i] scale_p[i // QBLOCK]`` (fp32), one block per program; each peer's
    buffer holds its values (``FMT`` "int8": int8; "e4m3": the fp8 bytes, decoded bit by bit where
    ``DECODE``, the interpreter's fp8 -> fp32 cast being wrong) at byte 0 and its fp32 scales at
    byte ``scale_offset``. Bytes: WORLD (n + 4 n / QBLOCK) + n elements out."""
    blk = tl.program_id(0)
    offs = blk * QBLOCK + tl.arange(0, QBLOCK)
    m = offs < n
    acc = tl.zeros([QBLOCK], dtype=tl.float32)
    for p in tl.static_range(WORLD):
        base = tl.load(table_ptr + p)
        if FMT == "int8":
            q = tl.load(base.to(tl.pointer_type(tl.int8)) + offs, mask=m, other=0).to(tl.float32)
        elif DECODE:
            q = fp8_value(tl.load(base.to(tl.pointer_type(tl.uint8)) + offs, mask=m, other=0).to(tl.int32), 3, 7, True)
        else:
            q = tl.load(base.to(tl.pointer_type(tl.float8e4nv)) + offs, mask=m, other=0.0).to(tl.float32)
        scale = tl.load((base + scale_offset).to(tl.pointer_type(tl.float32)) + blk)
        acc += q * scale
    tl.store(out_ptr + offs, to_output(acc, out_ptr, EMULATE), mask=m)


@triton.jit
def _wait_flag(flag_ptr, step, max_spins):
    """Poll ``flag_ptr`` (int64, acquire) until it reaches ``step`` or ``max_spins`` polls passed;
    returns whether it reached it."""
    spins = 0
    while (tl.atomic_add(flag_ptr, 0, sem="acquire") < step) & (spins < max_spins):
        spins += 1
    return tl.atomic_add(flag_ptr, 0, sem="acquire") >= step


@triton.jit
def matmul_push_tiles_kernel(x_ptr, w_ptr, table_ptr, flags_table_ptr, M, N, K, stride_xm, stride_wn, rank, step,
                             WORLD: tl.constexpr, MAX_TILES: tl.constexpr, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IS_FP32: tl.constexpr,
                             EMULATE: tl.constexpr):
    """This rank's partial of a row-parallel GEMM, each output tile sent to the rank owning its rows
    as soon as it is computed. Grid ``(cdiv(per, BLOCK_M), cdiv(N, BLOCK_N), WORLD)`` with
    ``per = ceil(M / WORLD)``: program ``(tm, tn, o)`` computes tile ``t = tm cdiv(N, BLOCK_N) + tn``
    of owner ``o``'s rows ``[o per, min(M, (o + 1) per))`` of ``x [M, K] @ w[N, K]^T`` (fp32
    accumulation), stores it (fp32) into ``o``'s buffer, slot ``rank`` (``[per, N]`` at element
    ``rank per N``), then raises ``o``'s tile flag ``[rank, t]`` to ``step`` (a release after a
    barrier: the whole tile is visible before the flag). Bytes: (M + N) K elements read per column
    of tiles, 4 M N written; FLOPs: 2 M N K."""
    tm = tl.program_id(0)
    tn = tl.program_id(1)
    o = tl.program_id(2)
    per = tl.cdiv(M, WORLD)
    lo = tl.minimum(M, o * per)
    rows = tl.minimum(M, lo + per) - lo
    if tm * BLOCK_M < rows:
        offs_m = tm * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tn * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            kk = k + offs_k
            a = tl.load(x_ptr + (lo + offs_m)[:, None] * stride_xm + kk[None, :],
                        mask=(offs_m[:, None] < rows) & (kk[None, :] < K), other=0.0)
            b = tl.load(w_ptr + offs_n[None, :] * stride_wn + kk[:, None],
                        mask=(offs_n[None, :] < N) & (kk[:, None] < K), other=0.0)
            acc = dot_acc(a, b, acc, IS_FP32, "ieee", EMULATE)
        dst = tl.load(table_ptr + o).to(tl.pointer_type(tl.float32)) + rank * per * N
        tl.store(dst + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < rows) & (offs_n[None, :] < N))
        tl.debug_barrier()
        flags = tl.load(flags_table_ptr + o).to(tl.pointer_type(tl.int64))
        tl.atomic_xchg(flags + rank * MAX_TILES + tm * tl.cdiv(N, BLOCK_N) + tn, step, sem="release")


@triton.jit
def reduce_tiles_kernel(buf_ptr, flags_ptr, out_ptr, status_ptr, rows, N, per, step, max_spins,
                        WORLD: tl.constexpr, MAX_TILES: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, EMULATE: tl.constexpr):
    """The owner's side: grid ``(cdiv(rows, BLOCK_M), cdiv(N, BLOCK_N))``, program ``(tm, tn)`` sums
    tile ``t`` of every slot of my buffer (``buf_ptr``: fp32, slot ``p`` the ``[per, N]`` partial
    rank ``p`` pushed) in rank order (fp32; deterministic), each slot read after its flag
    ``flags[p, t]`` reached ``step`` (acquire loads), and stores it rounded once into ``out``
    (``[rows, N]``). A flag still behind after ``max_spins`` polls: ``status[t] = p + 1`` (the host
    raises). Bytes: 4 WORLD rows N read, rows N elements written."""
    tm = tl.program_id(0)
    tn = tl.program_id(1)
    t = tm * tl.cdiv(N, BLOCK_N) + tn
    offs_m = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    m = (offs_m[:, None] < rows) & (offs_n[None, :] < N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    late = 0
    for p in tl.static_range(WORLD):
        arrived = _wait_flag(flags_ptr + p * MAX_TILES + t, step, max_spins)
        late = tl.where((late == 0) & (not arrived), p + 1, late)
        acc += tl.load(buf_ptr + p * per * N + offs_m[:, None] * N + offs_n[None, :], mask=m, other=0.0)
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], to_output(acc, out_ptr, EMULATE), mask=m)
    tl.store(status_ptr + t, late)


@triton.jit
def one_shot_in_kernel(src_ptr, table_ptr, flags_table_ptr, out_ptr, status_ptr, n, rank, step, done_step,
                       max_spins, WORLD: tl.constexpr, MAX_CHUNKS: tl.constexpr, BLOCK: tl.constexpr,
                       EMULATE: tl.constexpr):
    """The one-shot all-reduce with the flag protocol inside the kernel, chunk by chunk. Each rank's
    flags are int64 ``[2, MAX_CHUNKS]`` (row 0 ready, row 1 done), ``flags_table_ptr[p]`` rank
    ``p``'s. Program ``c`` (skipped where ``status[c] == 0``: finished in an earlier launch):
    waits until every peer's done flag ``c`` reached ``done_step`` (acquire polls; 0: the host
    waited), copies chunk ``c`` (``BLOCK`` elements) of ``src`` into this rank's buffer, raises its
    ready flag ``c`` to ``step`` (a barrier, then a release), waits for every peer's ready flag ``c``
    (acquire), sums chunk ``c`` of every peer's buffer in rank order (fp32, one rounding) into
    ``out`` and raises its done flag ``c`` (release). At most ``max_spins`` polls per flag: then
    ``status[c] = p + 1`` for the first peer behind (the host relaunches or raises), else 0.
    Bytes: (WORLD + 2) n elements."""
    c = tl.program_id(0)
    if tl.load(status_ptr + c) != 0:
        offs = c * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        my_flags = tl.load(flags_table_ptr + rank).to(tl.pointer_type(tl.int64))
        late = 0
        for p in tl.static_range(WORLD):
            peer_flags = tl.load(flags_table_ptr + p).to(tl.pointer_type(tl.int64))
            arrived = _wait_flag(peer_flags + MAX_CHUNKS + c, done_step, max_spins)
            late = tl.where((late == 0) & (not arrived), p + 1, late)
        if late == 0:
            mine = tl.load(table_ptr + rank).to(tl.pointer_type(out_ptr.dtype.element_ty))
            tl.store(mine + offs, tl.load(src_ptr + offs, mask=m), mask=m)
            tl.debug_barrier()
            tl.atomic_xchg(my_flags + c, step, sem="release")
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for p in tl.static_range(WORLD):
                peer_flags = tl.load(flags_table_ptr + p).to(tl.pointer_type(tl.int64))
                arrived = _wait_flag(peer_flags + c, step, max_spins)
                late = tl.where((late == 0) & (not arrived), p + 1, late)
                acc += tl.load(_peer(table_ptr, p, out_ptr) + offs, mask=m, other=0.0).to(tl.float32)
            if late == 0:
                tl.store(out_ptr + offs, to_output(acc, out_ptr, EMULATE), mask=m)
                tl.debug_barrier()
                tl.atomic_xchg(my_flags + MAX_CHUNKS + c, step, sem="release")
        tl.store(status_ptr + c, late)
