"""Cost model for memory-bound kernels (normalization, softmax, activations, RoPE, losses).

A variant describes one config's work as a :class:`MemoryWork` (``Variant.work``); this module
turns it into a predicted time on a target. It accounts for

- bytes moved to and from DRAM, re-reads included (a looped softmax reads its row twice);
- occupancy: resident programs per SM, limited by warps, registers and shared memory;
- latency hiding (Little's law): DRAM reaches its bandwidth only with enough bytes in flight;
  each resident program keeps about one block of loads outstanding;
- wave quantization: the last wave of programs runs with fewer in flight;
- the latency chain of a program's dependent loop iterations (plus the wave's bytes moved from L2
  to the SMs after the first round trip) and per-program overhead;
- one launch overhead per kernel launched;
- math, where a kernel also does some (a fused linear cross-entropy's matmuls): the time is at
  least ``flops`` at the target's peak for ``math_kind`` times MATH_EFF.

It is a ranking model; its constants are educated guesses, uncalibrated until GPU
measurements exist, and every figure it gives is labelled *predicted*.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..targets import ConfigFacts, Target

STREAM_EFF = 0.92  # fraction of datasheet DRAM bandwidth a perfect streaming kernel reaches
LATENCY_NS = 700.0  # DRAM round trip under load
PROGRAM_OVERHEAD_NS = 250.0  # launching and retiring one program, not overlapped within its slot
MAX_PROGRAMS_PER_SM = 32
MATH_EFF = 0.7  # fraction of peak matrix throughput a good fused kernel reaches
L2_OVER_HBM = 3.0  # L2 -> SM bandwidth relative to DRAM's (as the GEMM tile model's)


@dataclass(frozen=True)
class MemoryWork:
    """What one config of a memory-bound variant does.

    Attributes:
        bytes_moved: DRAM bytes read and written, re-reads included.
        programs: programs launched (summed over launches).
        num_warps: warps per program.
        block_bytes: bytes one program has in flight per step (one block of loads).
        steps: dependent load steps per program (loop iterations; 1 for a single pass).
        regs_per_thread: estimated 32-bit registers per thread (elements held live, plus overhead).
        smem_bytes: shared memory per program.
        launches: kernel launches.
        flops: floating-point operations (0 for a purely memory-bound kernel).
        math_kind: the peak-table entry those flops run at ("bf16", "fp32", ...).
    """

    bytes_moved: float
    programs: int
    num_warps: int
    block_bytes: float
    steps: float = 1.0
    regs_per_thread: int = 32
    smem_bytes: int = 0
    launches: int = 1
    flops: float = 0.0
    math_kind: str = "fp32"


def with_facts(w: MemoryWork, facts: ConfigFacts | None) -> MemoryWork:
    """``w`` with the compiler's registers and shared memory of the main kernel in place of the
    estimates (unchanged without facts)."""
    if facts is None:
        return w
    return replace(w, regs_per_thread=facts.main.regs, smem_bytes=facts.main.smem_bytes)


def programs_per_sm(w: MemoryWork, target: Target) -> int:
    """Resident programs per SM (0 when one program does not fit)."""
    by_warps = target.max_warps_per_sm // w.num_warps
    regs = min(w.regs_per_thread, target.max_regs_per_thread(w.num_warps))  # beyond: spills, not fewer programs
    by_regs = target.regs_per_sm // max(1, regs * w.num_warps * target.warp_size)
    by_smem = target.smem_per_sm // w.smem_bytes if w.smem_bytes else MAX_PROGRAMS_PER_SM
    return max(0, min(MAX_PROGRAMS_PER_SM, by_warps, by_regs, by_smem))


def _bandwidth(concurrent: int, w: MemoryWork, target: Target) -> float:
    """Bytes/s reached with ``concurrent`` programs each keeping one block in flight."""
    peak = target.hbm_tbps * 1e12 * STREAM_EFF
    return min(peak, concurrent * w.block_bytes / (LATENCY_NS * 1e-9))


def predict_ms(w: MemoryWork, target: Target) -> float:
    """Predicted milliseconds of one config (``inf`` when a program does not fit on an SM)."""
    per_sm = programs_per_sm(w, target)
    if per_sm == 0 or w.programs < 1:
        return math.inf
    slots = per_sm * target.sms
    per_program = w.bytes_moved / w.programs
    full, rest = divmod(w.programs, slots)
    t = 0.0
    for count, n in ((full, slots), (1 if rest else 0, rest)):
        if count:
            wave_bw = n * per_program / _bandwidth(n, w, target)
            chain = w.steps * LATENCY_NS * 1e-9  # a program's dependent round trips
            # a latency-bound wave still moves its bytes from L2 to the SMs once they arrive: the round
            # trips plus the wave's bytes at the L2 -> SM bandwidth (fewer bytes cost less at any size)
            stream = n * per_program / (target.hbm_tbps * 1e12 * L2_OVER_HBM)
            t += count * (max(wave_bw, chain + stream) + PROGRAM_OVERHEAD_NS * 1e-9)
    if w.flops:
        t = max(t, w.flops / (target.peak(w.math_kind) * 1e12 * MATH_EFF))
    return (t + w.launches * target.launch_us * 1e-6) * 1e3
