"""Collectives benchmark, nccl-tests style: per collective and message size, the time, the
algorithm bandwidth (algbw = bytes / time) and the bus bandwidth (busbw = algbw x 2 (W-1)/W for
all_reduce, x (W-1)/W for all_gather and reduce_scatter), warpsmith.comm side by side with
torch.distributed, and the alpha-beta model's prediction for the named topology.

On a multi-GPU machine (NCCL), one process per GPU:

    torchrun --nproc-per-node 8 benchmarks/comm.py --out results/

warpsmith.comm has no CUDA symmetric-memory path yet: on GPUs its column is torch.distributed
reached through warpsmith's fallback, and the JSON says so (``warpsmith_path``). Bandwidth is
claimed only from such a multi-GPU run.

On one GPU, the single-device part: the fused all-reduce + residual add + RMSNorm kernel over
``peers`` buffers on that GPU (standing in for the ranks') against the unfused sequence:

    python benchmarks/comm.py --single-device --out results/

``--dry-run``: a CPU world of ``--world`` processes (gloo, shared-memory symmetric buffers, the
Triton kernels under the interpreter), tiny sizes: it checks the script and both paths end to
end; its times are the interpreter's, not bandwidth.

Writes ``comm_<date>.json`` in ``--out`` (rank 0) and prints the table.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from bench_common import say, write_json  # noqa: E402  (makes src/ importable)

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
SIZES = tuple(1 << k for k in range(10, 31, 2))  # 1 KiB .. 1 GiB per rank (bytes of the full tensor)
DRY_SIZES = (256, 4096)
# the single-device part: (peers, rows, H) of the fused all-reduce + residual add + RMSNorm
FUSED_CASES = ((2, 1, 4096), (4, 16, 4096), (8, 16, 8192), (8, 256, 8192), (8, 2048, 8192))
DRY_FUSED_CASES = ((2, 3, 40), (4, 2, 65))


def bus_factor(collective: str, world: int) -> float:
    return (2 if collective == "all_reduce" else 1) * (world - 1) / world


def _ops(collective: str, world: int) -> tuple[Any, Any]:
    """(warpsmith's call, torch.distributed's call) on a tensor of the collective's full size."""
    import torch
    import torch.distributed as dist

    from warpsmith import comm

    if collective == "all_reduce":
        def ref(t):
            out = t.clone()
            dist.all_reduce(out)
            return out
        return comm.all_reduce, ref
    if collective == "all_gather":
        def ws_ag(t):
            return comm.all_gather(t[: t.numel() // world])

        def ref_ag(t):
            out = torch.empty_like(t[: (t.numel() // world) * world])
            with warnings.catch_warnings():  # torch 2.13 calls it deprecated; NCCL's direct form still
                warnings.simplefilter("ignore", FutureWarning)
                dist.all_gather_into_tensor(out, t[: t.numel() // world].contiguous())
            return out
        return ws_ag, ref_ag

    def ref_rs(t):
        if dist.get_backend() == "gloo":  # gloo has no reduce_scatter_tensor: all_reduce, keep this rank's chunk
            out = t.clone()
            dist.all_reduce(out)
            return out.chunk(world)[dist.get_rank()]
        shard = torch.empty(t.numel() // world, dtype=t.dtype, device=t.device)
        dist.reduce_scatter_tensor(shard, t[: shard.numel() * world].contiguous())
        return shard
    return comm.reduce_scatter, ref_rs


def _time(fn, t, iters: int, warmup: int) -> float:
    """Seconds per call (mean over ``iters`` after ``warmup``; ranks aligned by a barrier)."""
    import torch
    import torch.distributed as dist

    def sync():
        if t.is_cuda:
            torch.cuda.synchronize()
    for _ in range(warmup):
        fn(t)
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(t)
    sync()
    dist.barrier()
    return (time.perf_counter() - t0) / iters


def measure(rank: int, world: int, collectives: tuple[str, ...], sizes: tuple[int, ...], dtype_name: str,
            iters: int, warmup: int, topology: str) -> list[dict[str, Any]]:
    """Every (collective, size) row on this rank's process group (rank 0's timings)."""
    import torch

    from warpsmith import comm
    from warpsmith.cost import comm_model

    dtype = getattr(torch, dtype_name)
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    esize = torch.tensor([], dtype=dtype).element_size()
    rows = []
    for coll in collectives:
        ws, ref = _ops(coll, world)
        for size in sizes:
            n = max(world, size // esize)
            t = torch.randn(n, device=device).to(dtype)
            ws_s = _time(ws, t, iters, warmup)
            reason = comm.fallback_reason()
            ref_s = _time(ref, t, iters, warmup)
            nbytes = n * esize
            algs = comm_model.available(coll, world, topology)
            pred = min(comm_model.predict_s(coll, a, nbytes, world, topology) for a in algs)
            row = {"collective": coll, "bytes": nbytes, "dtype": dtype_name, "world": world,
                   "warpsmith_us": ws_s * 1e6, "torch_us": ref_s * 1e6,
                   "warpsmith_algbw_GBps": nbytes / ws_s / 1e9, "torch_algbw_GBps": nbytes / ref_s / 1e9,
                   "warpsmith_busbw_GBps": nbytes / ws_s / 1e9 * bus_factor(coll, world),
                   "torch_busbw_GBps": nbytes / ref_s / 1e9 * bus_factor(coll, world),
                   "warpsmith_path": f"torch.distributed fallback: {reason}" if reason else "symmetric buffers",
                   "predicted_us": pred * 1e6, "predicted_algorithm": comm_model.best(coll, nbytes, world, topology),
                   "predicted_for": topology}
            rows.append(row)
    return rows


def _unfused(peers, residual, weight, eps):
    """The unfused sequence: the all-reduce's result (fp32 sum, rounded once), the add, RMSNorm."""
    import torch

    s = torch.stack(peers).float().sum(0).to(residual.dtype) + residual
    sf = s.float()
    return (sf * torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(residual.dtype), s


def single_device(cases, dtype_name: str, iters: int, warmup: int) -> list[dict[str, Any]]:
    """The fused kernel (``peers`` buffers on this one device standing in for the ranks') against the
    unfused sequence in PyTorch: agreement and time. Bytes: the fused kernel's minimum traffic."""
    import torch

    from warpsmith.comm.runtime import reduce_add_rms_norm_local

    dtype = getattr(torch, dtype_name)
    dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    rows_out = []
    for peers, rows, h in cases:
        g = torch.Generator(device="cpu").manual_seed(peers * 7919 + rows)
        bufs = [torch.randn(rows, h, generator=g).to(dtype).to(dev) for _ in range(peers)]
        res, w = torch.randn(rows, h, generator=g).to(dtype).to(dev), torch.randn(h, generator=g).to(dtype).to(dev)
        y, s = reduce_add_rms_norm_local(bufs, res, w, 1e-6)
        y_ref, s_ref = _unfused(bufs, res, w, 1e-6)
        times = {}
        for name, fn in (("fused", lambda: reduce_add_rms_norm_local(bufs, res, w, 1e-6)),
                         ("unfused", lambda: _unfused(bufs, res, w, 1e-6))):
            for _ in range(warmup):
                fn()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            times[name] = (time.perf_counter() - t0) / iters
        nbytes = (peers + 3) * rows * h * bufs[0].element_size() + h * w.element_size()
        rows_out.append({"peers": peers, "rows": rows, "H": h, "dtype": dtype_name, "device": str(dev),
                         "fused_us": times["fused"] * 1e6, "unfused_us": times["unfused"] * 1e6,
                         "speedup": times["unfused"] / times["fused"], "fused_GBps": nbytes / times["fused"] / 1e9,
                         "max_abs_diff_y": (y.float() - y_ref.float()).abs().max().item(),
                         "max_abs_diff_s": (s.float() - s_ref.float()).abs().max().item()})
    return rows_out


def print_single(rows: list[dict[str, Any]]) -> None:
    say(f"{'peers':>5} {'rows':>6} {'H':>6} {'fused us':>10} {'unfused us':>11} {'speedup':>8} {'GB/s':>8} "
        f"{'|dy|max':>9} {'|ds|max':>9}")
    for r in rows:
        say(f"{r['peers']:>5} {r['rows']:>6} {r['H']:>6} {r['fused_us']:>10.1f} {r['unfused_us']:>11.1f} "
            f"{r['speedup']:>8.2f} {r['fused_GBps']:>8.2f} {r['max_abs_diff_y']:>9.2e} {r['max_abs_diff_s']:>9.2e}")


def print_table(rows: list[dict[str, Any]], backend: str) -> None:
    say(f"{'collective':>15} {'bytes':>11} {'ws us':>10} {'ws algbw':>9} {'ws busbw':>9} {backend + ' us':>10} "
        f"{'algbw':>9} {'busbw':>9} {'pred us':>9} {'pred alg':>9}  warpsmith path")
    for r in rows:
        say(f"{r['collective']:>15} {r['bytes']:>11} {r['warpsmith_us']:>10.1f} {r['warpsmith_algbw_GBps']:>9.3f} "
            f"{r['warpsmith_busbw_GBps']:>9.3f} {r['torch_us']:>10.1f} {r['torch_algbw_GBps']:>9.3f} "
            f"{r['torch_busbw_GBps']:>9.3f} {r['predicted_us']:>9.2f} {r['predicted_algorithm']:>9}  "
            f"{r['warpsmith_path']}")


def _dry_worker(rank: int, world: int, collectives, sizes, dtype_name, iters, warmup, topology):
    return measure(rank, world, collectives, sizes, dtype_name, iters, warmup, topology)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collectives", default=",".join(COLLECTIVES), help="comma-separated (default: all)")
    p.add_argument("--dtype", default="bfloat16", help="bfloat16 (default), float16 or float32")
    p.add_argument("--iters", type=int, default=20, help="timed calls per size (dry run: 2)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls first (dry run: 1)")
    p.add_argument("--topology", default="nvlink", help="the alpha-beta model's topology: nvlink, pcie, multinode")
    p.add_argument("--out", default=".", help="output folder (default: here)")
    p.add_argument("--dry-run", action="store_true", help="CPU world with gloo, tiny sizes (checks the script)")
    p.add_argument("--world", type=int, default=2, help="dry run: processes (default 2)")
    p.add_argument("--single-device", action="store_true",
                   help="only the single-device part: the fused all-reduce + add + RMSNorm vs the unfused sequence")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from warpsmith.cost import comm_model
    from warpsmith.errors import InvalidInputError

    colls = tuple(c for c in args.collectives.split(",") if c)
    bad = [c for c in colls if c not in COLLECTIVES]
    if bad:
        raise InvalidInputError("--collectives", "names from " + ",".join(COLLECTIVES), ",".join(bad))
    comm_model.topology(args.topology)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    if args.single_device and not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            say("--single-device needs a GPU; use --dry-run on a CPU")
            return 2
        single = single_device(FUSED_CASES, args.dtype, args.iters, args.warmup)
        print_single(single)
        write_json(out / f"comm_{date}.json", {"benchmark": "comm", "dry_run": False, "rows": [],
                                               "single_device": single, "device": torch.cuda.get_device_name()})
        return 0
    single = []
    if args.dry_run:
        from warpsmith.comm.local import run_world

        single = single_device(DRY_FUSED_CASES, args.dtype, 1, 0)
        print_single(single)
        rows = run_world(_dry_worker, args.world, colls, DRY_SIZES, args.dtype, min(args.iters, 2),
                         min(args.warmup, 1), args.topology, timeout_s=300)[0]
        backend, device = "gloo", f"cpu (dry run, {args.world} processes; times are Triton's interpreter, not bandwidth)"
    else:
        import torch
        import torch.distributed as dist

        if not torch.cuda.is_available() or "LOCAL_RANK" not in os.environ:
            say("the real run needs GPUs and torchrun (see the docstring); use --dry-run on a CPU")
            return 2
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
        from warpsmith import comm

        try:  # torch's symmetric-memory allocator: the one-shot all-reduce runs there (never run so far)
            comm.attach(capacity=1 << 24, topology=args.topology, device="cuda")
        except Exception as e:  # noqa: BLE001 -- reported; the rows then say torch.distributed fallback
            say(f"warpsmith.comm's CUDA buffers not attached ({type(e).__name__}: {e})")
        rows = measure(dist.get_rank(), dist.get_world_size(), colls, SIZES, args.dtype, args.iters,
                       args.warmup, args.topology)
        backend, device = "nccl", f"{dist.get_world_size()} x {torch.cuda.get_device_name()}"
        if dist.get_rank() != 0:
            dist.destroy_process_group()
            return 0
    print_table(rows, backend)
    write_json(out / f"comm_{date}.json", {"benchmark": "comm", "dry_run": args.dry_run, "device": device,
                                           "reference_backend": backend, "rows": rows, "single_device": single,
                                           "note": "bandwidth is claimed only from a multi-GPU run"})
    if not args.dry_run:
        import torch.distributed as dist

        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
