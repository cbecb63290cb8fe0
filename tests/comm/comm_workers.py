"""Functions the CPU worlds of tests/comm run on every rank (importable by name in the children)."""
from __future__ import annotations

import os
import time
import warnings

import torch
import torch.distributed as dist

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _inputs(rank: int, shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * seed + rank)
    return torch.randn(shape, generator=g).to(dtype)


def _exact_sum(x: torch.Tensor, world: int) -> torch.Tensor:
    """The fp64 sum of every rank's x (gathered with gloo)."""
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x)
    return torch.stack([p.double() for p in parts]).sum(0)


def _check_sum(ours: torch.Tensor, x: torch.Tensor, world: int, what: str, rows: slice = slice(None),
               rounded_once: bool = True) -> None:
    """``ours`` (rows ``rows`` of the sum over ranks of ``x``) vs gloo's all_reduce and the exact
    sum: 16-bit results are the exact sum rounded once (fp32 accumulation), bitwise; fp32 ones
    within W ulps of sum |x|; both within W ulps of gloo's (which rounds its partial sums)."""
    gloo = x.clone()
    dist.all_reduce(gloo)
    gloo, exact, mag = gloo[rows], _exact_sum(x, world)[rows], _exact_sum(x.abs(), world)[rows]
    assert ours.dtype == x.dtype and ours.shape == exact.shape, (what, ours.dtype, ours.shape, exact.shape)
    ulp = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[x.dtype]  # unit roundoff
    if x.dtype == torch.float32 or not rounded_once:
        assert ((ours.double() - exact).abs() <= world * ulp * mag).all(), what
    else:
        assert torch.equal(ours, exact.to(x.dtype)), (what, (ours.double() - exact).abs().max())
    assert ((ours.double() - gloo.double()).abs() <= 2 * world * ulp * mag).all(), what


