"""Cost model v1 for GEMM variants: roofline plus a tile model.

Predicted time (ms) of one config on one target. It accounts for

- wave quantization: CTAs are spread over SMs; time goes with the busiest SM's count;
- padding waste: edge tiles compute full BLOCK_M x BLOCK_N x BLOCK_K blocks;
- operand re-reads: DRAM traffic of A and B given the tile shape, the grouped program order
  (GROUP_M) and whether the operands fit in L2; L2->SM traffic per CTA;
- math efficiency of the tile (bigger tiles reuse registers better), software pipelining
  (num_stages), registers per thread (num_warps), and per-tile prologue/epilogue overhead, the
  last tile's store of its valid part of C not overlapped with any math;
- split-K's partials (workspace write + read, or atomics) and its second launch;
- the persistent variant's fewer CTA launches.

Given the compiler's facts (``ConfigFacts``), it uses the kernel's real shared memory and
registers for occupancy, and the loads the compiler really pipelined for the pipelining term;
without them, the shared memory estimate and the stride rule of :func:`pipelined_fraction`.

It is a ranking model: the search optimizes it where no GPU is present, and it orders
candidates before measuring on a GPU. Its figures are always labelled *predicted*.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from ..core.opspec import Problem
from ..targets import ConfigFacts, Target
from .roofline import math_kind

_PIPE_EFF = {1: 0.55, 2: 0.8, 3: 0.95}
_TILE_OVERHEAD_US = 0.35  # prologue + epilogue of one tile not overlapped with math
_L2_OVER_HBM = 3.0  # L2 -> SM bandwidth relative to HBM


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pipelined_fraction(p: Problem, facts: ConfigFacts | None = None) -> float:
    """The share of the K loop's operand loads Triton turns into asynchronous copies.

    Triton pipelines a load only where it knows the strides are multiples of 16 elements (it
    specializes integer arguments on divisibility by 16): an operand whose leading stride (K or
    M for A, N or K for B, by layout) is not one is loaded synchronously whatever ``num_stages``
    says. The compiler's facts, where given, say what it actually did.
    """
    if facts is not None and facts.main.loop_loads:
        return facts.main.pipelined_loads / facts.main.loop_loads
    M, N, K = p.shape["M"], p.shape["N"], p.shape["K"]
    layout = p.attrs.get("layout", "nn")
    lead_a = M if layout[0] == "t" else K
    lead_b = K if layout[1] == "t" else N
    return ((lead_a % 16 == 0) + (lead_b % 16 == 0)) / 2


def math_efficiency(c: Mapping[str, Any], pipelined: float = 1.0) -> float:
    bm, bn, bk, warps = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["num_warps"]
    tile = (min(bm, 128) * min(bn, 256) / (128 * 128)) ** 0.3
    depth = min(1.0, bk / 64) ** 0.15
    per_thread = bm * bn / (32 * warps)
    threads = 1.0 if 16 <= per_thread <= 128 else 0.8
    one = _PIPE_EFF[1]
    pipe = one + (_PIPE_EFF.get(c["num_stages"], 1.0) - one) * pipelined
    return min(1.0, tile) * depth * threads * pipe


def predict_ms(variant: str, p: Problem, c: Mapping[str, Any], target: Target, smem_bytes: int,
               facts: ConfigFacts | None = None) -> float:
    M, N, K = p.shape["M"], p.shape["N"], p.shape["K"]
    batch = p.shape.get("B", 1)
    e = p.dtype.itemsize
    bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
    split = c.get("SPLIT_K", 1) if variant == "splitk" else 1
    tm, tn = _cdiv(M, bm), _cdiv(N, bn)
    tiles = tm * tn * batch
    k_per = _cdiv(_cdiv(K, split), bk) * bk
    ctas = tiles * split

    threads = c["num_warps"] * target.warp_size
    by_regs = 4
    if facts is not None:
        smem_bytes = facts.main.smem_bytes
        by_regs = target.regs_per_sm // max(1, facts.main.regs * threads)
    occ = max(1, min(target.smem_per_sm // max(smem_bytes, 1), target.max_warps_per_sm // c["num_warps"], by_regs, 4))
    programs = min(ctas, c.get("PROGRAMS_PER_SM", 1) * target.sms) if variant == "persistent" else ctas
    per_sm = _cdiv(ctas, target.sms)  # CTAs (tiles) the busiest SM processes

    # math: padded tile work on the busiest SM at the SM's share of peak
    peak_sm = target.peak(math_kind(p.dtype, c.get("PRECISION", "ieee"))) * 1e12 / target.sms
    flops_cta = 2.0 * bm * bn * k_per
    compute_s = per_sm * flops_cta / (peak_sm * math_efficiency(c, pipelined_fraction(p, facts)))
    # latency hiding needs warps: few resident warps and shallow pipelines stall
    resident = min(occ, _cdiv(ctas, target.sms)) * c["num_warps"]
    if resident < 8 and c["num_stages"] < 3:
        compute_s *= 1.25

    # L2 -> SM operand traffic of the busiest SM
    l2_s = per_sm * (bm + bn) * k_per * e / (target.hbm_tbps * 1e12 * _L2_OVER_HBM / target.sms)

    # DRAM traffic: unique operands if they stay in L2, else re-reads shaped by the grouped order
    a_bytes, b_bytes = M * K * e, K * N * e
    if a_bytes + b_bytes <= target.l2_bytes // 2:
        operand = a_bytes + b_bytes
    else:
        concurrent = max(1, min(tm * tn, target.sms * occ // split))
        gm = min(c["GROUP_M"], tm)
        gn = max(1, min(tn, concurrent // gm))
        waves = _cdiv(tm * tn, concurrent)
        operand = max(a_bytes + b_bytes, waves * (gm * bm + gn * bn) * K * e)
    dram = batch * (operand + M * N * e) + (N * e if p.attrs.get("bias") else 0)
    extra_launches = 0
    if variant == "splitk":
        partial = batch * M * N * 4
        if c.get("REDUCE") == "atomic":
            dram += 3 * partial  # zero-fill, atomics resolve in L2 but lines still move, read back
            compute_s *= 1.05
            extra_launches = 2
        else:
            dram += 2 * split * partial
            extra_launches = 1
    dram_s = dram / (target.hbm_tbps * 1e12)

    tile_overhead = _TILE_OVERHEAD_US * 1e-6 * (per_sm / occ if variant != "persistent" else
                                                 0.5 * per_sm / min(occ, max(1, _cdiv(programs, target.sms))))
    # the last tile's epilogue (storing its valid part of C) overlaps no other tile's math
    epilogue_s = min(bm, M) * min(bn, N) * e / (target.hbm_tbps * 1e12 * _L2_OVER_HBM / target.sms)
    total = max(compute_s, l2_s, dram_s) + tile_overhead + epilogue_s + (1 + extra_launches) * target.launch_us * 1e-6
    return total * 1e3 if math.isfinite(total) else math.inf