def collectives(rank: int, world: int) -> int:
    """Every collective, every dtype, sizes not divisible by the world size; returns the checks run."""
    from warpsmith import comm

    checks = 0
    for dtype in DTYPES:
        for seed, shape in enumerate(((37, 5), (world - 1 if world > 2 else 1,))):
            x = _inputs(rank, shape, dtype, seed)
            for alg in ("one_shot", "two_shot", "ring", None):  # None: the alpha-beta model picks
                _check_sum(comm.all_reduce(x, algorithm=alg), x, world, f"all_reduce {alg} {dtype} {shape}",
                           rounded_once=alg != "ring")
                checks += 1
        x = _inputs(rank, (5, 3), dtype, 7)
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x)
        assert torch.equal(comm.all_gather(x), torch.cat(parts)), f"all_gather {dtype}"
        x = _inputs(rank, (7, 3), dtype, 8)  # 7 rows: uneven for 2, 3, 4 ranks
        ours = comm.reduce_scatter(x)
        per = -(-7 // world)
        lo = min(7, rank * per)
        _check_sum(ours, x, world, f"reduce_scatter {dtype}", slice(lo, min(7, lo + per)))
        checks += 2
    assert comm.fallback_reason() is None
    return checks


def _rms_norm64(s: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    s64 = s.double()
    return s64 * torch.rsqrt(s64.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def fp8_out_ratio(q: torch.Tensor, scale: torch.Tensor, s: torch.Tensor, w: torch.Tensor, eps: float) -> float:
    """The fused kernel's e4m3 output against its contract; returns the worst error / bound. The
    reference: y64 = RMSNorm(s) * w in fp64 from the kernel's own s (checked separately). The kernel's
    fp32 y is within d = (H + 8) u32 of y64 relatively (a sum of H squares, rsqrt, two products);
    quantizing rounds y / scale to e4m3: half an ulp, at most |y| / 16 for a normal and 2^-10 scale for
    a subnormal. So |q scale - y64| <= |y64| (1 + d) / 16 + scale / 1024 + d |y64|, and the scale is
    max|y| / 448 within (d + u32) of max|y64| / 448."""
    y64, h = _rms_norm64(s, w, eps), s.shape[1]
    d = (h + 8) * 2.0 ** -24
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (s.shape[0],), (q.dtype, scale.shape)
    rowmax = y64.abs().amax(1)
    assert ((scale.double() - rowmax / 448).abs() <= (d + 2.0 ** -23) * rowmax / 448).all(), (scale, rowmax / 448)
    err = (q.double() * scale.double()[:, None] - y64).abs()
    bound = y64.abs() * (1 + d) / 16 + scale.double()[:, None] / 1024 + d * y64.abs()
    assert (err <= bound).all(), (err / bound).max()
    return (err / bound).max().item()


def fused(rank: int, world: int) -> tuple[float, float]:
    """all_reduce + residual add + RMSNorm, fused, vs the unfused sequence (gloo all_reduce, add,
    RMSNorm in fp32); returns the largest difference of y in ulps-of-1 of its dtype, and the fp8
    output's worst error / its contract's bound (:func:`fp8_out_ratio`)."""
    from warpsmith import comm

    worst, worst8 = 0.0, 0.0
    for dtype in DTYPES:
        x, res = _inputs(rank, (3, 40), dtype, 1), _inputs(0, (3, 40), dtype, 2)
        w = _inputs(0, (40,), dtype, 3)
        y, s = comm.all_reduce_add_rms_norm(x, res, w, eps=1e-5)
        r = x.clone()
        dist.all_reduce(r)
        s_ref = r + res
        sf = s_ref.float()
        y_ref = (sf * torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()).to(dtype)
        ulp = {torch.float32: 2.0 ** -23, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}[dtype]
        tol = (world - 1 + 1) * ulp  # gloo rounds its partial sums in the dtype; the fused kernel once
        torch.testing.assert_close(s.float(), s_ref.float(), atol=4 * tol, rtol=2 * tol)
        torch.testing.assert_close(y.float(), y_ref.float(), atol=4 * tol, rtol=4 * tol)
        worst = max(worst, ((y.float() - y_ref.float()).abs().max() / ulp).item())
        q, scale, s8 = comm.all_reduce_add_rms_norm(x, res, w, eps=1e-5, quantize_output="fp8")
        assert torch.equal(s8, s), dtype  # the same new residual, bit for bit
        worst8 = max(worst8, fp8_out_ratio(q, scale, s8, w, 1e-5))
    return worst, worst8


def wire_bound(parts: torch.Tensor, fmt: str, dtype: torch.dtype) -> torch.Tensor:
    """Per element, the error contract of the all-reduce with ``fmt`` on the wire, ``parts`` [W, n]
    every rank's input (fp64): per rank and element, int8 half a step, max|x_p, block| / 254; fp8
    (e4m3, scale max / 448) half an ulp, |x_p| / 16 for a normal value and 2^-10 scale for a subnormal;
    plus the output's rounding (unit roundoff of ``dtype`` times |sum|), the fp32 sum's (2^-22 sum |x|)
    and the fp32 scale arithmetic's (a 1e-5 relative slack on the quantization terms)."""
    world, n = parts.shape
    pad = (-n) % 128
    blk = torch.nn.functional.pad(parts.abs(), (0, pad)).reshape(world, -1, 128).amax(-1)  # [W, blocks]
    per_block = blk.repeat_interleave(128, dim=1)[:, :n]
    if fmt == "int8":
        q = (per_block / 254).sum(0)
    else:
        q = (parts.abs() / 16 + per_block / 448 / 1024).sum(0)
    u = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[dtype]
    return q * (1 + 1e-5) + u * parts.sum(0).abs() + 2.0 ** -22 * parts.abs().sum(0) + 1e-30


def quantized(rank: int, world: int) -> dict[str, float]:
    """The int8- and fp8-on-the-wire all-reduces within their error contracts (:func:`wire_bound`),
    every dtype, an outlier in one block; returns the worst error / bound per format."""
    from warpsmith import comm

    worst = {"int8": 0.0, "fp8": 0.0}
    for fmt in worst:
        for dtype in DTYPES:
            x = _inputs(rank, (3, 100), dtype, 11)  # 300 elements: blocks of 128, 128, 44
            x[0, 5] = 40.0 if rank == 0 else x[0, 5]  # an outlier: its block's scale grows, its neighbours' error too
            ours = comm.all_reduce(x, quantize=fmt)
            parts = [torch.empty_like(x) for _ in range(world)]
            dist.all_gather(parts, x)
            flat = torch.stack([p.double().reshape(-1) for p in parts])  # [W, n]
            err = (ours.double().reshape(-1) - flat.sum(0)).abs()
            bound = wire_bound(flat, fmt, dtype)
            assert (err <= bound).all(), (fmt, dtype, (err / bound).max())
            worst[fmt] = max(worst[fmt], (err / bound).max().item())
    return worst


def collectives_and_fused(rank: int, world: int) -> tuple[int, tuple[float, float], dict[str, float]]:
    """The collectives, the fused kernel (plain and fp8 out) and the quantized all-reduces in one
    world (one spawn)."""
    return collectives(rank, world), fused(rank, world), quantized(rank, world)


def fallbacks(rank: int, world: int) -> list[str]:
    """A message past the buffer's capacity, an integer dtype, and a detached group fall back to
    torch.distributed with a reason and one warning each."""
    from warpsmith import comm

    reasons = []
    big = torch.ones(1 << 15)  # 128 KiB > the 64 KiB buffers of run_world
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.equal(comm.all_reduce(big), big * world)
        reasons.append(comm.fallback_reason())
        comm.all_reduce(big)  # same reason: no second warning
        assert torch.equal(comm.all_reduce(torch.arange(3)), torch.arange(3) * world)
        reasons.append(comm.fallback_reason())
        assert torch.equal(comm.all_reduce(torch.ones(3)), torch.full((3,), float(world)))
        assert comm.fallback_reason() is None  # the symmetric path again
    assert len([w for w in caught if "falls back" in str(w.message)]) == 2, [str(w.message) for w in caught]
    comm.detach()
    assert torch.equal(comm.all_gather(torch.ones(2)), torch.ones(2 * world))
    reasons.append(comm.fallback_reason())
    x, res, w = _inputs(rank, (3, 40), torch.float32, 4), _inputs(0, (3, 40), torch.float32, 5), torch.ones(40)
    q, scale, s = comm.all_reduce_add_rms_norm(x, res, w, quantize_output="fp8")  # fallback: PyTorch
    fp8_out_ratio(q, scale, s, w, 1e-6)
    wt = _inputs(0, (5, 40), torch.float32, 6)
    torch.testing.assert_close(comm.matmul_reduce_scatter(x, wt), _gloo_reduce_scatter(x @ wt.T, world, rank))
    comm.attach(capacity=1 << 16)
    return reasons + mismatched(rank, world)


def mismatched(rank: int, world: int) -> list[str]:
    """Rank 1 issues an all_reduce of another size, then an all_gather: every rank raises
    CollectiveMismatchError naming the others, and the world refuses further calls."""
    from warpsmith import comm
    from warpsmith.comm.protocol import CollectiveMismatchError, CommError

    out = []
    try:
        comm.all_reduce(torch.ones(8 if rank == 0 else 6), algorithm="one_shot")
        raise AssertionError("mismatched collectives were not detected")
    except CollectiveMismatchError as e:
        out.append(str(e))
    try:
        comm.all_reduce(torch.ones(8), algorithm="one_shot")
        raise AssertionError("a broken world accepted a collective")
    except CommError as e:
        out.append(str(e))
    return out


def dies_mid_collective(rank: int, world: int) -> tuple[str, float]:
    """The last rank dies after writing its data for step 1, before raising its ready flag; the
    others must raise CommTimeoutError naming it."""
    from warpsmith import comm

    return _last_rank_dies_at("raise_ready", rank, world, lambda: comm.all_reduce(torch.ones(8), algorithm="one_shot"),
                              "the all_reduce")


def _last_rank_dies_at(kind: str, rank: int, world: int, collective, what: str) -> tuple[str, float]:
    """The last rank exits at its first protocol step of ``kind``; the others' CommTimeoutError
    message and how long it took to come."""
    from warpsmith import comm
    from warpsmith.comm import runtime

    if rank == world - 1:
        def fault(_, op):
            if op.kind == kind:
                os._exit(3)
        runtime.FAULT = fault
    t0 = time.monotonic()
    try:
        collective()
    except comm.CommTimeoutError as e:
        return str(e), time.monotonic() - t0
    raise AssertionError(f"{what} completed although a rank died")


dies_mid_collective.may_die = (1, 2, 3)  # the last rank of worlds 2..4
dies_mid_collective.leaves_world_broken = True


def tensor_parallel(rank: int, world: int) -> list[float]:
    """RowParallelLinear (plain and fused with residual + RMSNorm) against the whole nn.Linear, and
    all_reduce_ as a drop-in for dist.all_reduce; returns the largest differences."""
    from warpsmith import comm

    torch.manual_seed(0)  # the same whole layer on every rank
    full = torch.nn.Linear(10, 6)
    x = torch.randn(4, 10)
    want = full(x).detach()
    layer = comm.RowParallelLinear.from_linear(full, rank, world)
    lo = rank * -(-10 // world)
    x_shard = x[:, lo:lo + layer.weight.shape[1]]
    got = layer(x_shard)
    diffs = [(got - want).abs().max().item()]
    nobias = comm.RowParallelLinear.from_linear(torch.nn.Linear(10, 6, bias=False), rank, world)
    torch.manual_seed(1)
    res, nw = torch.randn(4, 6), torch.randn(6)
    y, s = nobias(x_shard, residual=res, norm_weight=nw)
    s_ref = nobias(x_shard) + res
    y_ref = s_ref * torch.rsqrt(s_ref.pow(2).mean(-1, keepdim=True) + 1e-6) * nw
    diffs += [(s - s_ref).abs().max().item(), (y - y_ref).abs().max().item()]
    t = torch.full((5,), float(rank + 1))
    assert comm.all_reduce_(t) is None
    assert torch.equal(t, torch.full((5,), world * (world + 1) / 2)), t
    t = torch.full((3,), float(rank))
    comm.all_reduce_(t, op=dist.ReduceOp.MAX)
    assert torch.equal(t, torch.full((3,), float(world - 1))) and "op=" in comm.fallback_reason()
    return diffs


def _gloo_reduce_scatter(full: torch.Tensor, world: int, rank: int) -> torch.Tensor:
    """``full``'s rank-``rank`` rows (torch.chunk's split) of the sum over ranks, by gloo's
    reduce_scatter (equal chunks: the short ones padded with zero rows)."""
    per = -(-full.shape[0] // world)
    padded = torch.nn.functional.pad(full, (0, 0, 0, per * world - full.shape[0]))
    out = torch.empty_like(padded[:per])
    dist.reduce_scatter(out, list(padded.split(per)))
    lo = min(full.shape[0], rank * per)
    return out[:min(full.shape[0], lo + per) - lo]


def matmul_reduce_scatter(rank: int, world: int, die: bool = False) -> tuple[int, float]:
    """comm.matmul_reduce_scatter (a row-parallel GEMM's output tiles reduce-scattered as they
    finish) against matmul + gloo's reduce_scatter and the fp64 result, every dtype, row counts that
    do not divide by the world (one with empty shards), uneven K shards; bitwise the same on a second
    run. The contract: |ours - exact| <= (K + W) u32 (|x| @ |w|^T) (fp32 dots of K_p terms, then an
    fp32 sum of W partials) + u |exact| (the output's rounding). Returns (checks, worst error / bound).
    With ``die``, the last rank then dies before pushing its tiles: the others must raise
    CommTimeoutError naming it (returned as the second value instead)."""
    from warpsmith import comm
    from warpsmith.comm import runtime

    checks, worst = 0, 0.0
    k_total = 3 * world + 2
    k_lo = [min(k_total, p * 3 + min(p, 2)) for p in range(world + 1)]  # uneven K shards
    for dtype in DTYPES:
        for m, n in ((37, 19), (world - 1 if world > 2 else 1, 5)):
            g = torch.Generator().manual_seed(m * 100 + n)
            x_full = torch.randn(m, k_total, generator=g).to(dtype)
            w_full = torch.randn(n, k_total, generator=g).to(dtype)
            ks = slice(k_lo[rank], k_lo[rank + 1])
            x, w = x_full[:, ks].contiguous(), w_full[:, ks].contiguous()
            ours = comm.matmul_reduce_scatter(x, w)
            assert torch.equal(ours, comm.matmul_reduce_scatter(x, w)), "not deterministic"
            gloo = _gloo_reduce_scatter((x.float() @ w.float().T).to(dtype), world, rank)
            lo, hi = runtime.shard_rows(m, world, rank)
            exact = (x_full.double() @ w_full.double().T)[lo:hi]
            mag = (x_full.double().abs() @ w_full.double().abs().T)[lo:hi]
            u = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[dtype]
            bound = (k_total + world) * 2.0 ** -24 * mag + u * exact.abs() + 1e-30
            assert ours.shape == gloo.shape == exact.shape and ours.dtype == dtype, (ours.shape, gloo.shape)
            err = (ours.double() - exact).abs()
            assert (err <= bound).all(), (dtype, m, n, (err / bound).max())
            # gloo rounds each rank's partial to the dtype and its partial sums: within W + 1 roundings
            assert ((ours.double() - gloo.double()).abs() <= (world + 2) * (u * mag + bound)).all(), (dtype, m, n)
            worst = max(worst, (err / bound).max().item() if err.numel() else 0.0)
            checks += 1
    assert comm.fallback_reason() is None
    if die:
        return checks, _last_rank_dies_at("write_tile", rank, world, lambda: comm.matmul_reduce_scatter(x, w),
                                          "matmul_reduce_scatter")
    return checks, worst


def matmul_reduce_scatter_then_die(rank: int, world: int) -> tuple[int, tuple[str, float]]:
    return matmul_reduce_scatter(rank, world, die=True)


matmul_reduce_scatter_then_die.may_die = (2,)
matmul_reduce_scatter_then_die.leaves_world_broken = True


def in_kernel(rank: int, world: int) -> int:
    """runtime.all_reduce_in_kernel (the one-shot all-reduce running the flag protocol per chunk
    inside its kernel) against gloo and the exact sum, every dtype, uneven chunk counts; twice in a
    row (the second waits in the kernel for the first's done flags) then a plain host-waited
    collective on the same buffers; returns the checks run."""
    from warpsmith import comm
    from warpsmith.comm import api, runtime
    from warpsmith.comm.symmetric import MAX_CHUNKS

    w = api._WORLDS[dist.group.WORLD]
    checks = 0
    for dtype in DTYPES:
        for shape in ((37, 5), (1,)):
            x = _inputs(rank, shape, dtype, 21)
            for _ in range(2):
                _check_sum(runtime.all_reduce_in_kernel(w, x, block=64), x, world, f"in-kernel {dtype} {shape}")
            flags = w.chunk_flags[rank].view(2, MAX_CHUNKS)[:, 0].tolist()
            assert flags == [w.step, w.step], (flags, w.step)  # chunk 0: written and read at this step
            _check_sum(comm.all_reduce(x, algorithm="two_shot"), x, world, f"two_shot after in-kernel {dtype}")
            checks += 3
    return checks
